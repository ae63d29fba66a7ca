//! Checks of a static DASH MPD and the segments its templates and timelines name.
//!
//! Why a module of its own: an MPD names segments indirectly (template + timeline), so the
//! check expands both exactly as a player does and compares each file's boxes with the time
//! the timeline promises.

use super::ReadFn;
use crate::hls::{dir_of, resolve};
use context::{attr, child, Ctx, NS};
use roxmltree::Node;
use std::collections::HashSet;
use template::{check_template, RepRef};

mod context;
mod template;
mod tiles;
mod timeline;
/// The template filler, for the unit tests (the checks use it from `template` and `tiles`).
#[cfg(test)]
pub use timeline::fill_template;
pub use timeline::parse_duration;

/// Checks a static MPD (`mpd_path`, root-relative) and every file it names. Returns every
/// problem found; empty means valid.
pub fn validate_mpd(mpd_path: &str, read: ReadFn<'_>) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(bytes) = read(mpd_path) else {
        return vec![format!("{mpd_path}: missing")];
    };
    let text = String::from_utf8_lossy(&bytes);
    let doc = match roxmltree::Document::parse(&text) {
        Ok(d) => d,
        Err(e) => return vec![format!("{mpd_path}: not well-formed XML: {e}")],
    };
    let root = doc.root_element();
    if root.tag_name().name() != "MPD" || root.tag_name().namespace() != Some(NS) {
        return vec![format!(
            "{mpd_path}: the root element is not MPD in the {NS} namespace"
        )];
    }
    if root.attribute("type") != Some("static") {
        problems.push(format!(
            "{mpd_path}: MPD@type is {:?}, not \"static\"",
            root.attribute("type")
        ));
    }
    if root.attribute("profiles").is_none() {
        problems.push(format!("{mpd_path}: MPD has no profiles"));
    }
    let total = root
        .attribute("mediaPresentationDuration")
        .and_then(parse_duration);
    if total.is_none() {
        problems.push(format!(
            "{mpd_path}: MPD has no valid mediaPresentationDuration"
        ));
    }
    if root
        .attribute("minBufferTime")
        .and_then(parse_duration)
        .is_none()
    {
        problems.push(format!("{mpd_path}: MPD has no valid minBufferTime"));
    }
    let ctx = Ctx {
        mpd: mpd_path,
        dir: dir_of(mpd_path),
        read,
        total,
    };
    let mut ids = HashSet::new();
    for period in root.children().filter(|n| n.has_tag_name((NS, "Period"))) {
        for set in period
            .children()
            .filter(|n| n.has_tag_name((NS, "AdaptationSet")))
        {
            for rep in set
                .children()
                .filter(|n| n.has_tag_name((NS, "Representation")))
            {
                check_representation(&ctx, set, rep, &mut ids, &mut problems);
            }
        }
    }
    problems
}

/// Checks one Representation of `set`: its id (unique across the MPD), bandwidth, codecs
/// and size, then its segments, through the template, the BaseURL or the tiles checks.
fn check_representation(
    ctx: &Ctx<'_>,
    set: Node<'_, '_>,
    rep: Node<'_, '_>,
    ids: &mut HashSet<String>,
    problems: &mut Vec<String>,
) {
    let mpd = ctx.mpd;
    let id = rep.attribute("id").unwrap_or_default().to_string();
    let at = format!("{mpd}: Representation {id:?}");
    if id.is_empty() {
        problems.push(format!(
            "{mpd}: a Representation (line {}) has no id",
            rep.document().text_pos_at(rep.range().start).row
        ));
    } else if !ids.insert(id.clone()) {
        problems.push(format!("{at}: id is not unique"));
    }
    let bandwidth = rep
        .attribute("bandwidth")
        .and_then(|b| b.parse::<u64>().ok());
    if bandwidth.is_none() {
        problems.push(format!("{at}: no valid bandwidth"));
    }
    if tiles::is_image(set, rep) {
        tiles::check_tiles(ctx, set, rep, (&at, &id), problems);
        return;
    }
    let codecs = attr(rep, set, "codecs");
    if codecs.is_none() {
        problems.push(format!("{at}: no codecs"));
    }
    let video = attr(rep, set, "contentType") == Some("video")
        || attr(rep, set, "mimeType").is_some_and(|m| m.starts_with("video/"));
    if video && (attr(rep, set, "width").is_none() || attr(rep, set, "height").is_none()) {
        problems.push(format!(
            "{at}: a video Representation without width and height"
        ));
    }
    let Some(tpl) = child(rep, "SegmentTemplate").or_else(|| child(set, "SegmentTemplate")) else {
        check_untemplated(ctx, rep, (&at, &id), problems);
        return;
    };
    let rep = RepRef {
        at: &at,
        id: &id,
        bandwidth: bandwidth.unwrap_or(0),
        codecs,
    };
    check_template(ctx, &rep, tpl, problems);
}

/// A Representation without a SegmentTemplate: its BaseURL file must exist; a SegmentList is
/// reported as not checked, and neither is a problem.
fn check_untemplated(
    ctx: &Ctx<'_>,
    rep: Node<'_, '_>,
    (at, id): (&str, &str),
    problems: &mut Vec<String>,
) {
    let mpd = ctx.mpd;
    if let Some(base) = child(rep, "BaseURL").and_then(|b| b.text()) {
        let path = resolve(ctx.dir, base.trim());
        if (ctx.read)(&path).is_none() {
            problems.push(format!(
                "{path}: missing (BaseURL of Representation {id:?} in {mpd})"
            ));
        }
    } else if child(rep, "SegmentList").is_some() {
        problems.push(format!(
            "{at}: uses a SegmentList, which this check does not expand"
        ));
    } else {
        problems.push(format!("{at}: neither SegmentTemplate nor BaseURL"));
    }
}
