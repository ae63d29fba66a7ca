//! Job webhooks: the final job state POSTed to the job's `callback_url`, HMAC-signed, retried.
//!
//! Why signed: the receiver must be able to tell the call came from this farm; the header
//! `X-Tessera-Signature: sha256=<hex HMAC-SHA256(secret, body)>` proves it.

use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tessera_farm::backoff::Backoff;

/// Attempts per webhook (backoff 1, 2, 4, 8 s between them).
const ATTEMPTS: u32 = 5;

/// The signature header value of `body` under `secret`.
pub fn signature(secret: &[u8], body: &[u8]) -> String {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256={hex}")
}

/// POSTs `body` to `url` through `agent` (see `WebhookGuard::agent`: checked addresses, no
/// redirects) until a 2xx answer or the attempts run out (logged, never fatal); returns
/// whether it was delivered (for the metrics).
pub async fn deliver(agent: ureq::Agent, url: String, body: Vec<u8>, secret: String) -> bool {
    let sig = signature(secret.as_bytes(), &body);
    let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(8));
    for attempt in 1..=ATTEMPTS {
        let (a, u, b, s) = (agent.clone(), url.clone(), body.clone(), sig.clone());
        let result = tokio::task::spawn_blocking(move || post(&a, &u, &b, &s)).await;
        match result {
            Ok(Ok(())) => {
                tracing::info!(attempt, "webhook delivered");
                return true;
            }
            Ok(Err(e)) => tracing::warn!(attempt, error = %e, "webhook attempt failed"),
            Err(e) => tracing::warn!(attempt, error = %e, "webhook task failed"),
        }
        if attempt < ATTEMPTS {
            tokio::time::sleep(backoff.next_delay()).await;
        }
    }
    tracing::error!("webhook given up after {ATTEMPTS} attempts");
    false
}

fn post(agent: &ureq::Agent, url: &str, body: &[u8], sig: &str) -> Result<(), String> {
    let resp = agent
        .post(url)
        .header("content-type", "application/json")
        .header("x-tessera-signature", sig)
        .send(body)
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::signature;

    #[test]
    fn signature_matches_a_known_hmac_sha256() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature(b"Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
