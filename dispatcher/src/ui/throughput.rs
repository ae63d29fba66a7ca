//! The throughput page: jobs done and failed per hour and minutes of video delivered per hour
//! over the last day, drawn as SVG on the server, and the day's failures by error code.
//!
//! Why from the job table: it is what the dispatcher keeps across restarts (the Prometheus
//! counters start at zero with each process); a done job's report holds its video seconds.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};

use super::page::{answer, frame, read, utc};
use super::session::Session;
use super::UiState;
use crate::db::HourCount;

/// Hours the chart covers, the current one last.
const HOURS: i64 = 24;
/// One bar's width in CSS pixels.
const BAR: i64 = 30;
/// The chart's width: a bar an hour.
const WIDTH: i64 = BAR * HOURS;
/// The chart's height, the hour labels included.
const HEIGHT: i64 = 160;

/// `GET /ui/throughput`.
pub async fn show(State(state): State<UiState>, session: Session) -> Response {
    let now_hour = crate::metrics::unix_now() / 3600;
    let first = now_hour - (HOURS - 1);
    let owner = (!session.who.admin).then(|| session.who.tenant.clone());
    let db = state.db.clone();
    let counts = match read(&session, move || {
        db.ended_by_hour(first * 3600, owner.as_deref())
    })
    .await
    {
        Ok(c) => c,
        Err(page) => return page,
    };
    let mut by_code: BTreeMap<&str, u64> = BTreeMap::new();
    for c in counts.iter().filter(|c| c.state == "failed") {
        *by_code
            .entry(c.code.as_deref().unwrap_or("unknown"))
            .or_default() += c.jobs;
    }
    let body = html! {
        h2 { "Jobs ended per hour, last 24 hours (UTC)" }
        (chart(&counts, first))
        h2 { "Minutes of video delivered per hour, last 24 hours (UTC)" }
        (minutes_chart(&counts, first))
        h2 { "Failures by error code, last 24 hours" }
        @if by_code.is_empty() {
            p { "No failures." }
        } @else {
            table.codes id="failures" {
                tbody { @for (code, n) in &by_code { tr { td { code { (code) } } td { (n) } } } }
            }
        }
    };
    answer(
        StatusCode::OK,
        frame("Throughput", Some(&session), None, body),
    )
}

/// Stacked bars, done below failed, one per hour from `first`; each bar's title gives its
/// figures (a browser shows it on hover).
fn chart(counts: &[HourCount], first: i64) -> Markup {
    let mut hours = vec![(0u64, 0u64); HOURS as usize];
    for c in counts {
        if let Some(h) = usize::try_from(c.hour - first)
            .ok()
            .and_then(|i| hours.get_mut(i))
        {
            if c.state == "done" {
                h.0 += c.jobs;
            } else {
                h.1 += c.jobs;
            }
        }
    }
    let top = hours.iter().map(|(d, f)| d + f).max().unwrap_or(0).max(1);
    // Bars stand on y = plot, the hour labels below, the scale's label above the tallest.
    let plot = HEIGHT - 20;
    let scale = |n: u64| (n as i64 * (plot - 18)) / top as i64;
    html! {
        svg.chart id="throughput" xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(HEIGHT)
            viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label="jobs ended per hour" {
            @for (i, (done, failed)) in hours.iter().enumerate() {
                @let x = i as i64 * BAR;
                @let (hd, hf) = (scale(*done), scale(*failed));
                g {
                    title { (utc((first + i as i64) * 3600)) ": " (done) " done, " (failed) " failed" }
                    rect.done x=(x + 2) y=(plot - hd) width=(BAR - 4) height=(hd) {}
                    rect.failed x=(x + 2) y=(plot - hd - hf) width=(BAR - 4) height=(hf) {}
                }
                @if i % 6 == 0 {
                    text x=(x + 2) y=(HEIGHT - 4) { (&utc((first + i as i64) * 3600)[11..16]) }
                }
            }
            text x=(WIDTH - 4) y="12" text-anchor="end" { "max " (top) " / hour" }
        }
    }
}

/// Minutes of video delivered (done jobs' outputs) per hour from `first`, a bar each; each
/// bar's title gives its figure.
fn minutes_chart(counts: &[HourCount], first: i64) -> Markup {
    let mut minutes = vec![0.0f64; HOURS as usize];
    for c in counts.iter().filter(|c| c.state == "done") {
        if let Some(m) = usize::try_from(c.hour - first)
            .ok()
            .and_then(|i| minutes.get_mut(i))
        {
            *m += c.video_s / 60.0;
        }
    }
    let top = minutes.iter().copied().fold(0.0, f64::max);
    let plot = HEIGHT - 20;
    let height = |m: f64| (m / top.max(1e-9) * (plot - 18) as f64).round() as i64;
    html! {
        svg.chart id="minutes" xmlns="http://www.w3.org/2000/svg" width=(WIDTH) height=(HEIGHT)
            viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img"
            aria-label="minutes of video delivered per hour" {
            @for (i, m) in minutes.iter().enumerate() {
                @let (x, h) = (i as i64 * BAR, height(*m));
                g {
                    title { (utc((first + i as i64) * 3600)) ": " (format!("{m:.1}")) " min of video" }
                    rect.done x=(x + 2) y=(plot - h) width=(BAR - 4) height=(h) {}
                }
                @if i % 6 == 0 {
                    text x=(x + 2) y=(HEIGHT - 4) { (&utc((first + i as i64) * 3600)[11..16]) }
                }
            }
            text x=(WIDTH - 4) y="12" text-anchor="end" { "max " (format!("{top:.1}")) " min / hour" }
        }
    }
}
