//! Checks of a DASH-IF thumbnail AdaptationSet (an image set of sprite sheets): the grid, the
//! sizes, and that every sheet the template names for the presentation exists as the image
//! type the set declares.
//!
//! Why apart from the media checks: an image set has no timeline and no init segment; its
//! sheets follow from the template's fixed duration and the presentation's length.

use super::context::{attr, child, Ctx};
use super::timeline::fill_template;
use crate::dash::THUMBNAIL_TILE_SCHEME;
use crate::hls::resolve;
use roxmltree::Node;

/// Whether a Representation (or its AdaptationSet) carries images.
pub(super) fn is_image(set: Node<'_, '_>, rep: Node<'_, '_>) -> bool {
    attr(rep, set, "contentType") == Some("image")
        || attr(rep, set, "mimeType").is_some_and(|m| m.starts_with("image/"))
}

/// The file signature of an image MIME type.
fn looks_like(mime: &str, bytes: &[u8]) -> bool {
    match mime {
        "image/jpeg" => bytes.starts_with(&[0xFF, 0xD8, 0xFF]),
        "image/png" => bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "image/webp" => bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP",
        _ => false,
    }
}

/// Checks one image Representation `id` (reported as `at`).
pub(super) fn check_tiles(
    ctx: &Ctx<'_>,
    set: Node<'_, '_>,
    rep: Node<'_, '_>,
    (at, id): (&str, &str),
    problems: &mut Vec<String>,
) {
    let number = |name: &str| attr(rep, set, name).and_then(|v| v.parse::<u64>().ok());
    let (width, height) = (number("width"), number("height"));
    if width.is_none() || height.is_none() {
        problems.push(format!(
            "{at}: an image Representation without width and height"
        ));
    }
    let mime = attr(rep, set, "mimeType").unwrap_or_default();
    if !["image/jpeg", "image/png", "image/webp"].contains(&mime) {
        problems.push(format!(
            "{at}: mimeType {mime:?} is not a thumbnail image type"
        ));
    }
    let grid = [rep, set]
        .iter()
        .flat_map(|n| n.children())
        .find(|p| {
            p.tag_name().name() == "EssentialProperty"
                && p.attribute("schemeIdUri") == Some(THUMBNAIL_TILE_SCHEME)
        })
        .and_then(|p| p.attribute("value"))
        .and_then(|v| v.split_once('x'))
        .and_then(|(c, r)| Some((c.parse::<u64>().ok()?, r.parse::<u64>().ok()?)))
        .filter(|&(c, r)| c > 0 && r > 0);
    match (grid, width, height) {
        (None, ..) => problems.push(format!(
            "{at}: no EssentialProperty {THUMBNAIL_TILE_SCHEME} with a \"CxR\" grid"
        )),
        (Some((c, r)), Some(w), Some(h)) if w % c != 0 || h % r != 0 => problems.push(format!(
            "{at}: {w}x{h} does not divide into a {c}x{r} grid of tiles"
        )),
        _ => {}
    }
    let Some(tpl) = child(rep, "SegmentTemplate").or_else(|| child(set, "SegmentTemplate")) else {
        problems.push(format!("{at}: an image set without a SegmentTemplate"));
        return;
    };
    let value = |name: &str, default: u64| {
        tpl.attribute(name)
            .map_or(Some(default), |v| v.parse::<u64>().ok())
    };
    let (Some(media), Some(Some(duration)), Some(timescale), Some(start)) = (
        tpl.attribute("media"),
        tpl.attribute("duration").map(|d| d.parse::<u64>().ok()),
        value("timescale", 1).filter(|t| *t > 0),
        value("startNumber", 1),
    ) else {
        problems.push(format!(
            "{at}: the SegmentTemplate needs media, a duration and a positive timescale"
        ));
        return;
    };
    let sheet_seconds = duration as f64 / timescale as f64;
    let Some(total) = ctx.total.filter(|_| sheet_seconds > 0.0) else {
        return;
    };
    // A hair over a whole number of sheets is float noise, not one more sheet.
    let sheets = ((total / sheet_seconds) - 1e-6).ceil().max(1.0) as u64;
    let bandwidth = number("bandwidth").unwrap_or(0);
    for k in 0..sheets {
        let n = start.saturating_add(k);
        let uri = match fill_template(media, id, bandwidth, n, k * duration) {
            Ok(u) => resolve(ctx.dir, &u),
            Err(e) => {
                problems.push(format!("{at}: {e}"));
                return;
            }
        };
        match (ctx.read)(&uri) {
            None => problems.push(format!(
                "{uri}: missing (sheet {n} of image Representation {id:?} in {})",
                ctx.mpd
            )),
            Some(bytes) if !looks_like(mime, &bytes) => problems.push(format!(
                "{uri}: not a {mime} file (sheet {n} of image Representation {id:?} in {})",
                ctx.mpd
            )),
            Some(_) => {}
        }
    }
}
