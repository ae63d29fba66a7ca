//! Who is calling: bearer tokens, compared in constant time, each standing for a tenant.
//!
//! Why tenants: one farm serves several clients; a client must not see, cancel or collide
//! (through idempotency keys) with another's jobs. An admin token sees every tenant's jobs,
//! the watch's included.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use tessera_model::error_code::ErrorCode;

use crate::error::error;

/// Shortest token accepted: a guessable token is no protection.
pub const MIN_TOKEN_LEN: usize = 16;

/// The tenant of jobs the bucket watch creates (visible to admins).
pub const WATCH_TENANT: &str = "watch";

/// Tenant names no token may take: `watch` owns the jobs of watches that name no tenant, and
/// a tenant `uploads` would have every tenant's uploads (`<bucket>/uploads/...`) as its
/// default scope.
pub const RESERVED_TENANTS: [&str; 2] = [WATCH_TENANT, "uploads"];

/// Whether `name` can be a tenant's: 1-64 of `[A-Za-z0-9_-]`, so it is safe inside object
/// keys (`uploads/{tenant}/`, `{bucket}/{tenant}/`) and idempotency keys.
pub fn valid_tenant(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Who a request acts for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The tenant whose jobs the request may see and create.
    pub tenant: String,
    /// Sees and cancels every tenant's jobs.
    pub admin: bool,
}

impl Principal {
    /// Whether this principal may see a job of `owner`.
    pub fn sees(&self, owner: &str) -> bool {
        self.admin || self.tenant == owner
    }
}

/// One configured token: its SHA-256 (the token itself is not kept) and its principal.
#[derive(Clone)]
pub struct ApiToken {
    digest: [u8; 32],
    principal: Principal,
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl ApiToken {
    /// Parses one configured entry: `tenant=token`, `tenant+admin=token`, or a bare `token`
    /// (tenant `default`, admin: what a single-client farm had before tenants).
    pub fn parse(entry: &str) -> Result<Self, String> {
        let (who, token) = match entry.split_once('=') {
            Some((who, token)) => (Some(who), token),
            None => (None, entry),
        };
        if token.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "an API token is shorter than {MIN_TOKEN_LEN} characters"
            ));
        }
        let principal = match who {
            None => Principal {
                tenant: "default".into(),
                admin: true,
            },
            Some(who) => {
                let (tenant, admin) = match who.strip_suffix("+admin") {
                    Some(t) => (t, true),
                    None => (who, false),
                };
                if !valid_tenant(tenant) || RESERVED_TENANTS.contains(&tenant) {
                    return Err(format!(
                        "tenant name '{tenant}': 1-64 of [A-Za-z0-9_-], not one of \
                         {RESERVED_TENANTS:?}"
                    ));
                }
                Principal {
                    tenant: tenant.into(),
                    admin,
                }
            }
        };
        Ok(ApiToken {
            digest: Sha256::digest(token.as_bytes()).into(),
            principal,
        })
    }
}

/// The principal of a presented token: every configured digest is compared, each in
/// constant time over 32 bytes, so the time taken tells neither which token nearly matched
/// nor any token's length.
pub fn principal_of(tokens: &[ApiToken], presented: &[u8]) -> Option<Principal> {
    let digest: [u8; 32] = Sha256::digest(presented).into();
    tokens.iter().fold(None, |found, t| {
        if constant_time_eq(&digest, &t.digest) {
            Some(t.principal.clone())
        } else {
            found
        }
    })
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The accepted bearer tokens: the auth layer's whole state.
pub type Tokens = Arc<Vec<ApiToken>>;

/// Lets a request with a valid bearer token through, its [`Principal`] in the request's
/// extensions; answers 401 otherwise.
pub(crate) async fn auth(State(tokens): State<Tokens>, mut req: Request, next: Next) -> Response {
    let presented = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        })
        .map(str::as_bytes);
    match presented.and_then(|p| principal_of(&tokens, p)) {
        Some(principal) => {
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        None => error(ErrorCode::Unauthorized, "a valid bearer token is required"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_stand_for_tenants() {
        let tokens: Vec<ApiToken> = [
            "acme=acme-token-0123456789",
            "ops+admin=ops-token-0123456789",
            "bare-token-0123456789",
        ]
        .iter()
        .map(|e| ApiToken::parse(e).unwrap())
        .collect();
        let who = |t: &str| principal_of(&tokens, t.as_bytes());
        let acme = who("acme-token-0123456789").unwrap();
        assert_eq!((acme.tenant.as_str(), acme.admin), ("acme", false));
        assert!(acme.sees("acme") && !acme.sees("other") && !acme.sees(WATCH_TENANT));
        let ops = who("ops-token-0123456789").unwrap();
        assert!(ops.admin && ops.sees("acme") && ops.sees(WATCH_TENANT));
        assert!(who("bare-token-0123456789").unwrap().admin);
        for wrong in ["acme-token-012345678", "", "acme=acme-token-0123456789"] {
            assert_eq!(who(wrong), None, "{wrong}");
        }
        for bad in [
            "short",
            "x=short",
            "=tok-0123456789abcdef",
            "watch=tok-0123456789abcdef",
            "uploads=tok-0123456789abcdef",
            "a b=tok-0123456789abcdef",
        ] {
            assert!(ApiToken::parse(bad).is_err(), "{bad}");
        }
        // The token itself is never kept, nor printed.
        assert!(!format!("{:?}", tokens[0]).contains("acme-token"));
    }

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
    }
}
