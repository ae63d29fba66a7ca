//! Hostile API clients against the real dispatcher (issue 9): a 2 MiB body, slow-loris
//! clients that send their headers a byte at a time, a client that sends its body a byte at
//! a time, and a crowd of idle connections. Each is cut off with the documented status or a
//! closed connection, and a well-behaved client is served promptly all the while.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tessera_tests::farm::{Farm, TOKEN};

/// The test farm's header deadline (`TESSERA_HTTP_HEADER_TIMEOUT_SECONDS`).
const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// The test farm's request deadline (`TESSERA_HTTP_REQUEST_TIMEOUT_SECONDS`).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// Slowest answer to a well-behaved client accepted while the hostile ones are connected.
const PROMPT: Duration = Duration::from_secs(2);

fn farm() -> Farm {
    Farm::start_with(
        "hostileapi",
        0,
        &[
            ("TESSERA_HTTP_HEADER_TIMEOUT_SECONDS", "2"),
            ("TESSERA_HTTP_REQUEST_TIMEOUT_SECONDS", "3"),
        ],
    )
}

fn addr(farm: &Farm) -> SocketAddr {
    farm.api
        .trim_start_matches("http://")
        .parse()
        .expect("api address")
}

/// A well-behaved `GET /v1/jobs` answers 200 within [`PROMPT`].
fn assert_served(farm: &Farm, while_what: &str) {
    let started = Instant::now();
    let (status, body) = farm.http("GET", "/v1/jobs", Some(TOKEN), None);
    assert_eq!(status, 200, "{while_what}: {body}");
    assert!(
        started.elapsed() < PROMPT,
        "{while_what}: answered after {:?}",
        started.elapsed()
    );
}

/// Reads until the server closes the connection or `limit`: (what was read, closed?).
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, bool) {
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let (started, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 4096]);
    while started.elapsed() < limit {
        match stream.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&got).into_owned(), true)
            }
            Err(_) => {}
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

#[test]
fn a_two_mib_body_is_refused_with_413_and_no_job() {
    let farm = farm();
    let pad = "x".repeat(2 << 20);
    let body = format!(
        r#"{{"input":"s3://input/a.mp4","outputs":[{{"destination":"s3://output/a.mp4"}}],"pad":"{pad}"}}"#
    );
    let path = farm.dir.path().join("big.json");
    std::fs::write(&path, &body).expect("body");
    let out = std::process::Command::new("curl")
        .args(["-sS", "-m", "20", "-o", "/dev/null", "-w", "%{http_code}"])
        .args(["-H", &format!("authorization: Bearer {TOKEN}")])
        .args(["-H", "content-type: application/json"])
        .arg("--data-binary")
        .arg(format!("@{}", path.display()))
        .arg(format!("{}/v1/jobs", farm.api))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "413");
    assert!(farm.jobs().is_empty(), "a job was made of a 2 MiB body");
    assert_served(&farm, "after the 2 MiB body");
}

/// A client that declares a body over the limit and waits for `100 Continue` (as curl does
/// for large bodies) is answered 413 before it sends a byte of it, for every declared size
/// over the limit and either path: never a 100 it would take as the answer.
#[test]
fn an_oversized_body_announced_with_expect_is_refused_before_100_continue() {
    let farm = farm();
    for (path, len) in [
        ("/v1/jobs", 64 * 1024 + 1_u64),
        ("/v1/jobs", 2 << 20),
        ("/v1/uploads", 10 << 30),
    ] {
        let mut s = TcpStream::connect(addr(&farm)).expect("connect");
        write!(
            s,
            "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {len}\r\n\
             Expect: 100-continue\r\n\r\n"
        )
        .expect("headers");
        let (text, _) = read_until_closed(&mut s, Duration::from_secs(2));
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.starts_with("HTTP/1.1 413"),
            "{path} with {len} bytes declared: first answer {first:?}"
        );
    }
    assert!(farm.jobs().is_empty());
    assert_served(&farm, "after the announced bodies");
}

