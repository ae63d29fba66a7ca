//! Who is looking at the dashboard, and proof that a form was sent from its own pages.
//!
//! Why the API token in a cookie: the dashboard knows no users of its own; a tenant signs in
//! with the token it already has and sees what the API would show it. The cookie is
//! `HttpOnly` (no script can read it), `SameSite=Strict` (no other site's page sends it) and
//! scoped to `/ui` (the API still wants a bearer header).
//!
//! Why a CSRF token besides SameSite: a browser that ignores SameSite, or a page on a sibling
//! origin, must still be unable to post a cancel. Every form carries HMAC-SHA256 of the
//! cookie under a key made at start; a post whose field does not match is refused (403).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use crate::auth::{constant_time_eq, principal_of, Principal, Tokens};

/// The session cookie: the hex of the API token.
pub const SESSION_COOKIE: &str = "tessera_session";
/// The login form's cookie: a random nonce its CSRF field is derived from.
pub const LOGIN_COOKIE: &str = "tessera_login";

/// The dashboard's secrets, made when the router is built: a restart signs everyone out of
/// nothing (the cookie holds the token) but makes old forms stale.
pub struct Keys {
    mac_key: [u8; 32],
    /// The accepted API tokens.
    pub tokens: Tokens,
}

impl Keys {
    /// Keys with a fresh random MAC key (two v4 UUIDs: 244 random bits).
    pub fn generate(tokens: Tokens) -> Self {
        let mut mac_key = [0u8; 32];
        mac_key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        mac_key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        Keys { mac_key, tokens }
    }

    /// The CSRF token of a form for `purpose` ("login", "session") under cookie `value`.
    pub fn csrf(&self, purpose: &str, value: &str) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.mac_key)
            .expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(value.as_bytes());
        hex(&mac.finalize().into_bytes())
    }

    /// Whether `presented` is the CSRF token for `purpose` under cookie `value`.
    pub fn csrf_ok(&self, purpose: &str, value: &str, presented: &str) -> bool {
        constant_time_eq(self.csrf(purpose, value).as_bytes(), presented.as_bytes())
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of lowercase or uppercase hex `s`; None when it is not hex.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// A `Set-Cookie` value for the dashboard: HttpOnly, SameSite=Strict, Path=/ui; `max_age`
/// 0 deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: Option<u64>) -> String {
    let age = max_age
        .map(|s| format!("; Max-Age={s}"))
        .unwrap_or_default();
    format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/ui{age}")
}

/// `cookie` marked `Secure` when the request reached a TLS proxy (`X-Forwarded-Proto:
/// https`): the browser then never sends the token over plain HTTP. Why not always: a
/// dispatcher reached directly serves plain HTTP, where a `Secure` cookie is not kept.
pub fn secure_behind_tls(cookie: String, headers: &HeaderMap) -> String {
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    if https {
        cookie + "; Secure"
    } else {
        cookie
    }
}

/// A signed-in viewer: the token's principal and the CSRF token its forms carry.
#[derive(Debug, Clone)]
pub struct Session {
    /// Whose jobs the viewer sees.
    pub who: Principal,
    /// The hidden field of every form on the viewer's pages.
    pub csrf: String,
}

impl Session {
    /// The session of a request's cookie, if it holds a valid token.
    pub fn of(keys: &Keys, headers: &HeaderMap) -> Option<Session> {
        let value = cookie(headers, SESSION_COOKIE)?;
        let token = unhex(&value)?;
        let who = principal_of(&keys.tokens, &token)?;
        Some(Session {
            who,
            csrf: keys.csrf("session", &value),
        })
    }

    /// Whether a posted form's CSRF field is this session's.
    pub fn csrf_ok(&self, presented: &str) -> bool {
        constant_time_eq(self.csrf.as_bytes(), presented.as_bytes())
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Session {
    type Rejection = Response;

    /// A page asked for without a valid session goes to the login form.
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let keys = parts
            .extensions
            .get::<std::sync::Arc<Keys>>()
            .ok_or_else(|| Redirect::to("/ui/login").into_response())?;
        Session::of(keys, &parts.headers).ok_or_else(|| Redirect::to("/ui/login").into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::ApiToken;

    fn keys() -> Keys {
        let tokens = vec![ApiToken::parse("acme=acme-token-0123456789").unwrap()];
        Keys::generate(std::sync::Arc::new(tokens))
    }

    #[test]
    fn a_session_comes_from_a_valid_token_cookie_only() {
        let keys = keys();
        let mut headers = HeaderMap::new();
        let good = hex(b"acme-token-0123456789");
        headers.insert(
            "cookie",
            format!("x=1; {SESSION_COOKIE}={good}").parse().unwrap(),
        );
        let s = Session::of(&keys, &headers).expect("session");
        assert_eq!((s.who.tenant.as_str(), s.who.admin), ("acme", false));
        assert!(s.csrf_ok(&keys.csrf("session", &good)));
        assert!(!s.csrf_ok(&keys.csrf("login", &good)) && !s.csrf_ok(""));
        for bad in [hex(b"acme-token-012345678"), "zz".into(), "abc".into()] {
            headers.insert("cookie", format!("{SESSION_COOKIE}={bad}").parse().unwrap());
            assert!(Session::of(&keys, &headers).is_none(), "{bad}");
        }
        // Another start's key makes other tokens.
        assert_ne!(
            keys.csrf("session", &good),
            super::tests::keys().csrf("session", &good)
        );
    }

    #[test]
    fn cookies_are_http_only_strict_and_scoped() {
        let c = set_cookie(SESSION_COOKIE, "ab", None);
        assert_eq!(c, "tessera_session=ab; HttpOnly; SameSite=Strict; Path=/ui");
        assert!(set_cookie(LOGIN_COOKIE, "", Some(0)).ends_with("; Max-Age=0"));
        assert_eq!(unhex(&hex(b"\x00\xffa")).unwrap(), b"\x00\xffa");
        let mut headers = HeaderMap::new();
        assert_eq!(secure_behind_tls("a=b".into(), &headers), "a=b");
        headers.insert("x-forwarded-proto", "HTTPS".parse().unwrap());
        assert_eq!(secure_behind_tls("a=b".into(), &headers), "a=b; Secure");
    }
}
