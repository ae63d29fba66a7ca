//! The dashboard through its router, in-process: sign-in, CSRF refusals, the security
//! headers on every answer, tenants kept apart, hostile strings escaped.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use tower::ServiceExt;

use super::{router, Control, UiState, CSP};
use crate::auth::{ApiToken, Principal};
use crate::db::{Db, JobState};
use crate::error::Refusal;

pub(super) const ACME: &str = "acme-token-0123456789";
const BETA: &str = "beta-token-0123456789";
pub(super) const OPS: &str = "ops-token-0123456789";

/// Records the actions the forms asked for, for the tests to read.
#[derive(Default)]
pub(super) struct Recorder(pub Mutex<Vec<String>>);

impl Control for Recorder {
    fn cancel(&self, who: &Principal, id: &str) -> Result<(), Refusal> {
        self.0
            .lock()
            .unwrap()
            .push(format!("cancel {id} by {}", who.tenant));
        Ok(())
    }

    fn retry(&self, who: &Principal, id: &str) -> Result<String, Refusal> {
        self.0
            .lock()
            .unwrap()
            .push(format!("retry {id} by {}", who.tenant));
        Ok("again".into())
    }
}

/// A dashboard over an in-memory database and queue, tenants acme and beta and an admin.
pub(super) fn dashboard(db: Db) -> (Router, Arc<Recorder>) {
    dashboard_with(db, crate::fleet::Fleet::default(), no_backlog())
}

/// The pools' books with nothing planned.
pub(super) fn no_backlog() -> crate::scaling::Scaling {
    crate::scaling::Scaling::new(Default::default())
}

/// [`dashboard`] with workers' status reports in `fleet` and the pools' books in `scaling`.
pub(super) fn dashboard_with(
    db: Db,
    fleet: crate::fleet::Fleet,
    scaling: crate::scaling::Scaling,
) -> (Router, Arc<Recorder>) {
    let tokens = [
        format!("acme={ACME}"),
        format!("beta={BETA}"),
        format!("ops+admin={OPS}"),
    ]
    .iter()
    .map(|e| ApiToken::parse(e).unwrap())
    .collect();
    let recorder = Arc::new(Recorder::default());
    let state = UiState {
        db,
        queue: Arc::new(tessera_farm::queue::MemoryQueue::new(3)),
        gate: tessera_engine::PublishGate::new(8),
        control: recorder.clone(),
        fleet,
        scaling: Arc::new(scaling),
    };
    (router(Arc::new(tokens)).with_state(state), recorder)
}

/// An answer's status, headers and body text.
pub(super) struct Answer {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub body: String,
}

