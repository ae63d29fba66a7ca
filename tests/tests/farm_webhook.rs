//! A job's webhook: the final state is POSTed to its callback_url with an HMAC-SHA256 signature
//! the receiver can check (Python's hmac module is the oracle), and an `X-Tessera-Delivery`
//! key that stays the same across retries; a receiver that is down for a while, or a
//! dispatcher restarted before the receiver came back, still gets the call (N9).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::json;
use tessera_tests::farm::{Farm, WEBHOOK_SECRET};
use tessera_tests::fixture::{fixture, Fixture};

/// Reads one HTTP request from `stream`; returns (headers lowercased, body).
fn read_request(stream: &TcpStream) -> (Vec<(String, String)>, Vec<u8>) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut headers = Vec::new();
    let mut line = String::new();
    reader.read_line(&mut line).expect("request line");
    assert!(line.starts_with("POST "), "{line}");
    loop {
        line.clear();
        reader.read_line(&mut line).expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .expect("content-length");
    let mut body = vec![0; len];
    reader.read_exact(&mut body).expect("body");
    (headers, body)
}

/// Answers `status` with an empty body and closes.
fn answer(mut stream: TcpStream, status: u16) {
    let reason = if status == 200 { "OK" } else { "Unavailable" };
    let head =
        format!("HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).expect("answer");
}

/// Accepts one HTTP request and answers 200; returns (headers lowercased, body).
fn receive_one(listener: TcpListener) -> (Vec<(String, String)>, Vec<u8>) {
    let (stream, _) = listener.accept().expect("accept");
    let (headers, body) = read_request(&stream);
    answer(stream, 200);
    (headers, body)
}

/// One call a [`serve_after`] receiver got.
struct Call {
    /// Headers, names lowercased.
    headers: Vec<(String, String)>,
    /// The body.
    body: Vec<u8>,
    /// What the receiver answered.
    status: u16,
    /// When it came, after the first call.
    after_first: Duration,
}

impl Call {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Serves POSTs on `listener` until one is answered 200 or `deadline` passes: 503 to every
/// call within `down_for` of the first one, 200 after. Returns every call.
fn serve_after(listener: TcpListener, down_for: Duration, deadline: Duration) -> Vec<Call> {
    listener.set_nonblocking(true).expect("nonblocking");
    let started = Instant::now();
    let mut first: Option<Instant> = None;
    let mut calls = Vec::new();
    while started.elapsed() < deadline {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).expect("blocking");
                let (headers, body) = read_request(&stream);
                let first = *first.get_or_insert_with(Instant::now);
                let status = if first.elapsed() < down_for { 503 } else { 200 };
                answer(stream, status);
                calls.push(Call {
                    headers,
                    body,
                    status,
                    after_first: first.elapsed(),
                });
                if status == 200 {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("accept: {e}"),
        }
    }
    calls
}

/// The signature Python's hmac module computes for `body` under the farm's secret.
fn oracle_signature(farm: &Farm, body: &[u8]) -> String {
    let body_path = farm.dir.path().join("hook-body.json");
    std::fs::write(&body_path, body).expect("write body");
    let oracle = std::process::Command::new("python3")
        .args([
            "-c",
            "import hmac,hashlib,sys; print('sha256=' + hmac.new(sys.argv[1].encode(), open(sys.argv[2],'rb').read(), hashlib.sha256).hexdigest())",
            WEBHOOK_SECRET,
        ])
        .arg(&body_path)
        .output()
        .expect("python3");
    String::from_utf8_lossy(&oracle.stdout).trim().to_string()
}

/// Checks the calls a receiver got for job `id`: the last one delivered (200) the final
/// state `done`, every call carried the same body, signature and `X-Tessera-Delivery` key
/// (`<job id>:<n>`). Returns the key.
fn check_calls(farm: &Farm, id: &str, calls: &[Call]) -> String {
    let last = calls.last().unwrap_or_else(|| {
        panic!(
            "the receiver was never called\n--- dispatcher\n{}",
            tessera_tests::run::tail(&farm.log("dispatcher.log"), 4000)
        )
    });
    assert_eq!(
        last.status,
        200,
        "the webhook was not retried until the receiver answered: {} calls, the last {:?} after the first\n--- dispatcher\n{}",
        calls.len(),
        last.after_first,
        tessera_tests::run::tail(&farm.log("dispatcher.log"), 4000)
    );
    let posted: serde_json::Value = serde_json::from_slice(&last.body).expect("JSON body");
    assert_eq!(
        (posted["id"].as_str(), posted["state"].as_str()),
        (Some(id), Some("done"))
    );
    let key = last
        .header("x-tessera-delivery")
        .expect("delivery key header");
    assert!(key.starts_with(&format!("{id}:")), "{key}");
    let sig = last
        .header("x-tessera-signature")
        .expect("signature header");
    assert_eq!(oracle_signature(farm, &last.body), sig);
    for call in calls {
        assert_eq!(call.header("x-tessera-delivery"), Some(key));
        assert_eq!(call.header("x-tessera-signature"), Some(sig));
        assert_eq!(call.body, last.body);
    }
    key.to_string()
}

#[test]
fn the_final_state_is_posted_with_a_valid_signature() {
    // The receiver listens on loopback, which the farm must name to allow.
    let farm = Farm::start_with("hook", 1, &[("TESSERA_WEBHOOK_ALLOW", "127.0.0.1")]);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let receiver = std::thread::spawn(move || receive_one(listener));
    farm.upload(&fixture(Fixture::NoAudio), "input", "hook/a.mp4");
    let id = farm.submit(
        "s3://input/hook/a.mp4",
        "s3://output/hook/a.mp4",
        json!({"preset": "ultrafast"}),
        json!({"callback_url": url}),
    );
    let job = farm.wait_job(&id, Duration::from_secs(120));
    assert_eq!(job["state"], "done", "{job}");
    let (headers, body) = receiver.join().expect("receiver");
    let posted: serde_json::Value = serde_json::from_slice(&body).expect("JSON body");
    assert_eq!(
        (posted["id"].as_str(), posted["state"].as_str()),
        (Some(id.as_str()), Some("done"))
    );
    let sig = headers
        .iter()
        .find(|(k, _)| k == "x-tessera-signature")
        .map(|(_, v)| v.clone())
        .expect("signature header");
    assert_eq!(oracle_signature(&farm, &body), sig);
    let key = headers
        .iter()
        .find(|(k, _)| k == "x-tessera-delivery")
        .map(|(_, v)| v.clone())
        .expect("delivery key header");
    assert!(key.starts_with(&format!("{id}:")), "{key}");
}

#[test]
fn a_receiver_down_for_20_s_is_called_again_with_the_same_delivery_key() {
    let farm = Farm::start_with("hook503", 1, &[("TESSERA_WEBHOOK_ALLOW", "127.0.0.1")]);
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    // 503 for 20 s after the first call: longer than the 5 calls over about 15 s of N9.
    let down_for = Duration::from_secs(20);
    let receiver =
        std::thread::spawn(move || serve_after(listener, down_for, Duration::from_secs(150)));
    farm.upload(&fixture(Fixture::NoAudio), "input", "hook503/a.mp4");
    let id = farm.submit(
        "s3://input/hook503/a.mp4",
        "s3://output/hook503/a.mp4",
        json!({"preset": "ultrafast"}),
        json!({"callback_url": url}),
    );
    let job = farm.wait_job(&id, Duration::from_secs(120));
    assert_eq!(job["state"], "done", "{job}");
    let calls = receiver.join().expect("receiver");
    check_calls(&farm, &id, &calls);
    assert!(calls.len() >= 2, "{} calls", calls.len());
    assert!(calls[calls.len() - 1].after_first >= down_for);
}

#[test]
fn a_dispatcher_restarted_before_the_receiver_came_up_still_delivers() {
    let mut farm = Farm::start_with("hookrestart", 1, &[("TESSERA_WEBHOOK_ALLOW", "127.0.0.1")]);
    // A port nobody listens on yet: every call before the restart is refused.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    farm.upload(&fixture(Fixture::NoAudio), "input", "hookrestart/a.mp4");
    let id = farm.submit(
        "s3://input/hookrestart/a.mp4",
        "s3://output/hookrestart/a.mp4",
        json!({"preset": "ultrafast"}),
        json!({"callback_url": format!("http://127.0.0.1:{port}/hook")}),
    );
    let job = farm.wait_job(&id, Duration::from_secs(120));
    assert_eq!(job["state"], "done", "{job}");
    // Killed right after the end: a call kept only in memory dies with the process.
    farm.kill_dispatcher();
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the callback port");
    let receiver =
        std::thread::spawn(move || serve_after(listener, Duration::ZERO, Duration::from_secs(90)));
    farm.start_dispatcher();
    let calls = receiver.join().expect("receiver");
    check_calls(&farm, &id, &calls);
}

#[test]
fn callbacks_to_internal_addresses_are_refused_at_submit() {
    // No allow-list: only public addresses. Each repro target of the review gets a 422 that
    // says why, and no job is created.
    let farm = Farm::start("ssrf", 0);
    for url in [
        "http://127.0.0.1:15672/api/overview",
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[::1]:8080/",
        "http://10.0.0.1/",
        "http://localhost:9000/",
        "gopher://example.com/",
    ] {
        let body = json!({
            "input": "s3://input/x.mp4",
            "outputs": [{"destination": "s3://output/x.mp4"}],
            "callback_url": url,
        });
        let (code, resp) = farm.http(
            "POST",
            "/v1/jobs",
            Some(tessera_tests::farm::TOKEN),
            Some(&body.to_string()),
        );
        assert_eq!(code, 422, "{url}: {resp}");
        assert_eq!(resp["error"]["code"], "invalid_job", "{url}: {resp}");
        assert!(
            resp["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("callback_url")),
            "{url}: {resp}"
        );
    }
    let (_, list) = farm.http("GET", "/v1/jobs", Some(tessera_tests::farm::TOKEN), None);
    assert_eq!(list["jobs"].as_array().map(Vec::len), Some(0), "{list}");
}
