//! The frame every dashboard page shares (head, navigation, sign-out), and the small
//! formatting helpers pages need (times, query strings, error pages).

use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};

use super::session::Session;

/// A whole page: `title`, the viewer's navigation when signed in, `body`; `refresh_s` makes
/// the browser load it again after that many seconds (a running job's progress, without
/// script).
pub fn frame(
    title: &str,
    session: Option<&Session>,
    refresh_s: Option<u32>,
    body: Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                @if let Some(s) = refresh_s {
                    meta http-equiv="refresh" content=(s);
                }
                title { (title) " · tessera" }
                link rel="stylesheet" href="/ui/style.css";
            }
            body {
                header {
                    span.brand { "tessera" }
                    @if let Some(s) = session {
                        nav {
                            a href="/ui/jobs" { "Jobs" }
                            a href="/ui/workers" { "Workers" }
                            a href="/ui/queues" { "Queues" }
                            a href="/ui/throughput" { "Throughput" }
                        }
                        span.who {
                            (s.who.tenant)
                            @if s.who.admin { " (admin)" }
                        }
                        form.inline method="post" action="/ui/logout" {
                            input type="hidden" name="csrf" value=(s.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// `markup` as an HTML answer with `status`.
pub fn answer(status: StatusCode, markup: Markup) -> Response {
    (status, Html(markup.into_string())).into_response()
}

/// An error page: the status, and `message` (escaped like everything else).
pub fn error_page(status: StatusCode, session: Option<&Session>, message: &str) -> Response {
    let title = status.canonical_reason().unwrap_or("Error");
    answer(
        status,
        frame(title, session, None, html! { p.error { (message) } }),
    )
}

/// Runs a database read on a blocking thread (SQLite calls block); a failure becomes the
/// error page to answer.
pub async fn read<T: Send + 'static>(
    session: &Session,
    f: impl FnOnce() -> Result<T, tessera_farm::FarmError> + Send + 'static,
) -> Result<T, Response> {
    let (status, why) = match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => return Ok(v),
        Ok(Err(e)) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    Err(error_page(status, Some(session), &why))
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(secs: i64) -> String {
    tessera_model::civil::utc_datetime(secs)
}

/// `pairs` as a URL query string, each value percent-encoded; empty values are left out.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let encode = |v: &str| -> String {
        v.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    parts.join("&")
}

/// A `<progress>` bar (no inline style: the CSP allows none) and its percentage.
pub fn progress(done: u32, total: u32, finished_ok: bool) -> Markup {
    let (value, max) = if finished_ok {
        (1, 1)
    } else {
        (done, total.max(1))
    };
    let percent = f64::from(value) * 100.0 / f64::from(max);
    html! {
        progress value=(value) max=(max) { (format!("{percent:.0}%")) }
        " " (format!("{percent:.0}%"))
    }
}

/// The CSRF field of a session's forms.
pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name="csrf" value=(session.csrf); }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_queries() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_796_484_254), "2026-12-05 15:24:14");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        let q = query(&[("state", "failed"), ("tenant", ""), ("code", "a&b=<c>")]);
        assert_eq!(q, "state=failed&code=a%26b%3D%3Cc%3E");
    }
}
