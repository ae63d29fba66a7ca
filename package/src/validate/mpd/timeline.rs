//! DASH timing text: xs:duration, URL templates and SegmentTimeline expansion.
//!
//! Why apart: these are pure functions over strings and numbers, tested on their own.

use super::context::NS;
use roxmltree::Node;

/// A cap on expanded timeline entries, so a hostile `r` cannot make the check run forever.
const MAX_SEGMENTS: u64 = 1_000_000;

/// Parses an xs:duration such as "PT1H2M3.5S" or "P1DT2S" into seconds.
pub fn parse_duration(text: &str) -> Option<f64> {
    let rest = text.trim().strip_prefix('P')?;
    let (date, time) = rest.split_once('T').unwrap_or((rest, ""));
    let mut secs = 0.0;
    let mut take = |part: &str, units: &[(char, f64)]| -> Option<()> {
        let mut num = String::new();
        for c in part.chars() {
            if c.is_ascii_digit() || c == '.' {
                num.push(c);
            } else {
                let scale = units.iter().find(|(u, _)| *u == c)?.1;
                secs += num.parse::<f64>().ok()? * scale;
                num.clear();
            }
        }
        num.is_empty().then_some(())
    };
    take(date, &[('D', 86_400.0)])?;
    take(time, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    (!rest.is_empty() && rest != "T").then_some(secs)
}

/// Fills a DASH URL template ($RepresentationID$, $Bandwidth$, $Number$, $Time$ with an
/// optional %0Nd width, $$).
pub fn fill_template(
    template: &str,
    id: &str,
    bandwidth: u64,
    number: u64,
    time: u64,
) -> Result<String, String> {
    let mut out = String::new();
    let mut parts = template.split('$');
    out.push_str(parts.next().unwrap_or(""));
    let mut inside = true;
    for part in parts {
        if !inside {
            out.push_str(part);
            inside = true;
            continue;
        }
        inside = false;
        let (name, width) = match part.split_once('%') {
            Some((n, f)) => {
                let w = f
                    .strip_prefix('0')
                    .and_then(|f| f.strip_suffix('d'))
                    .and_then(|w| w.parse::<usize>().ok());
                (
                    n,
                    Some(w.ok_or_else(|| format!("bad format {part:?} in template {template:?}"))?),
                )
            }
            None => (part, None),
        };
        let value = match name {
            "" => "$".to_string(),
            "RepresentationID" => id.to_string(),
            "Bandwidth" => bandwidth.to_string(),
            "Number" => number.to_string(),
            "Time" => time.to_string(),
            _ => {
                return Err(format!(
                    "unknown identifier ${part}$ in template {template:?}"
                ))
            }
        };
        match width {
            Some(w) => out.push_str(&format!("{value:0>w$}")),
            None => out.push_str(&value),
        }
    }
    if inside {
        Ok(out)
    } else {
        Err(format!("unbalanced '$' in template {template:?}"))
    }
}

/// Expands `<S t d r>` into (start, duration) per segment, reporting gaps and overlaps.
pub(super) fn expand(
    at: &str,
    timeline: Node<'_, '_>,
    timescale: u64,
    total: Option<f64>,
    problems: &mut Vec<String>,
) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut now: Option<u64> = None;
    for s in timeline.children().filter(|n| n.has_tag_name((NS, "S"))) {
        let num = |n: &str| {
            s.attribute(n).map(|v| {
                v.parse::<i64>()
                    .map_err(|_| format!("{at}: S@{n}={v:?} is not an integer"))
            })
        };
        let (t, d, r) = match (
            num("t").transpose(),
            num("d").transpose(),
            num("r").transpose(),
        ) {
            (Ok(t), Ok(Some(d)), Ok(r)) if d > 0 && t.unwrap_or(0) >= 0 => {
                (t.map(|t| t as u64), d as u64, r.unwrap_or(0))
            }
            (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => {
                problems.push(e);
                return out;
            }
            _ => {
                problems.push(format!("{at}: an S element without a positive d"));
                return out;
            }
        };
        let start = match (t, now) {
            (Some(t), Some(end)) if t != end => {
                let what = if t > end { "gap" } else { "overlap" };
                problems.push(format!(
                    "{at}: S t={t} leaves a {what} after the previous segment ending at {end}"
                ));
                t
            }
            (Some(t), _) => t,
            (None, end) => end.unwrap_or(0),
        };
        let repeats = if r >= 0 {
            r as u64
        } else {
            let end = (total.unwrap_or(0.0) * timescale as f64).round() as u64;
            end.saturating_sub(start).div_ceil(d).saturating_sub(1)
        };
        if out.len() as u64 + repeats >= MAX_SEGMENTS {
            problems.push(format!(
                "{at}: the SegmentTimeline names more than {MAX_SEGMENTS} segments"
            ));
            return out;
        }
        let mut t = start;
        for _ in 0..=repeats {
            out.push((t, d));
            t = t.saturating_add(d);
        }
        now = Some(t);
    }
    if out.is_empty() {
        problems.push(format!("{at}: the SegmentTimeline is empty"));
    }
    out
}