#[test]
fn slow_loris_clients_are_cut_off_and_others_are_served() {
    let farm = farm();
    let addr = addr(&farm);
    // 64 clients each send half a request line, then a byte a second.
    let mut slow: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                .expect("write");
            s
        })
        .collect();
    let started = Instant::now();
    let mut open = slow.len();
    while open > 0 && started.elapsed() < HEADER_TIMEOUT * 5 {
        assert_served(&farm, "with slow-loris clients connected");
        open = 0;
        for s in &mut slow {
            // A closed socket refuses the byte (at the latest on the second write).
            if s.write_all(b"a").and_then(|_| s.flush()).is_ok() {
                open += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    for s in &mut slow {
        let (_, closed) = read_until_closed(s, Duration::from_secs(1));
        assert!(
            closed,
            "a slow-loris connection outlived the header deadline"
        );
    }
    assert!(
        started.elapsed() < HEADER_TIMEOUT * 5,
        "slow clients held for {:?}",
        started.elapsed()
    );
}

#[test]
fn a_body_sent_a_byte_at_a_time_gets_408() {
    let farm = farm();
    let mut s = TcpStream::connect(addr(&farm)).expect("connect");
    let head = format!(
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n{{"
    );
    s.write_all(head.as_bytes()).expect("write");
    let started = Instant::now();
    let mut answer = String::new();
    while started.elapsed() < REQUEST_TIMEOUT * 4 {
        if s.write_all(b" ").is_err() {
            break;
        }
        let (got, closed) = read_until_closed(&mut s, Duration::from_millis(300));
        answer.push_str(&got);
        if closed || answer.contains("\r\n\r\n") {
            break;
        }
        assert_served(&farm, "with a slow body arriving");
    }
    assert!(
        answer.starts_with("HTTP/1.1 408"),
        "after {:?}: {answer:?}",
        started.elapsed()
    );
    assert!(answer.contains("request_timeout"), "{answer}");
    assert!(farm.jobs().is_empty());
}

#[test]
fn idle_connections_are_closed_after_the_header_deadline() {
    let farm = farm();
    let addr = addr(&farm);
    let mut idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    assert_served(&farm, "with 200 idle connections");
    for s in &mut idle {
        let (_, closed) = read_until_closed(s, HEADER_TIMEOUT * 3);
        assert!(closed, "an idle connection outlived the header deadline");
    }
    // A kept-alive connection that stops after one request is closed the same way.
    let mut kept = TcpStream::connect(addr).expect("connect");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let (got, closed) = read_until_closed(&mut kept, HEADER_TIMEOUT * 3);
    assert!(got.starts_with("HTTP/1.1 200"), "{got:?}");
    assert!(closed, "a kept-alive idle connection was never closed");
}

/// schemathesis (from PyPI; `scripts/api-fuzz.sh` installs it and runs this test) against
/// `/openapi.json` with a valid token: no 5xx, and every status, content type, header and
/// body matches the document. `TESSERA_SCHEMATHESIS` is the `st` binary;
/// `TESSERA_SCHEMATHESIS_SECONDS` the time budget (default 120).
#[test]
#[ignore = "needs schemathesis: run scripts/api-fuzz.sh"]
fn schemathesis_finds_no_server_error_and_no_schema_violation() {
    let st = std::env::var("TESSERA_SCHEMATHESIS").expect("TESSERA_SCHEMATHESIS: the st binary");
    let seconds = std::env::var("TESSERA_SCHEMATHESIS_SECONDS").unwrap_or_else(|_| "120".into());
    let farm = Farm::start("schemathesis", 1);
    let checks = "not_a_server_error,status_code_conformance,content_type_conformance,\
                  response_schema_conformance,response_headers_conformance,ignored_auth";
    let out = std::process::Command::new(st)
        .args(["run", &format!("{}/openapi.json", farm.api)])
        .args(["--url", &farm.api])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--checks", checks, "--max-time", &seconds, "--workers", "2"])
        .args(["--request-timeout", "20", "--seed", "9"])
        .env("NO_COLOR", "1")
        .output()
        .expect("run schemathesis");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(out.status.success(), "schemathesis found problems:\n{text}");
    let (status, _) = farm.http("GET", "/healthz", None, None);
    assert_eq!(status, 200, "the dispatcher did not survive the run");
}