/// Sends one request: `cookie` and a form `body` (POST) when given.
pub(super) async fn send(app: &Router, path: &str, cookie: &str, form: Option<&str>) -> Answer {
    let mut req = Request::builder().uri(path).header(header::COOKIE, cookie);
    if form.is_some() {
        req = req
            .method("POST")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    }
    let req = req
        .body(Body::from(form.unwrap_or("").to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    let body = axum::body::to_bytes(body, 1 << 24).await.unwrap();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The value of hidden field `csrf` in a page.
pub(super) fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[at..].split('"').next().unwrap().to_string()
}

/// Signs in with `token`; the session cookie and the CSRF token of its pages.
pub(super) async fn sign_in(app: &Router, token: &str) -> (String, String) {
    let form = send(app, "/ui/login", "", None).await;
    let nonce = form.headers[header::SET_COOKIE].to_str().unwrap();
    let nonce = nonce.split(';').next().unwrap().to_string();
    let body = format!("token={token}&csrf={}", csrf_of(&form.body));
    let signed = send(app, "/ui/login", &nonce, Some(&body)).await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    let cookie = signed.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.ends_with("; HttpOnly; SameSite=Strict; Path=/ui"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let jobs = send(app, "/ui/jobs", &cookie, None).await;
    assert_eq!(jobs.status, StatusCode::OK);
    (cookie, csrf_of(&jobs.body))
}

pub(super) fn memory_db() -> Db {
    Db::open(std::path::Path::new(":memory:")).unwrap()
}

#[tokio::test]
async fn sign_in_needs_the_forms_csrf_token_and_a_valid_token() {
    let (app, _) = dashboard(memory_db());
    let form = send(&app, "/ui/login", "", None).await;
    let nonce = form.headers[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let csrf = csrf_of(&form.body);
    for (cookie, field) in [
        ("", csrf.as_str()),
        (nonce.as_str(), ""),
        (nonce.as_str(), "00ff"),
    ] {
        let body = format!("token={ACME}&csrf={field}");
        let a = send(&app, "/ui/login", cookie, Some(&body)).await;
        assert_eq!(
            a.status,
            StatusCode::FORBIDDEN,
            "cookie {cookie:?} csrf {field:?}"
        );
        assert!(a.headers.get(header::SET_COOKIE).is_none());
    }
    let wrong = format!("token=acme-token-012345678&csrf={csrf}");
    let a = send(&app, "/ui/login", &nonce, Some(&wrong)).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
    assert!(a.body.contains("not accepted"));
    sign_in(&app, ACME).await;
    // Without a session every page leads to the form.
    for path in ["/ui/jobs", "/ui/jobs/x", "/ui/queues"] {
        let a = send(&app, path, "tessera_session=00", None).await;
        assert_eq!(
            (a.status, a.headers[header::LOCATION].to_str().unwrap()),
            (StatusCode::SEE_OTHER, "/ui/login")
        );
    }
}

#[tokio::test]
async fn every_action_is_refused_without_the_sessions_csrf_token() {
    let db = memory_db();
    db.insert("j1", "acme", None, &serde_json::json!({}))
        .unwrap();
    let (app, recorder) = dashboard(db);
    let (cookie, csrf) = sign_in(&app, ACME).await;
    let (_, other_csrf) = sign_in(&app, BETA).await;
    for path in ["/ui/jobs/j1/cancel", "/ui/jobs/j1/retry", "/ui/logout"] {
        for field in ["", "csrf=", "csrf=0123", &format!("csrf={other_csrf}")] {
            let a = send(&app, path, &cookie, Some(field)).await;
            assert_eq!(a.status, StatusCode::FORBIDDEN, "{path} with {field:?}");
            assert!(a.body.contains("not sent from this dashboard"));
        }
    }
    assert!(recorder.0.lock().unwrap().is_empty(), "no action ran");
    let ok = format!("csrf={csrf}");
    let a = send(&app, "/ui/jobs/j1/cancel", &cookie, Some(&ok)).await;
    assert_eq!(
        (a.status, a.headers[header::LOCATION].to_str().unwrap()),
        (StatusCode::SEE_OTHER, "/ui/jobs/j1")
    );
    let a = send(&app, "/ui/jobs/j1/retry", &cookie, Some(&ok)).await;
    assert_eq!(a.headers[header::LOCATION], "/ui/jobs/again");
    assert_eq!(
        *recorder.0.lock().unwrap(),
        ["cancel j1 by acme", "retry j1 by acme"]
    );
    let a = send(&app, "/ui/logout", &cookie, Some(&ok)).await;
    let gone = a.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(
        gone.starts_with("tessera_session=;") && gone.contains("Max-Age=0"),
        "{gone}"
    );
}

#[tokio::test]
async fn every_answer_carries_the_csp_and_no_script() {
    let db = memory_db();
    db.insert("j1", "acme", None, &serde_json::json!({}))
        .unwrap();
    let (app, _) = dashboard(db);
    let (cookie, _) = sign_in(&app, OPS).await;
    for path in [
        "/ui/login",
        "/ui/jobs",
        "/ui/jobs?state=queued&page=1",
        "/ui/jobs/j1",
        "/ui/queues",
        "/ui/throughput",
        "/ui/workers",
        "/ui/style.css",
        "/ui/jobs/nope",
    ] {
        let a = send(&app, path, &cookie, None).await;
        assert_eq!(a.headers[header::CONTENT_SECURITY_POLICY], CSP, "{path}");
        assert!(CSP.contains("default-src 'none'") && !CSP.contains("script-src"));
        assert_eq!(
            a.headers[header::X_CONTENT_TYPE_OPTIONS],
            "nosniff",
            "{path}"
        );
        assert_eq!(a.headers[header::X_FRAME_OPTIONS], "DENY", "{path}");
        assert!(
            !a.body.contains("<script") && !a.body.contains("style=\""),
            "{path}"
        );
    }
    let missing = send(&app, "/ui/jobs/nope", &cookie, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn hostile_names_and_errors_render_as_text() {
    let db = memory_db();
    let hostile = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>.mp4";
    let request = serde_json::json!({
        "input": {"bucket": "input", "key": hostile},
        "outputs": [{"destination": {"bucket": "output", "key": format!("out/{hostile}")}}],
    });
    db.insert("evil", "acme", None, &request).unwrap();
    db.fail("evil", JobState::Failed, "<b>code</b>", hostile)
        .unwrap();
    // A done job whose source's title (container metadata) is markup.
    db.insert("titled", "acme", None, &request).unwrap();
    db.finish("titled", &serde_json::json!({"title": hostile}))
        .unwrap();
    let (app, _) = dashboard(db);
    let (cookie, _) = sign_in(&app, ACME).await;
    for path in [
        "/ui/jobs/evil",
        "/ui/jobs/titled",
        "/ui/jobs",
        "/ui/jobs?code=%3Cb%3Ecode%3C%2Fb%3E",
    ] {
        let page = send(&app, path, &cookie, None).await.body;
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{path}: {page}"
        );
        assert!(
            page.contains("&lt;img src=x onerror=alert(2)&gt;"),
            "{path}"
        );
        for raw in ["<script", "<img", "<b>code"] {
            assert!(!page.contains(raw), "{path} has raw {raw}");
        }
    }
}

#[tokio::test]
async fn a_tenant_sees_its_own_jobs_and_an_admin_every_tenants() {
    let db = memory_db();
    db.insert("a1", "acme", None, &serde_json::json!({}))
        .unwrap();
    db.insert("b1", "beta", None, &serde_json::json!({}))
        .unwrap();
    db.finish("a1", &serde_json::json!({"video_s": 90.0}))
        .unwrap();
    db.fail("b1", JobState::Failed, "qc_failed", "bad").unwrap();
    let (app, _) = dashboard(db);
    let (acme, _) = sign_in(&app, ACME).await;
    let own = send(&app, "/ui/jobs?tenant=beta", &acme, None).await.body;
    assert!(own.contains("/ui/jobs/a1") && !own.contains("/ui/jobs/b1"));
    assert_eq!(
        send(&app, "/ui/jobs/b1", &acme, None).await.status,
        StatusCode::NOT_FOUND
    );
    let (ops, _) = sign_in(&app, OPS).await;
    let all = send(&app, "/ui/jobs", &ops, None).await.body;
    assert!(all.contains("/ui/jobs/a1") && all.contains("/ui/jobs/b1"));
    let beta = send(&app, "/ui/jobs?tenant=beta", &ops, None).await.body;
    assert!(!beta.contains("/ui/jobs/a1") && beta.contains("/ui/jobs/b1"));
    let queues = send(&app, "/ui/queues", &ops, None).await.body;
    assert!(queues.contains("tessera.encode.cpu") && queues.contains("id=\"dead-letters\""));
    // The day's chart and failures: the admin's count both tenants, acme's its own.
    let all = send(&app, "/ui/throughput", &ops, None).await.body;
    assert!(
        all.contains("1 done, 1 failed") && all.contains("<code>qc_failed</code>"),
        "{all}"
    );
    // Minutes of video delivered: a1's 90 s; the failed job delivered none.
    assert!(
        all.contains(": 1.5 min of video") && all.contains("max 1.5 min / hour"),
        "{all}"
    );
    let own = send(&app, "/ui/throughput", &acme, None).await.body;
    assert!(
        own.contains("1 done, 0 failed") && own.contains("No failures."),
        "{own}"
    );
}

#[tokio::test]
async fn the_workers_page_sums_each_workers_last_hour_and_a_tenant_sees_its_share() {
    let db = memory_db();
    db.insert("a1", "acme", None, &serde_json::json!({}))
        .unwrap();
    db.insert("b1", "beta", None, &serde_json::json!({}))
        .unwrap();
    let now = crate::db::now_ms();
    let run = |segment, worker: &str, card, attempt| crate::db::SegmentRun {
        segment,
        worker: worker.into(),
        card,
        attempt,
        started_ms: now - 2_000,
        ended_ms: now - 1_000,
        media_s: 0.5,
        frames: 25,
    };
    db.record_segment_run("a1", &run(0, "<i>w0</i>", Some(1), 2))
        .unwrap();
    db.record_segment_run("b1", &run(0, "w1", None, 1)).unwrap();
    let (app, _) = dashboard(db);
    let (ops, _) = sign_in(&app, OPS).await;
    let all = send(&app, "/ui/workers", &ops, None).await.body;
    assert!(
        all.contains("<td class=\"worker\">&lt;i&gt;w0&lt;/i&gt;</td><td>1</td><td>1</td>"),
        "{all}"
    );
    assert!(all.contains("GPU 1") && all.contains(">w1<"), "{all}");
    let (acme, _) = sign_in(&app, ACME).await;
    let own = send(&app, "/ui/workers", &acme, None).await.body;
    assert!(own.contains("w0") && !own.contains(">w1<"), "{own}");
}
