//! Checks of a Representation's SegmentTemplate: its attributes, its init segment, and each
//! segment its SegmentTimeline names, against the boxes in the files.
//!
//! Why apart from the Representation checks: expanding the template and comparing each file
//! with the time the timeline promises is the longest part of checking an MPD, and it needs
//! only the template, not the rest of the Representation.

use super::context::{child, Ctx};
use super::timeline::{expand, fill_template};
use crate::bmff::{init_info, segment_info};
use crate::hls::resolve;
use roxmltree::Node;

/// The Representation a template belongs to, as its messages name it.
pub(super) struct RepRef<'r> {
    /// "<mpd>: Representation <id>", the prefix of its messages.
    pub(super) at: &'r str,
    /// Representation@id, for `$RepresentationID$` and messages.
    pub(super) id: &'r str,
    /// Representation@bandwidth (0 when invalid), for `$Bandwidth$`.
    pub(super) bandwidth: u64,
    /// The codecs the Representation (or its set) declares.
    pub(super) codecs: Option<&'r str>,
}

/// Checks the SegmentTemplate `tpl` of `rep` and every file it names.
pub(super) fn check_template(
    ctx: &Ctx<'_>,
    rep: &RepRef<'_>,
    tpl: Node<'_, '_>,
    problems: &mut Vec<String>,
) {
    let at = rep.at;
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
    if let Some(init) = init {
        match fill_template(init, rep.id, rep.bandwidth, 0, 0) {
            Err(e) => problems.push(format!("{at}: {e}")),
            Ok(uri) => check_init(ctx, rep, &resolve(ctx.dir, &uri), timescale, problems),
        }
    }
    let Some(timescale) = timescale else {
        problems.push(format!(
            "{at}: SegmentTemplate@timescale is not a positive integer"
        ));
        return;
    };
    let entries = expand(at, timeline, timescale, ctx.total, problems);
    let Some(media) = media else { return };
    for (k, &(t, d)) in entries.iter().enumerate() {
        let number = start_number.saturating_add(k as u64);
        let uri = match fill_template(media, rep.id, rep.bandwidth, number, t) {
            Ok(u) => resolve(ctx.dir, &u),
            Err(e) => {
                problems.push(format!("{at}: {e}"));
                return;
            }
        };
        check_segment(ctx, rep.id, (&uri, number), (t, d), problems);
    }
    check_timeline_length(ctx, at, &entries, timescale, problems);
}

/// Checks media segment `number` of Representation `id` at `uri`: it exists, and its tfdt
/// and duration are the timeline's `t` and `d`.
fn check_segment(
    ctx: &Ctx<'_>,
    id: &str,
    (uri, number): (&str, u64),
    (t, d): (u64, u64),
    problems: &mut Vec<String>,
) {
    let mpd = ctx.mpd;
    let Some(bytes) = (ctx.read)(uri) else {
        problems.push(format!(
            "{uri}: missing (segment {number} of Representation {id:?} in {mpd})"
        ));
        return;
    };
    match segment_info(&bytes) {
        Err(e) => problems.push(format!(
            "{uri}: not a readable media segment (Representation {id:?} in {mpd}): {e}"
        )),
        Ok(info) => {
            if info.base_media_decode_time != t {
                problems.push(format!(
                    "{uri}: tfdt {} but the SegmentTimeline of Representation {id:?} in {mpd} lists it at t={t}",
                    info.base_media_decode_time
                ));
            }
            if info.duration != d {
                problems.push(format!(
                    "{uri}: lasts {} ticks but the SegmentTimeline of Representation {id:?} in {mpd} says d={d}",
                    info.duration
                ));
            }
        }
    }
}

/// The timeline must last as long as mediaPresentationDuration, within its longest segment
/// (at least 0.1 s).
fn check_timeline_length(
    ctx: &Ctx<'_>,
    at: &str,
    entries: &[(u64, u64)],
    timescale: u64,
    problems: &mut Vec<String>,
) {
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

/// Checks the init segment at `path`: it exists and reads, and its codec and timescale are
/// the ones the MPD declares.
fn check_init(
    ctx: &Ctx<'_>,
    rep: &RepRef<'_>,
    path: &str,
    timescale: Option<u64>,
    problems: &mut Vec<String>,
) {
    let (at, id) = (rep.at, rep.id);
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
            if let (Some(declared), Some(actual)) = (rep.codecs, &info.codec) {
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
