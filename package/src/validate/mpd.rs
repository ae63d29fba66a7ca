//! Checks of a static DASH MPD and the segments its templates and timelines name.
//!
//! Why a module of its own: an MPD names segments indirectly (template + timeline), so the
//! check expands both exactly as a player does and compares each file's boxes with the time
//! the timeline promises.

use super::ReadFn;
use crate::bmff::{init_info, segment_info};
use crate::hls::{dir_of, resolve};
use context::{attr, child, Ctx, NS};
use roxmltree::Node;
use std::collections::HashSet;
use timeline::expand;

mod context;
mod tiles;
mod timeline;
pub use timeline::{fill_template, parse_duration};

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
        return;
    };
    let need = |name: &str, problems: &mut Vec<String>| {
        let v = tpl.attribute(name);
        if v.is_none() {
            problems.push(format!("{at}: SegmentTemplate has no {name}"));
        }
        v
    };
    let timescale = need("timescale", problems)
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0);
    let init = need("initialization", problems);
    let media = need("media", problems);
    let start_number = tpl
        .attribute("startNumber")
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(1);
    let Some(timeline) = child(tpl, "SegmentTimeline") else {
        problems.push(format!("{at}: SegmentTemplate has no SegmentTimeline"));
        return;
    };
    let bw = bandwidth.unwrap_or(0);
    if let Some(init) = init {
        match fill_template(init, &id, bw, 0, 0) {
            Err(e) => problems.push(format!("{at}: {e}")),
            Ok(uri) => check_init(
                ctx,
                &at,
                &id,
                &resolve(ctx.dir, &uri),
                codecs,
                timescale,
                problems,
            ),
        }
    }
    let Some(timescale) = timescale else {
        problems.push(format!(
            "{at}: SegmentTemplate@timescale is not a positive integer"
        ));
        return;
    };
    let entries = expand(&at, timeline, timescale, ctx.total, problems);
    let Some(media) = media else { return };
    for (k, (t, d)) in entries.iter().enumerate() {
        let uri = match fill_template(media, &id, bw, start_number.saturating_add(k as u64), *t) {
            Ok(u) => resolve(ctx.dir, &u),
            Err(e) => {
                problems.push(format!("{at}: {e}"));
                return;
            }
        };
        let Some(bytes) = (ctx.read)(&uri) else {
            problems.push(format!(
                "{uri}: missing (segment {} of Representation {id:?} in {mpd})",
                start_number.saturating_add(k as u64)
            ));
            continue;
        };
        match segment_info(&bytes) {
            Err(e) => problems.push(format!(
                "{uri}: not a readable media segment (Representation {id:?} in {mpd}): {e}"
            )),
            Ok(info) => {
                if info.base_media_decode_time != *t {
                    problems.push(format!(
                        "{uri}: tfdt {} but the SegmentTimeline of Representation {id:?} in {mpd} lists it at t={t}",
                        info.base_media_decode_time
                    ));
                }
                if info.duration != *d {
                    problems.push(format!(
                        "{uri}: lasts {} ticks but the SegmentTimeline of Representation {id:?} in {mpd} says d={d}",
                        info.duration
                    ));
                }
            }
        }
    }
    let seconds = entries.iter().map(|(_, d)| *d).sum::<u64>() as f64 / timescale as f64;
    let longest = entries.iter().map(|(_, d)| *d).max().unwrap_or(0) as f64 / timescale as f64;
    if let Some(total) = ctx.total {
        if (seconds - total).abs() > longest.max(0.1) {
            problems.push(format!(
                "{at}: the SegmentTimeline lasts {seconds:.3} s but mediaPresentationDuration is {total:.3} s"
            ));
        }
    }
}

fn check_init(
    ctx: &Ctx<'_>,
    at: &str,
    id: &str,
    path: &str,
    codecs: Option<&str>,
    timescale: Option<u64>,
    problems: &mut Vec<String>,
) {
    let Some(bytes) = (ctx.read)(path) else {
        problems.push(format!(
            "{path}: missing (initialization of Representation {id:?} in {})",
            ctx.mpd
        ));
        return;
    };
    match init_info(&bytes) {
        Err(e) => problems.push(format!(
            "{path}: not a readable init segment (Representation {id:?} in {}): {e}",
            ctx.mpd
        )),
        Ok(info) => {
            if let (Some(declared), Some(actual)) = (codecs, &info.codec) {
                if declared != actual {
                    problems.push(format!(
                        "{at}: codecs {declared:?} but its init segment {path} declares {actual:?}"
                    ));
                }
            }
            if timescale.is_some_and(|t| t != u64::from(info.timescale)) {
                problems.push(format!(
                    "{at}: SegmentTemplate@timescale {} but {path} has timescale {}",
                    timescale.unwrap_or(0),
                    info.timescale
                ));
            }
        }
    }
}
