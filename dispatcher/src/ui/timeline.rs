//! A job's segment timeline: each segment's run drawn as a bar on one time axis (SVG, made
//! on the server), and a table of the same runs: worker, card, start and end, seconds, the
//! try it was and its checked frames.
//!
//! Why: "why is this upload late?" is answered by where its time went: a segment that waited
//! long for a worker, took several tries, or ran on one slow machine shows at a glance.

use maud::{html, Markup};

use super::page::utc;
use crate::db::SegmentRun;

/// The SVG's width in user units; rows are [`ROW`] high.
const WIDTH: f64 = 600.0;
const ROW: f64 = 12.0;

/// The timeline of `runs` (by segment), or nothing when none is recorded.
pub fn timeline(runs: &[SegmentRun]) -> Markup {
    let Some(origin) = runs.iter().map(|r| r.started_ms).min() else {
        return html! {};
    };
    let end = runs.iter().map(|r| r.ended_ms).max().unwrap_or(origin);
    let span = (end - origin).max(1) as f64;
    let x = |ms: i64| (ms - origin) as f64 / span * WIDTH;
    let seconds = |ms: i64| (ms - origin) as f64 / 1e3;
    let height = ROW * runs.len() as f64;
    html! {
        svg.timeline id="timeline" role="img" viewBox={ "0 0 " (WIDTH) " " (height) }
            aria-label={ "segment runs over " (format!("{:.1}", span / 1e3)) " s" } {
            @for (i, run) in runs.iter().enumerate() {
                rect class={ "run" @if run.attempt > 1 { " retried" } }
                    x=(format!("{:.1}", x(run.started_ms)))
                    y=(format!("{:.1}", i as f64 * ROW + 1.0))
                    width=(format!("{:.1}", (x(run.ended_ms) - x(run.started_ms)).max(1.0)))
                    height=(ROW - 2.0) {
                    title { "segment " (run.segment) " on " (run.worker) }
                }
            }
        }
        table.timeline id="segment-runs" {
            thead { tr {
                th { "Segment" } th { "Worker" } th { "Card" } th { "Start (s)" } th { "End (s)" }
                th { "Encode (s)" } th { "Try" } th { "QC" }
            } }
            tbody {
                @for run in runs {
                    tr {
                        td { (run.segment) }
                        td.worker { (run.worker) }
                        td { @match run.card { Some(c) => { "GPU " (c) }, None => "CPU" } }
                        td title=(utc(run.started_ms / 1000)) { (format!("{:.2}", seconds(run.started_ms))) }
                        td title=(utc(run.ended_ms / 1000)) { (format!("{:.2}", seconds(run.ended_ms))) }
                        td { (format!("{:.2}", run.media_s)) }
                        td { @if run.attempt == 0 { "?" } @else { (run.attempt) } }
                        td { "passed, " (run.frames) " frames" }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(segment: u32, worker: &str, started_ms: i64, ended_ms: i64) -> SegmentRun {
        SegmentRun {
            segment,
            worker: worker.into(),
            card: None,
            attempt: 1,
            started_ms,
            ended_ms,
            media_s: 0.5,
            frames: 25,
        }
    }

    #[test]
    fn bars_share_one_axis_from_the_first_start_to_the_last_end() {
        let mut late = run(1, "<b>w1</b>", 11_000, 13_000);
        late.attempt = 2;
        late.card = Some(1);
        let page = timeline(&[run(0, "w0", 10_000, 12_000), late]).into_string();
        // 10 s to 13 s over 600 units: 200 a second.
        assert!(page.contains(r#"x="0.0" y="1.0" width="400.0""#), "{page}");
        assert!(page.contains(r#"class="run retried" x="200.0""#), "{page}");
        assert!(page.contains("<td>GPU 1</td>"), "{page}");
        assert!(
            page.contains(r#">1.00</td><td title="1970-01-01 00:00:13">3.00<"#),
            "{page}"
        );
        // A worker's id is text, never markup.
        assert!(page.contains("&lt;b&gt;w1&lt;/b&gt;"), "{page}");
        assert!(!page.contains("<b>w1"), "{page}");
        assert_eq!(timeline(&[]).into_string(), "");
    }
}
