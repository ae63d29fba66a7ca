//! Still images (posters, thumbnails, sprite tiles): the formats, what to make of which
//! frame, and a sprite sheet's request and result.
//!
//! Why plain data: the dispatcher plans stills into segment tasks and the packager writes
//! their manifests; neither links FFmpeg.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The image codec of a still.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// Baseline JPEG (every browser and player).
    #[default]
    Jpeg,
    /// Lossy WebP (smaller; browsers, not every TV).
    Webp,
}

impl ImageFormat {
    /// The file extension.
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Webp => "webp",
        }
    }

    /// The MIME type (for manifests).
    pub fn mime(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Webp => "image/webp",
        }
    }
}

/// One image to make of a frame: its size, codec and quality.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StillImage {
    /// Width in pixels (even).
    pub width: u32,
    /// Height in pixels (even).
    pub height: u32,
    /// JPEG or WebP.
    pub format: ImageFormat,
    /// 1 (smallest) to 100 (best).
    pub quality: u8,
}

/// The images of one source frame, for a segment encode to write.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StillShot {
    /// Source pts (unbiased, like [`crate::encode::SegmentSource::keyframes`]) of the frame.
    pub pts: i64,
    /// The images and the files they go to.
    pub images: Vec<(StillImage, PathBuf)>,
}

/// One sheet to compose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpriteRequest {
    /// Tile images in reading order (left to right, top to bottom); at most
    /// `columns` x `rows`.
    pub tiles: Vec<PathBuf>,
    /// Tiles per row.
    pub columns: u32,
    /// Rows of the sheet.
    pub rows: u32,
    /// Size of one tile in pixels (even); each tile is scaled to it if it differs.
    pub tile_width: u32,
    /// Height of one tile in pixels (even).
    pub tile_height: u32,
    /// The sheet's codec and quality (its size is the grid's).
    pub format: ImageFormat,
    /// 1..=100.
    pub quality: u8,
    /// The sheet file.
    pub output: PathBuf,
}

/// What a sheet came out as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpriteResult {
    /// Sheet size in pixels.
    pub width: u32,
    /// Sheet height.
    pub height: u32,
    /// Tiles placed.
    pub tiles: u32,
}
