//! One job's page: its state and progress, input and outputs, error, report figures, the
//! segments recorded so far, and the cancel or retry form. While the job runs the page
//! reloads itself every two seconds (a `<meta http-equiv="refresh">`: no script).
//!
//! The segment timeline (timeline.rs) shows each segment's recorded run: worker, card, start,
//! end, try and checked frames, kept after the job ends; below it each segment's VMAF and
//! target search (segment_quality.rs).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use tessera_engine::DoneSegment;

use super::jobs::input_of;
use super::page::{answer, csrf_field, error_page, frame, progress, read, utc};
use super::session::Session;
use super::UiState;
use crate::db::{JobRow, JobState};
use crate::jobview::{view, visible};

/// Seconds between reloads of a running job's page.
pub const REFRESH_S: u32 = 2;

/// `GET /ui/jobs/{id}`.
pub async fn show(
    State(state): State<UiState>,
    session: Session,
    Path(id): Path<String>,
) -> Response {
    let db = state.db.clone();
    let who = session.who.clone();
    let found = read(&session, move || {
        let Some(row) = visible(db.get(&id)?, &who) else {
            return Ok(None);
        };
        let done = db
            .resume_state(&row.id)?
            .map(|r| r.done)
            .unwrap_or_default();
        let runs = db.segment_runs(&row.id)?;
        Ok(Some((row, done, runs)))
    });
    let (row, done, runs) = match found.await {
        Ok(Some(found)) => found,
        // Another tenant's job is as missing as one that never was.
        Ok(None) => return error_page(StatusCode::NOT_FOUND, Some(&session), "no such job"),
        Err(page) => return page,
    };
    let refresh = (!row.state.is_final()).then_some(REFRESH_S);
    let body = html! {
        (summary(&row))
        (segments(&row, &done))
        (super::timeline::timeline(&runs))
        (super::segment_quality::segment_quality(row.report.as_ref().unwrap_or(&serde_json::Value::Null)))
        (actions(&row, &session))
    };
    answer(
        StatusCode::OK,
        frame(&format!("Job {}", row.id), Some(&session), refresh, body),
    )
}

/// State, progress, input, outputs, times, error and the report's figures.
fn summary(row: &JobRow) -> Markup {
    let v = view(row);
    let outputs: Vec<String> = v["outputs"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default();
    // Fractions to two places: a page is read, not parsed.
    let shown = |x: &serde_json::Value| match x {
        serde_json::Value::Null => None,
        serde_json::Value::Number(n) if n.is_f64() => n.as_f64().map(|f| format!("{f:.2}")),
        other => Some(other.to_string()),
    };
    let figures = [
        ("Wall time (s)", shown(&v["timings"]["wall_s"])),
        ("Frames", shown(&v["frames"])),
        ("Encode FPS", shown(&v["encode_fps"])),
        (
            "Median segment overhead (s)",
            shown(&v["median_segment_overhead_s"]),
        ),
        ("PSNR (dB)", shown(&v["psnr"])),
        ("VMAF (mean)", shown(&v["vmaf"])),
    ];
    let report = row.report.clone().unwrap_or_default();
    let warnings: Vec<String> = report["warnings"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(|w| w.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    html! {
        dl.job {
            dt { "State" } dd { span id="state" class={ "state " (row.state.as_str()) } { (row.state.as_str()) } }
            dt { "Progress" } dd { (progress(row.segments_done, row.segments_total, row.state == JobState::Done)) }
            dt { "Tenant" } dd { (row.owner) }
            dt { "Input" } dd id="input" { (input_of(row)) }
            @if let Some(title) = report["title"].as_str() { dt { "Title" } dd id="title" { (title) } }
            dt { "Outputs" } dd { ul { @for o in &outputs { li { (o) } } } }
            dt { "Created (UTC)" } dd { (utc(row.created_at)) }
            dt { "Last change (UTC)" } dd { (utc(row.updated_at)) }
            @if let Some(code) = &row.error_code {
                dt { "Error" }
                dd.error id="error" { code { (code) } " " (row.error_message.as_deref().unwrap_or("")) }
            }
            @for (label, value) in &figures {
                @if let Some(value) = value { dt { (label) } dd { (value) } }
            }
        }
        @if !warnings.is_empty() {
            h2 { "Warnings" }
            ul.warnings { @for w in &warnings { li { (w) } } }
        }
    }
}

/// The segments of the running plan: one cell each, done or waiting, with its frames.
fn segments(row: &JobRow, done: &[DoneSegment]) -> Markup {
    let total = row.segments_total;
    html! {
        h2 { "Segments" }
        @if total == 0 {
            p { "Not split yet." }
        } @else if row.state.is_final() {
            p { (row.segments_done) " of " (total) " segments encoded." }
        } @else {
            p { (done.len()) " of " (total) " segments recorded done." }
            ol.segments {
                @for i in 0..total {
                    @match done.iter().find(|d| d.index == i) {
                        Some(d) => li.done title={ "segment " (i) ": " (d.frames) " frames" } { (i) },
                        None => li.waiting title={ "segment " (i) ": not done" } { (i) },
                    }
                }
            }
        }
    }
}

/// Cancel while the job runs; retry once it failed or was cancelled.
fn actions(row: &JobRow, session: &Session) -> Markup {
    html! {
        @if !row.state.is_final() && row.state != JobState::Delivering {
            form.action method="post" action={ "/ui/jobs/" (row.id) "/cancel" } {
                (csrf_field(session))
                button id="cancel" type="submit" { "Cancel job" }
            }
        }
        @if matches!(row.state, JobState::Failed | JobState::Cancelled) {
            form.action method="post" action={ "/ui/jobs/" (row.id) "/retry" } {
                (csrf_field(session))
                button id="retry" type="submit" { "Run again" }
            }
        }
    }
}
