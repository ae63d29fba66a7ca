//! The services' `health` subcommand: `GET /healthz` of the service's own listen address.
//!
//! Why: a container's HEALTHCHECK runs `tessera-worker health` or `tessera-dispatcher
//! health`, so the minimal images (libc, CA certificates, tini and tessera) need no curl and
//! no shell. The address comes from the same settings as the service (defaults, file,
//! `TESSERA_*`, flags), so the check follows wherever the service was told to listen. Plain
//! HTTP/1.1 over `std::net` with a deadline: the answer's status line is all it reads.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Flags of the `health` subcommand, shared by the worker and the dispatcher.
#[derive(Debug, Clone, clap::Args)]
pub struct HealthArgs {
    /// Seconds the whole check may take (connect, request, answer).
    #[arg(long, default_value_t = 3)]
    pub timeout_seconds: u64,
}

impl HealthArgs {
    /// The check's deadline as a duration (at least one second).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds.max(1))
    }
}

/// Why a health check failed; each message names the URL it asked.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// Nothing accepted the connection (the service is not running, or listens elsewhere).
    #[error("{url}: cannot connect: {source}")]
    Connect {
        /// The URL asked.
        url: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// The connection broke or the deadline passed before a status line came back.
    #[error("{url}: no answer: {reason}")]
    NoAnswer {
        /// The URL asked.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The service answered, but not 200 (e.g. 503 while it is shutting down).
    #[error("{url}: answered '{status_line}', not 200")]
    Unhealthy {
        /// The URL asked.
        url: String,
        /// The answer's first line.
        status_line: String,
    },
}

/// The address to ask for a service listening on `listen`: a wildcard address (0.0.0.0,
/// `[::]`) is asked on the loopback address of its family, any other as it is.
pub fn probe_address(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// `GET http://<probe_address(listen)>/healthz` within `timeout`; Ok with the URL on 200.
pub fn check(listen: SocketAddr, timeout: Duration) -> Result<String, HealthError> {
    let addr = probe_address(listen);
    let url = format!("http://{addr}/healthz");
    let deadline = Instant::now() + timeout;
    let mut stream =
        TcpStream::connect_timeout(&addr, timeout).map_err(|source| HealthError::Connect {
            url: url.clone(),
            source,
        })?;
    let no_answer = |reason: String| HealthError::NoAnswer {
        url: url.clone(),
        reason,
    };
    let left = |what: &str| {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| no_answer(format!("{what}: timed out after {timeout:?}")))
    };
    stream
        .set_write_timeout(Some(left("request")?))
        .map_err(|e| no_answer(format!("request: {e}")))?;
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .map_err(|e| no_answer(format!("request: {e}")))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    while !answer.contains(&b'\n') && answer.len() < 4096 {
        stream
            .set_read_timeout(Some(left("answer")?))
            .map_err(|e| no_answer(format!("answer: {e}")))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(no_answer(format!("answer: {e}"))),
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let status_line = text.lines().next().unwrap_or("").trim().to_string();
    if status_line.is_empty() {
        return Err(no_answer("connection closed without a status line".into()));
    }
    match status_line.split_whitespace().nth(1) {
        Some("200") if status_line.starts_with("HTTP/1.") => Ok(url),
        _ => Err(HealthError::Unhealthy { url, status_line }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-connection server answering `reply` after reading the request.
    fn serve_once(reply: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut buf = [0u8; 1024];
            let _ = c.read(&mut buf);
            let _ = c.write_all(reply.as_bytes());
        });
        addr
    }

    #[test]
    fn a_200_is_healthy_and_names_the_url() {
        let addr = serve_once("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        let url = check(addr, Duration::from_secs(3)).unwrap();
        assert_eq!(url, format!("http://{addr}/healthz"));
    }

    #[test]
    fn a_503_is_unhealthy_with_its_status_line() {
        let addr = serve_once("HTTP/1.1 503 Service Unavailable\r\n\r\n");
        let err = check(addr, Duration::from_secs(3)).unwrap_err().to_string();
        assert!(err.contains("'HTTP/1.1 503 Service Unavailable'"), "{err}");
        assert!(err.contains(&addr.to_string()), "{err}");
    }

    #[test]
    fn nothing_listening_names_the_address() {
        let addr = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = check(addr, Duration::from_secs(3)).unwrap_err();
        assert!(matches!(err, HealthError::Connect { .. }), "{err:?}");
        assert!(
            err.to_string()
                .starts_with(&format!("http://{addr}/healthz: cannot connect")),
            "{err}"
        );
    }

    #[test]
    fn a_silent_service_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let started = Instant::now();
        let err = check(addr, Duration::from_secs(1)).unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(3), "{err}");
        assert!(err.contains("no answer"), "{err}");
        drop(listener);
    }

    #[test]
    fn wildcard_addresses_are_asked_on_loopback() {
        let p = |s: &str| probe_address(s.parse().unwrap()).to_string();
        assert_eq!(p("0.0.0.0:9464"), "127.0.0.1:9464");
        assert_eq!(p("[::]:8080"), "[::1]:8080");
        assert_eq!(p("10.1.2.3:8080"), "10.1.2.3:8080");
    }
}
