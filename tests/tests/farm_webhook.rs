//! A job's webhook: the final state is POSTed to its callback_url with an HMAC-SHA256 signature
//! the receiver can check (Python's hmac module is the oracle).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::json;
use tessera_tests::farm::{Farm, WEBHOOK_SECRET};
use tessera_tests::fixture::{fixture, Fixture};

/// Accepts one HTTP request; returns (headers lowercased, body).
fn receive_one(listener: TcpListener) -> (Vec<(String, String)>, Vec<u8>) {
    let (stream, _) = listener.accept().expect("accept");
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
    let mut stream = stream;
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .expect("answer");
    (headers, body)
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
    let body_path = farm.dir.path().join("hook-body.json");
    std::fs::write(&body_path, &body).expect("write body");
    let oracle = std::process::Command::new("python3")
        .args([
            "-c",
            "import hmac,hashlib,sys; print('sha256=' + hmac.new(sys.argv[1].encode(), open(sys.argv[2],'rb').read(), hashlib.sha256).hexdigest())",
            WEBHOOK_SECRET,
        ])
        .arg(&body_path)
        .output()
        .expect("python3");
    assert_eq!(String::from_utf8_lossy(&oracle.stdout).trim(), sig);
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
