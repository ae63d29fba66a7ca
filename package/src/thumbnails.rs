//! Thumbnails of a package: what the user asks for (a poster, an image every N seconds,
//! sprite sheets with a WebVTT thumbnails track) and the plan of every image: its time, size
//! and file, the tiles of each sheet and the VTT that points into the sheets.
//!
//! Why pure: the dispatcher maps each time to a frame and the segment workers take the
//! images from frames they decode anyway; sizes, names and the sheet layout are arithmetic
//! that must agree between the planner, the composer and the tests.

use serde::{Deserialize, Serialize};
use tessera_model::images::{ImageFormat, StillImage};

use crate::model::TileTrack;
use crate::vtt::{self, Cue};

/// `"thumbnails": {...}` in a package spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThumbnailSpec {
    /// "jpeg" (default) or "webp", for every image and sheet.
    #[serde(default)]
    pub format: ImageFormat,
    /// 1 (smallest) to 100 (best); 80 when absent.
    #[serde(default = "quality")]
    pub quality: u8,
    /// One image at a chosen time.
    #[serde(default)]
    pub poster: Option<PosterSpec>,
    /// Seconds between thumbnails (the first at 0); needs `heights` or `sprite`.
    #[serde(default)]
    pub interval: Option<f64>,
    /// Heights of the images taken every `interval` (width from the display aspect ratio).
    #[serde(default)]
    pub heights: Vec<u32>,
    /// Sprite sheets of the `interval` thumbnails, with a WebVTT track for scrub previews.
    #[serde(default)]
    pub sprite: Option<SpriteSpec>,
}

/// The poster image.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PosterSpec {
    /// Seconds from the start (past the end: the last frame).
    #[serde(default)]
    pub time: f64,
    /// Height in pixels; the source's when absent.
    #[serde(default)]
    pub height: Option<u32>,
}

/// The sprite sheets' layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpriteSpec {
    /// Tile height in pixels (90 when absent).
    #[serde(default = "tile_height")]
    pub height: u32,
    /// Tiles per row (10 when absent).
    #[serde(default = "ten")]
    pub columns: u32,
    /// Rows per sheet (10 when absent).
    #[serde(default = "ten")]
    pub rows: u32,
}

fn quality() -> u8 {
    80
}
fn tile_height() -> u32 {
    90
}
fn ten() -> u32 {
    10
}

/// The most `interval` sizes (each costs a scale and an encode per thumbnail).
pub const MAX_HEIGHTS: usize = 4;

impl ThumbnailSpec {
    /// Checks the rules; the message names the field and the reason.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.quality) {
            return Err(format!("quality {} must be within 1..=100", self.quality));
        }
        if let Some(p) = &self.poster {
            if !(p.time.is_finite() && p.time >= 0.0) {
                return Err(format!("poster.time {} must be a time >= 0", p.time));
            }
            if let Some(h) = p.height {
                check_height("poster.height", h)?;
            }
        }
        match self.interval {
            Some(i) if !(i.is_finite() && (0.5..=3600.0).contains(&i)) => {
                return Err(format!("interval {i} must be within 0.5..=3600 seconds"))
            }
            Some(_) if self.heights.is_empty() && self.sprite.is_none() => {
                return Err("interval needs heights, a sprite, or both".into())
            }
            None if !self.heights.is_empty() || self.sprite.is_some() => {
                return Err("heights and sprite need an interval (seconds between images)".into())
            }
            None if self.poster.is_none() => {
                return Err("ask for a poster, an interval, or both".into())
            }
            _ => {}
        }
        if self.heights.len() > MAX_HEIGHTS {
            return Err(format!(
                "heights: at most {MAX_HEIGHTS} sizes, got {}",
                self.heights.len()
            ));
        }
        for (i, &h) in self.heights.iter().enumerate() {
            check_height(&format!("heights[{i}]"), h)?;
        }
        if let Some(s) = &self.sprite {
            if !(16..=720).contains(&s.height) {
                return Err(format!(
                    "sprite.height {} must be within 16..=720",
                    s.height
                ));
            }
            for (name, v) in [("columns", s.columns), ("rows", s.rows)] {
                if !(1..=30).contains(&v) {
                    return Err(format!("sprite.{name} {v} must be within 1..=30"));
                }
            }
        }
        Ok(())
    }
}

fn check_height(field: &str, h: u32) -> Result<(), String> {
    if (16..=4320).contains(&h) {
        Ok(())
    } else {
        Err(format!("{field} {h} must be within 16..=4320"))
    }
}

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
