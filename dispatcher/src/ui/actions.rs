//! The dashboard's forms: sign in, sign out, cancel a job, run a job again. Every POST is
//! refused (403) unless its `csrf` field matches the one derived from its cookie.
//!
//! Why the login form has a CSRF token of its own: without one, another site could sign a
//! browser in with the attacker's token (login CSRF) and show it the attacker's jobs. Its
//! token is derived from a random nonce in a short-lived cookie (double submit, signed).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use maud::html;
use serde::Deserialize;

use super::page::{answer, error_page, frame};
use super::session::{
    cookie, hex, secure_behind_tls, set_cookie, Keys, Session, LOGIN_COOKIE, SESSION_COOKIE,
};
use super::UiState;
use crate::error::Refusal;

/// The answer to a form whose CSRF field is missing or wrong.
const CSRF_REFUSED: &str =
    "This form is stale or was not sent from this dashboard: reload the page and try again.";

/// A form with only its CSRF field.
#[derive(Debug, Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The sign-in form's fields.
#[derive(Debug, Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
}

/// `GET /ui/login`: the form, with a fresh nonce cookie its CSRF field is derived from.
pub async fn login_form(Extension(keys): Extension<Arc<Keys>>) -> Response {
    login_page(&keys, StatusCode::OK, None)
}

fn login_page(keys: &Keys, status: StatusCode, problem: Option<&str>) -> Response {
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let body = html! {
        @if let Some(p) = problem { p.error { (p) } }
        form.login method="post" action="/ui/login" {
            input type="hidden" name="csrf" value=(keys.csrf("login", &nonce));
            label { "API token " input id="token" type="password" name="token" autocomplete="current-password" required; }
            button id="sign-in" type="submit" { "Sign in" }
        }
    };
    let mut resp = answer(status, frame("Sign in", None, None, body));
    let c = set_cookie(LOGIN_COOKIE, &nonce, Some(600));
    resp.headers_mut()
        .append(header::SET_COOKIE, c.parse().expect("cookie header"));
    resp
}

/// `POST /ui/login`: a valid token becomes the session cookie; a wrong one the form again.
pub async fn login(
    Extension(keys): Extension<Arc<Keys>>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let nonce = cookie(&headers, LOGIN_COOKIE).unwrap_or_default();
    if nonce.is_empty() || !keys.csrf_ok("login", &nonce, &form.csrf) {
        return error_page(StatusCode::FORBIDDEN, None, CSRF_REFUSED);
    }
    let token = form.token.trim();
    if crate::auth::principal_of(&keys.tokens, token.as_bytes()).is_none() {
        return login_page(
            &keys,
            StatusCode::UNAUTHORIZED,
            Some("That token is not accepted here."),
        );
    }
    let mut resp = Redirect::to("/ui/jobs").into_response();
    let h = resp.headers_mut();
    let session = set_cookie(SESSION_COOKIE, &hex(token.as_bytes()), None);
    let session = secure_behind_tls(session, &headers);
    h.append(header::SET_COOKIE, session.parse().expect("cookie header"));
    let spent = set_cookie(LOGIN_COOKIE, "", Some(0));
    h.append(header::SET_COOKIE, spent.parse().expect("cookie header"));
    resp
}

/// `POST /ui/logout`: forgets the session cookie.
pub async fn logout(session: Session, Form(form): Form<CsrfForm>) -> Response {
    if !session.csrf_ok(&form.csrf) {
        return error_page(StatusCode::FORBIDDEN, Some(&session), CSRF_REFUSED);
    }
    let mut resp = Redirect::to("/ui/login").into_response();
    let gone = set_cookie(SESSION_COOKIE, "", Some(0));
    resp.headers_mut()
        .append(header::SET_COOKIE, gone.parse().expect("cookie header"));
    resp
}

/// `POST /ui/jobs/{id}/cancel` (the API's cancel; back to the job's page) and
/// `POST /ui/jobs/{id}/retry` (a failed or cancelled job run again; to the new job's page).
pub async fn act(
    State(state): State<UiState>,
    session: Session,
    Path((id, action)): Path<(String, String)>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if !session.csrf_ok(&form.csrf) {
        return error_page(StatusCode::FORBIDDEN, Some(&session), CSRF_REFUSED);
    }
    let done = match action.as_str() {
        "cancel" => state.control.cancel(&session.who, &id).map(|()| id),
        "retry" => state.control.retry(&session.who, &id),
        _ => return error_page(StatusCode::NOT_FOUND, Some(&session), "no such action"),
    };
    match done {
        Ok(shown) => Redirect::to(&format!("/ui/jobs/{shown}")).into_response(),
        Err(refusal) => refused(&session, refusal),
    }
}

/// A refused action as a page with the code's status and the reason.
fn refused(session: &Session, (code, why): Refusal) -> Response {
    error_page(crate::error::status(&code), Some(session), &why)
}
