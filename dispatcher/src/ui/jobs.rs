//! The jobs list: newest first, filtered by state, tenant (admins) and error code, fifty a
//! page, each row linking to the job's page.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use serde::Deserialize;

use super::page::{answer, error_page, frame, progress, query, read, utc};
use super::session::Session;
use super::UiState;
use crate::db::{JobFilter, JobRow, JobState};
use crate::metrics::ALL_STATES;

/// Jobs on one page.
pub const PAGE: u32 = 50;

/// The list's query string (every field optional; empty means no filter).
#[derive(Debug, Default, Deserialize)]
pub struct ListParams {
    #[serde(default)]
    state: String,
    #[serde(default)]
    tenant: String,
    #[serde(default)]
    code: String,
    #[serde(default)]
    age: String,
    #[serde(default)]
    page: u32,
}

/// The age filter's choices: (query value, seconds, label).
const AGES: [(&str, i64, &str); 3] = [
    ("1h", 3600, "last hour"),
    ("1d", 86_400, "last day"),
    ("7d", 7 * 86_400, "last week"),
];

/// `GET /ui/jobs`.
pub async fn list(
    State(state): State<UiState>,
    session: Session,
    Query(p): Query<ListParams>,
) -> Response {
    let job_state = match p.state.as_str() {
        "" => None,
        s => match JobState::parse(s) {
            Some(s) => Some(s),
            None => return error_page(StatusCode::BAD_REQUEST, Some(&session), "unknown state"),
        },
    };
    // A tenant sees its own jobs whatever it asks for; an admin may pick a tenant.
    let owner = if session.who.admin {
        Some(p.tenant.clone()).filter(|t| !t.is_empty())
    } else {
        Some(session.who.tenant.clone())
    };
    let filter = JobFilter {
        state: job_state,
        owner,
        error_code: Some(p.code.clone()).filter(|c| !c.is_empty()),
        since: AGES
            .iter()
            .find(|(name, _, _)| *name == p.age)
            .map(|(_, secs, _)| crate::metrics::unix_now() - secs),
    };
    let offset = p.page.saturating_mul(PAGE);
    let db = state.db.clone();
    let codes_owner = (!session.who.admin).then(|| session.who.tenant.clone());
    // One row past the page says whether there is a next one.
    let found = read(&session, move || {
        let rows = db.list_filtered(&filter, PAGE + 1, offset)?;
        let codes = db.error_codes(codes_owner.as_deref())?;
        Ok((rows, codes))
    });
    let (mut rows, codes) = match found.await {
        Ok(found) => found,
        Err(page) => return page,
    };
    let more = rows.len() > PAGE as usize;
    rows.truncate(PAGE as usize);
    let body = html! {
        (filters(&session, &p, &codes))
        (table(&rows, session.who.admin))
        (pager(&p, more))
    };
    answer(StatusCode::OK, frame("Jobs", Some(&session), None, body))
}

/// The filter form (a GET: filters are part of the page's address).
fn filters(session: &Session, p: &ListParams, codes: &[String]) -> Markup {
    html! {
        form.filters method="get" action="/ui/jobs" {
            label { "State "
                select name="state" {
                    option value="" { "any" }
                    @for s in ALL_STATES {
                        option value=(s.as_str()) selected[p.state == s.as_str()] { (s.as_str()) }
                    }
                }
            }
            @if session.who.admin {
                label { "Tenant " input type="text" name="tenant" value=(p.tenant) size="12"; }
            }
            label { "Error "
                select name="code" {
                    option value="" { "any" }
                    @for c in codes {
                        option value=(c) selected[&p.code == c] { (c) }
                    }
                }
            }
            label { "Created "
                select name="age" {
                    option value="" { "any time" }
                    @for (value, _, label) in AGES {
                        option value=(value) selected[p.age == value] { (label) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
    }
}

/// The jobs table.
fn table(rows: &[JobRow], admin: bool) -> Markup {
    html! {
        @if rows.is_empty() {
            p { "No jobs." }
        } @else {
            table.jobs {
                thead { tr {
                    th { "Job" } @if admin { th { "Tenant" } } th { "State" } th { "Progress" }
                    th { "Input" } th { "Created (UTC)" } th { "Error" }
                } }
                tbody {
                    @for r in rows {
                        tr {
                            td { a href={ "/ui/jobs/" (r.id) } { code { (r.id) } } }
                            @if admin { td { (r.owner) } }
                            td { span class={ "state " (r.state.as_str()) } { (r.state.as_str()) } }
                            td.progress { (progress(r.segments_done, r.segments_total, r.state == JobState::Done)) }
                            td.input { (input_of(r)) }
                            td { (utc(r.created_at)) }
                            td { (r.error_code.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
    }
}

/// The job's input as the API shows it (`s3://bucket/key`), or its raw JSON.
pub fn input_of(row: &JobRow) -> String {
    match row.request.get("input") {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => match (
            v.get("bucket").and_then(|b| b.as_str()),
            v.get("key").and_then(|k| k.as_str()),
        ) {
            (Some(b), Some(k)) => format!("s3://{b}/{k}"),
            _ => v.to_string(),
        },
        None => String::new(),
    }
}

/// Previous and next links, the filters kept.
fn pager(p: &ListParams, more: bool) -> Markup {
    let link = |page: u32| {
        let n = page.to_string();
        let q = query(&[
            ("state", &p.state),
            ("tenant", &p.tenant),
            ("code", &p.code),
            ("age", &p.age),
            ("page", &n),
        ]);
        format!("/ui/jobs?{q}")
    };
    html! {
        nav.pager {
            @if p.page > 0 { a rel="prev" href=(link(p.page - 1)) { "← Newer" } }
            span { "Page " (p.page + 1) }
            @if more { a rel="next" href=(link(p.page + 1)) { "Older →" } }
        }
    }
}
