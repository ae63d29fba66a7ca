//! Thumbnails of a package: what the user asks for (a poster, an image every N seconds,
//! sprite sheets with a WebVTT thumbnails track) and the plan of every image: its time, size
//! and file, the tiles of each sheet and the VTT that points into the sheets.
//!
//! Why pure: the dispatcher maps each time to a frame and the segment workers take the
//! images from frames they decode anyway; sizes, names and the sheet layout are arithmetic
//! that must agree between the planner, the composer and the tests.

use tessera_model::images::{ImageFormat, StillImage};

use crate::model::TileTrack;
use crate::vtt::{self, Cue};
use tessera_model::package::thumbnails::ThumbnailSpec;

/// The source as thumbnails see it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Picture {
    /// Coded width.
    pub width: u32,
    /// Coded height.
    pub height: u32,
    /// Display aspect ratio (width / height as shown, sample aspect included).
    pub aspect: f64,
    /// Duration in seconds (first frame to the end of the last).
    pub seconds: f64,
}

/// An image `height` high (never taller than the source), as wide as the display aspect
/// ratio makes it; both even.
pub fn image_size(picture: Picture, height: u32) -> (u32, u32) {
    let h = height.min(picture.height).max(2) & !1;
    let aspect = if picture.aspect.is_finite() && picture.aspect > 0.0 {
        picture.aspect
    } else {
        f64::from(picture.width) / f64::from(picture.height.max(1))
    };
    let w = ((f64::from(h) * aspect / 2.0).round() as u32 * 2).max(2);
    (w, h)
}

/// One frame's images: its time (seconds from the first frame) and each image with its
/// package-relative file (tiles go under `.tiles/`, composed into sheets, not published).
#[derive(Debug, Clone, PartialEq)]
pub struct Shot {
    /// Seconds from the first frame.
    pub time: f64,
    /// Images and their files.
    pub images: Vec<(StillImage, String)>,
}

/// One sprite sheet: its file and its tiles in reading order.
#[derive(Debug, Clone, PartialEq)]
pub struct Sheet {
    /// Package-relative file.
    pub rel: String,
    /// The tiles' package-relative files.
    pub tiles: Vec<String>,
}

/// Every image of a package's thumbnails.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThumbnailPlan {
    /// The frames to take images of, in time order.
    pub shots: Vec<Shot>,
    /// Sprite sheets to compose from tiles.
    pub sheets: Vec<Sheet>,
    /// Tile size (width, height) of the sheets.
    pub tile: (u32, u32),
    /// The thumbnails track (package-relative) and its text, pointing into the sheets.
    pub vtt: Option<(String, String)>,
}

/// Where the sheets and the VTT live.
pub const THUMBNAIL_DIR: &str = "thumbnails";
/// Where tiles are staged (never published).
pub const TILE_DIR: &str = ".tiles";
/// Tiles are JPEG at this quality: they are encoded again into the sheet.
const TILE_QUALITY: u8 = 95;

/// Plans every image of `spec` for `picture`.
pub fn plan(spec: &ThumbnailSpec, picture: Picture) -> ThumbnailPlan {
    let ext = spec.format.extension();
    let still = |(width, height): (u32, u32)| StillImage {
        width,
        height,
        format: spec.format,
        quality: spec.quality,
    };
    let mut shots: Vec<Shot> = Vec::new();
    if let Some(p) = &spec.poster {
        let size = image_size(picture, p.height.unwrap_or(picture.height));
        shots.push(Shot {
            time: p.time.min(picture.seconds),
            images: vec![(still(size), format!("poster.{ext}"))],
        });
    }
    let mut plan = ThumbnailPlan::default();
    if let Some(interval) = spec.interval {
        let count = interval_count(picture.seconds, interval);
        let tile = spec.sprite.as_ref().map(|s| image_size(picture, s.height));
        for k in 0..count {
            let mut images: Vec<(StillImage, String)> = spec
                .heights
                .iter()
                .map(|&h| {
                    let size = image_size(picture, h);
                    let rel = format!("{THUMBNAIL_DIR}/{}p/{k:05}.{ext}", size.1);
                    (still(size), rel)
                })
                .collect();
            if let Some((width, height)) = tile {
                let image = StillImage {
                    width,
                    height,
                    format: ImageFormat::Jpeg,
                    quality: TILE_QUALITY,
                };
                images.push((image, format!("{TILE_DIR}/{k:05}.jpg")));
            }
            shots.push(Shot {
                time: k as f64 * interval,
                images,
            });
        }
        if let (Some(s), Some(tile)) = (&spec.sprite, tile) {
            plan.tile = tile;
            let per_sheet = (s.columns * s.rows) as usize;
            let tiles: Vec<String> = (0..count)
                .map(|k| format!("{TILE_DIR}/{k:05}.jpg"))
                .collect();
            plan.sheets = tiles
                .chunks(per_sheet)
                .enumerate()
                .map(|(n, chunk)| Sheet {
                    rel: format!("{THUMBNAIL_DIR}/{}", sheet_name(&format!("{n:04}"), ext)),
                    tiles: chunk.to_vec(),
                })
                .collect();
            let cues: Vec<Cue> = (0..count)
                .map(|k| {
                    let (n, i) = (k / per_sheet, (k % per_sheet) as u32);
                    let (x, y) = ((i % s.columns) * tile.0, (i / s.columns) * tile.1);
                    let start = k as f64 * interval;
                    Cue {
                        start,
                        end: (start + interval).min(picture.seconds).max(start),
                        text: format!(
                            "{}#xywh={x},{y},{},{}",
                            sheet_name(&format!("{n:04}"), ext),
                            tile.0,
                            tile.1
                        ),
                    }
                })
                .collect();
            let rel = format!("{THUMBNAIL_DIR}/thumbnails.vtt");
            plan.vtt = Some((rel, vtt::whole_file(&cues)));
        }
    }
    shots.sort_by(|a, b| a.time.total_cmp(&b.time));
    plan.shots = shots;
    plan
}

/// The sheets of `plan` as the MPD's thumbnail track (`None` without a sprite); `size_of`
/// gives a written sheet's size in bytes.
pub fn tile_track(
    spec: &ThumbnailSpec,
    plan: &ThumbnailPlan,
    size_of: impl Fn(&str) -> Option<u64>,
) -> Option<TileTrack> {
    let (sprite, interval) = (spec.sprite.as_ref()?, spec.interval?);
    if plan.sheets.is_empty() {
        return None;
    }
    Some(TileTrack {
        // The names `plan` gives the sheets, numbered from 0.
        template: format!(
            "{THUMBNAIL_DIR}/{}",
            sheet_name("$Number%04d$", spec.format.extension())
        ),
        start_number: 0,
        mime: spec.format.mime().to_string(),
        tile: plan.tile,
        columns: sprite.columns,
        rows: sprite.rows,
        interval,
        largest_bytes: plan
            .sheets
            .iter()
            .filter_map(|s| size_of(&s.rel))
            .max()
            .unwrap_or(0),
    })
}

/// A sheet's file name with its number (four digits, or a DASH template's `$Number%04d$`).
fn sheet_name(number: &str, ext: &str) -> String {
    format!("sprite-{number}.{ext}")
}

/// Thumbnails at 0, interval, 2 x interval, ... strictly before the end (at least one).
pub fn interval_count(seconds: f64, interval: f64) -> usize {
    if !(seconds.is_finite() && seconds > 0.0) {
        return 1;
    }
    // A hair below a whole number of intervals is float noise of an exact multiple.
    ((seconds / interval) - 1e-9).ceil().max(1.0) as usize
}

#[cfg(test)]
mod tests;
