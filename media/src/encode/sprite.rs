//! Sprite sheets: tiles (small stills from the segment encodes) laid out in a grid and
//! written as one image, for players' scrub-bar previews.
//!
//! Why composed, not decoded again: the tiles come from frames the segment workers already
//! decoded; a sheet only decodes those few-kilobyte images.

use ffmpeg_next as ff;

use super::stills::{scale, write_image};
use crate::MediaError;
use tessera_model::images::SpriteRequest;
use tessera_model::images::SpriteResult;
use tessera_model::images::StillImage;

/// Composes the sheet: each tile decoded, placed at its cell; cells past the last tile stay
/// black. Fails naming the tile that cannot be read.
pub fn compose_sprite(req: &SpriteRequest) -> Result<SpriteResult, MediaError> {
    crate::init();
    let (tw, th) = (req.tile_width, req.tile_height);
    let cells = req.columns.saturating_mul(req.rows);
    if tw < 2 || th < 2 || tw % 2 == 1 || th % 2 == 1 || cells == 0 {
        return Err(MediaError::InvalidRequest(format!(
            "sprite {}: tile {tw}x{th} in {}x{} cells (tiles need even sizes, a grid cells)",
            req.output.display(),
            req.columns,
            req.rows
        )));
    }
    if req.tiles.len() > cells as usize {
        return Err(MediaError::InvalidRequest(format!(
            "sprite {}: {} tiles for {cells} cells",
            req.output.display(),
            req.tiles.len()
        )));
    }
    let image = StillImage {
        width: tw * req.columns,
        height: th * req.rows,
        format: req.format,
        quality: req.quality,
    };
    let pixel = match req.format {
        tessera_model::images::ImageFormat::Jpeg => ff::format::Pixel::YUVJ420P,
        tessera_model::images::ImageFormat::Webp => ff::format::Pixel::YUV420P,
    };
    let mut sheet = ff::frame::Video::new(pixel, image.width, image.height);
    fill_black(&mut sheet, pixel == ff::format::Pixel::YUVJ420P);
    for (i, tile) in req.tiles.iter().enumerate() {
        let decoded = decode_image(tile)?;
        let fitted = scale(&decoded, tw, th, pixel)?;
        let (col, row) = (i as u32 % req.columns, i as u32 / req.columns);
        blit(&mut sheet, &fitted, col * tw, row * th);
    }
    write_image(&mut sheet, image, &req.output)?;
    Ok(SpriteResult {
        width: image.width,
        height: image.height,
        tiles: req.tiles.len() as u32,
    })
}

/// The first frame of an image file.
fn decode_image(path: &std::path::Path) -> Result<ff::frame::Video, MediaError> {
    let mut ictx = ff::format::input(path).map_err(|e| MediaError::invalid(path, e))?;
    let stream = ictx
        .streams()
        .best(ff::media::Type::Video)
        .ok_or_else(|| MediaError::invalid(path, "not an image"))?;
    let index = stream.index();
    let ctx = ff::codec::Context::from_parameters(stream.parameters())
        .map_err(|e| MediaError::decode(path, e))?;
    let mut decoder = ctx
        .decoder()
        .video()
        .map_err(|e| MediaError::decode(path, e))?;
    let mut frame = ff::frame::Video::empty();
    for (s, packet) in ictx.packets() {
        if s.index() != index {
            continue;
        }
        decoder
            .send_packet(&packet)
            .map_err(|e| MediaError::decode(path, e))?;
        if decoder.receive_frame(&mut frame).is_ok() {
            return Ok(frame);
        }
    }
    let _ = decoder.send_eof();
    decoder
        .receive_frame(&mut frame)
        .map(|()| frame)
        .map_err(|_| MediaError::decode(path, "no picture in the image"))
}

/// Black in every plane: luma at its floor (0 full range, 16 limited), chroma neutral.
fn fill_black(frame: &mut ff::frame::Video, full_range: bool) {
    let luma = if full_range { 0 } else { 16 };
    for plane in 0..frame.planes() {
        let value = if plane == 0 { luma } else { 128 };
        frame.data_mut(plane).fill(value);
    }
}

/// Copies `tile` (4:2:0, same pixel format) into `sheet` with its top-left corner at (x, y),
/// both even.
fn blit(sheet: &mut ff::frame::Video, tile: &ff::frame::Video, x: u32, y: u32) {
    for plane in 0..3 {
        let shift = u32::from(plane > 0);
        let (px, py) = ((x >> shift) as usize, (y >> shift) as usize);
        let (w, h) = (
            (tile.width() >> shift) as usize,
            (tile.height() >> shift) as usize,
        );
        let (src_stride, dst_stride) = (tile.stride(plane), sheet.stride(plane));
        let src = tile.data(plane);
        let dst = sheet.data_mut(plane);
        for row in 0..h {
            let from = row * src_stride;
            let to = (py + row) * dst_stride + px;
            dst[to..to + w].copy_from_slice(&src[from..from + w]);
        }
    }
}
