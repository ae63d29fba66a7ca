//! Sandbox tests with stand-in children (shell scripts playing the child's protocol).

use super::*;
use std::os::unix::fs::PermissionsExt;

/// A stand-in child: a shell script playing the child's side of the protocol.
fn script(dir: &std::path::Path, body: &str) -> Sandbox {
    let path = dir.join("child.sh");
    std::fs::write(&path, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox::new(path)
}

fn probe_op() -> MediaOp {
    MediaOp::Probe {
        input: "in.mp4".into(),
    }
}

fn limits(secs: u64) -> Limits {
    Limits {
        timeout: Duration::from_secs(secs),
        ..Limits::default()
    }
}

#[tokio::test]
async fn result_and_progress_lines_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let sb = script(
        dir.path(),
        r#"echo "progress 5"; echo "progress 9"; echo 'result {"ok":[1,2],"error":null,"peak_rss_bytes":4096}'"#,
    );
    let mut seen = Vec::new();
    let (v, stats): (Vec<u32>, _) = sb
        .run(&probe_op(), limits(10), &mut |n| seen.push(n))
        .await
        .unwrap();
    assert_eq!(v, vec![1, 2]);
    assert_eq!(seen, vec![5, 9]);
    assert_eq!(stats.peak_rss_bytes, 4096);
}

#[tokio::test]
async fn media_errors_keep_code_and_class() {
    let dir = tempfile::tempdir().unwrap();
    let sb = script(
        dir.path(),
        r#"echo 'result {"ok":null,"error":{"code":"input_invalid","class":"abort","message":"x.mp4: bad"},"peak_rss_bytes":0}'"#,
    );
    let err = sb
        .run::<serde_json::Value>(&probe_op(), limits(10), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.class()),
        ("input_invalid", ErrorClass::Abort)
    );
    assert_eq!(err.to_string(), "x.mp4: bad");
}

#[tokio::test]
async fn a_crash_is_a_retryable_attempt_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let sb = script(dir.path(), "echo 'decoder exploded' >&2; kill -SEGV $$");
    let err = sb
        .run::<serde_json::Value>(&probe_op(), limits(10), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        (err.code(), err.class()),
        ("child_crashed", ErrorClass::Retry)
    );
    let text = err.to_string();
    assert!(
        text.contains("signal") && text.contains("decoder exploded"),
        "{text}"
    );
}

#[tokio::test]
async fn a_hang_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let sb = script(dir.path(), "exec sleep 30");
    let started = Instant::now();
    let err = sb
        .run::<serde_json::Value>(&probe_op(), limits(1), &mut |_| {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), "child_timeout");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn peak_rss_reads_proc() {
    assert!(peak_rss() > 0);
}
