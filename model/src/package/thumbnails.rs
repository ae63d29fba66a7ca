//! A package's stills: the poster, thumbnails every N seconds and sprite sheets it asks for.
//!
//! Why in the model: the API validates it and the dispatcher plans it; neither needs the
//! packager's manifest writing.

use serde::{Deserialize, Serialize};

use crate::images::ImageFormat;

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

/// The latest poster time, in seconds. Why a ceiling: a time past the end takes the last
/// frame, so no later one means anything, and the API states a range for every number
/// (no source runs 1e9 s, 31 years).
pub const MAX_POSTER_SECONDS: f64 = 1e9;

/// The most `interval` sizes (each costs a scale and an encode per thumbnail).
pub const MAX_HEIGHTS: usize = 4;

impl ThumbnailSpec {
    /// Checks the rules; the message names the field and the reason.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=100).contains(&self.quality) {
            return Err(format!("quality {} must be within 1..=100", self.quality));
        }
        if let Some(p) = &self.poster {
            if !(p.time.is_finite() && (0.0..=MAX_POSTER_SECONDS).contains(&p.time)) {
                return Err(format!(
                    "poster.time {} must be within 0..={MAX_POSTER_SECONDS} seconds",
                    p.time
                ));
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
