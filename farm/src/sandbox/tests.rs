//! Sandbox tests with stand-in children (shell scripts playing the child's protocol).

use super::*;
use std::os::unix::fs::PermissionsExt;

/// A stand-in child: a shell script playing the child's side of the protocol.
pub(super) fn script(dir: &std::path::Path, body: &str) -> Sandbox {
    let path = dir.join("child.sh");
    std::fs::write(&path, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox::new(path)
}

pub(super) fn probe_op() -> MediaOp {
    MediaOp::Probe {
        input: "in.mp4".into(),
        max_frames: None,
    }
}

pub(super) fn limits(secs: u64) -> Limits {
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
        (err.code().as_str(), err.class()),
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
        (err.code().as_str(), err.class()),
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

/// A stand-in serving child: answers each request line; the probe's input picks a behaviour
/// (`crash`, `hang`, `garbage`, `stale`, `media_error`, else `[pid, operations so far]`).
fn server(dir: &std::path::Path) -> Sandbox {
    let path = dir.join("serve.sh");
    let body = r#"#!/bin/sh
n=0
while read -r line; do
  n=$((n+1))
  seq=$(printf '%s' "$line" | sed 's/.*"seq":\([0-9]*\).*/\1/')
  case "$line" in
    *crash*) echo 'decoder exploded' >&2; kill -SEGV $$ ;;
    *hang*) exec sleep 30 ;;
    *garbage*) echo "result nonsense" ;;
    *stale*) echo "result {\"ok\":1,\"error\":null,\"peak_rss_bytes\":0,\"seq\":999}" ;;
    *media_error*) echo "result {\"ok\":null,\"error\":{\"code\":\"input_invalid\",\"class\":\"abort\",\"message\":\"bad\"},\"peak_rss_bytes\":0,\"seq\":$seq}" ;;
    *) echo "progress $n"; echo "result {\"ok\":[$$,$n],\"error\":null,\"peak_rss_bytes\":4096,\"seq\":$seq}" ;;
  esac
done
"#;
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox::new(path)
}

fn op(input: &str) -> MediaOp {
    MediaOp::Probe {
        input: input.into(),
        max_frames: None,
    }
}

/// Runs a well-behaved operation: (child pid, operations that child has served).
async fn ok_op(slot: &mut SandboxSlot) -> (u32, u32) {
    let mut seen = Vec::new();
    let (v, stats): ([u32; 2], _) = slot
        .run(&op("in.mp4"), limits(10), &mut |n| seen.push(n))
        .await
        .unwrap();
    assert_eq!(seen, vec![u64::from(v[1])]);
    assert_eq!(stats.peak_rss_bytes, 4096);
    (v[0], v[1])
}

async fn failing_op(slot: &mut SandboxSlot, input: &str, secs: u64) -> FarmError {
    slot.run::<serde_json::Value>(&op(input), limits(secs), &mut |_| {})
        .await
        .unwrap_err()
}

/// Whether process `pid` is gone (or a zombie waiting to be reaped), polled for up to 5 s.
async fn gone(pid: u32) -> bool {
    for _ in 0..50 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(s) if s.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')) => return true,
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    false
}

fn slot(dir: &std::path::Path) -> SandboxSlot {
    SandboxSlot::new(server(dir), WarmPolicy::default())
}

#[tokio::test]
async fn a_warm_child_serves_operations_in_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let mut slot = slot(dir.path());
    let (pid, n1) = ok_op(&mut slot).await;
    assert_eq!(ok_op(&mut slot).await, (pid, n1 + 1));
    assert_eq!(ok_op(&mut slot).await, (pid, n1 + 2));
    assert_eq!(slot.child_pid(), Some(pid));
}

#[tokio::test]
async fn a_hang_times_out_and_the_next_operation_gets_a_fresh_child() {
    let dir = tempfile::tempdir().unwrap();
    let mut slot = slot(dir.path());
    let (pid, _) = ok_op(&mut slot).await;
    let started = Instant::now();
    let err = failing_op(&mut slot, "hang", 1).await;
    assert_eq!(err.code(), "child_timeout");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(gone(pid).await, "hung child {pid} still running");
    let (fresh, n) = ok_op(&mut slot).await;
    assert_ne!(fresh, pid);
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_crash_does_not_poison_the_next_operation() {
    let dir = tempfile::tempdir().unwrap();
    let mut slot = slot(dir.path());
    let (pid, _) = ok_op(&mut slot).await;
    let err = failing_op(&mut slot, "crash", 10).await;
    assert_eq!(
        (err.code().as_str(), err.class()),
        ("child_crashed", ErrorClass::Retry)
    );
    let text = err.to_string();
    assert!(
        text.contains("signal") && text.contains("decoder exploded"),
        "{text}"
    );
    let (fresh, n) = ok_op(&mut slot).await;
    assert_ne!(fresh, pid);
    assert_eq!(n, 1);
}

#[tokio::test]
async fn protocol_and_media_errors_retire_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let mut slot = slot(dir.path());
    for (input, code) in [
        ("garbage", "child_crashed"),
        ("stale", "child_crashed"),
        ("media_error", "input_invalid"),
    ] {
        let (pid, _) = ok_op(&mut slot).await;
        let err = failing_op(&mut slot, input, 10).await;
        assert_eq!(err.code(), code, "{input}: {err}");
        assert!(gone(pid).await, "{input}: child {pid} kept");
        let (fresh, n) = ok_op(&mut slot).await;
        assert_ne!(fresh, pid, "{input}");
        assert_eq!(n, 1, "{input}");
    }
}

#[tokio::test]
async fn a_dropped_operation_kills_its_child() {
    let dir = tempfile::tempdir().unwrap();
    let mut slot = slot(dir.path());
    let (pid, _) = ok_op(&mut slot).await;
    let cut = tokio::time::timeout(
        Duration::from_millis(300),
        slot.run::<serde_json::Value>(&op("hang"), limits(60), &mut |_| {}),
    )
    .await;
    assert!(cut.is_err());
    assert!(
        gone(pid).await,
        "child {pid} of a dropped operation still running"
    );
    let (fresh, n) = ok_op(&mut slot).await;
    assert_ne!(fresh, pid);
    assert_eq!(n, 1);
}

#[tokio::test]
async fn the_operation_cap_replaces_the_child() {
    let dir = tempfile::tempdir().unwrap();
    let policy = WarmPolicy {
        max_operations: 2,
        ..WarmPolicy::default()
    };
    let mut slot = SandboxSlot::new(server(dir.path()), policy);
    let (a, _) = ok_op(&mut slot).await;
    assert_eq!(ok_op(&mut slot).await, (a, 2));
    assert!(gone(a).await, "used-up child {a} still running");
    let (b, n) = ok_op(&mut slot).await;
    assert_ne!(a, b);
    assert_eq!(n, 1);
}

#[tokio::test]
async fn other_rlimits_get_another_child() {
    let dir = tempfile::tempdir().unwrap();
    let mut slot = slot(dir.path());
    let (a, _) = ok_op(&mut slot).await;
    let other = Limits {
        memory_bytes: 4 << 30,
        ..limits(10)
    };
    let (v, _): ([u32; 2], _) = slot.run(&op("x"), other, &mut |_| {}).await.unwrap();
    assert_ne!(v[0], a);
}

#[tokio::test]
async fn the_pool_lends_one_slot_per_running_operation() {
    let dir = tempfile::tempdir().unwrap();
    let pool = SlotPool::new(server(dir.path()), WarmPolicy::default());
    pool.warm(None, 1, limits(10));
    let run = || async {
        let (v, _): ([u32; 2], _) = pool
            .run(None::<u32>, "job-a", &op("x"), limits(10), &mut |_| {})
            .await
            .unwrap();
        v[0]
    };
    let (a, b) = tokio::join!(run(), run());
    assert_ne!(a, b, "concurrent operations share a child");
    assert_eq!(pool.idle(), 2);
    let c = run().await;
    assert!(c == a || c == b, "an idle warm child was not reused");
    let (v, _): ([u32; 2], _) = pool
        .run(Some(0), "job-a", &op("x"), limits(10), &mut |_| {})
        .await
        .unwrap();
    assert!(v[0] != a && v[0] != b, "another key reused a child");
    assert_eq!(pool.idle(), 3);
    // Another job gets a slot of the key, never a child that parsed job-a's media.
    let (v, _): ([u32; 2], _) = pool
        .run(None::<u32>, "job-b", &op("x"), limits(10), &mut |_| {})
        .await
        .unwrap();
    assert!(v[0] != a && v[0] != b, "a child served two jobs");
    assert_eq!(pool.idle(), 3, "the slot was reused, its child replaced");
    let again = run().await;
    assert_ne!(again, v[0], "job-a got job-b's child");
}

#[test]
fn the_serving_loop_answers_every_line_with_its_seq() {
    let input = concat!(
        r#"{"seq":7,"request":{"op":"probe","input":"/nonexistent/in.mp4"}}"#,
        "\n\nnot json\n"
    );
    let mut out = Vec::new();
    assert_eq!(child::serve(input.as_bytes(), &mut out), 0);
    let text = String::from_utf8(out).unwrap();
    let results: Vec<ChildResponse> = text
        .lines()
        .filter_map(|l| l.strip_prefix("result "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    assert_eq!(results.len(), 2, "{text}");
    assert_eq!(results[0].seq, Some(7));
    assert_eq!(results[0].error.as_ref().unwrap().code, "input_unreadable");
    assert!(results[0].peak_rss_bytes > 0);
    assert_eq!(results[1].error.as_ref().unwrap().code, "invalid_request");
}

#[tokio::test]
async fn spares_serve_one_operation_each_and_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let sb = server(dir.path()).with_spares(2, limits(10));
    let spares = sb.ready.clone().unwrap();
    assert_eq!(sb.children_ready(), 2);
    let mut used = Vec::new();
    for _ in 0..3 {
        let ahead = spares.pids();
        let (v, _): ([u32; 2], _) = sb.run(&op("x"), limits(10), &mut |_| {}).await.unwrap();
        assert!(
            ahead.contains(&v[0]),
            "{} was not one of the spares {ahead:?}",
            v[0]
        );
        assert_eq!(v[1], 1, "a spare served a second operation");
        assert!(
            gone(v[0]).await,
            "spare {} still running after its operation",
            v[0]
        );
        assert_eq!(sb.children_ready(), 2, "spare not replaced");
        used.push(v[0]);
    }
    used.dedup();
    assert_eq!(used.len(), 3);
}

#[tokio::test]
async fn spares_do_not_grow_with_concurrency_and_survive_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let sb = server(dir.path()).with_spares(1, limits(10));
    let run = || async {
        let (v, _): ([u32; 2], _) = sb.run(&op("x"), limits(10), &mut |_| {}).await.unwrap();
        v[0]
    };
    let (a, b, c) = tokio::join!(run(), run(), run());
    assert!(
        a != b && b != c && a != c,
        "concurrent operations shared a child"
    );
    assert_eq!(sb.children_ready(), 1);
    let err = sb
        .run::<serde_json::Value>(&op("crash"), limits(10), &mut |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("decoder exploded"), "{err}");
    assert_ne!(run().await, a);
}

#[tokio::test]
async fn a_reusing_sandbox_serves_operations_in_one_warm_child() {
    let dir = tempfile::tempdir().unwrap();
    let sb = server(dir.path()).reusing_children(1, limits(10));
    assert!(sb.reuses_children());
    let ahead = sb.ready.clone().unwrap().pids();
    assert_eq!(ahead.len(), 1);
    let run = |input: &'static str| {
        let sb = sb.clone();
        async move {
            sb.run::<[u32; 2]>(&op(input), limits(10), &mut |_| {})
                .await
        }
    };
    assert_eq!(run("x").await.unwrap().0, [ahead[0], 1]);
    assert_eq!(run("x").await.unwrap().0, [ahead[0], 2]);
    // Two at once: the second waits for the one child instead of starting another.
    let (b, c) = tokio::join!(run("x"), run("x"));
    let mut served = [b.unwrap().0, c.unwrap().0];
    served.sort();
    assert_eq!(served, [[ahead[0], 3], [ahead[0], 4]]);
    assert_eq!(sb.children_ready(), 1);
    // A failed operation's child is ended; the next operation gets a fresh one.
    assert!(run("media_error").await.is_err());
    assert!(gone(ahead[0]).await, "a failed child was kept");
    let fresh = run("x").await.unwrap().0;
    assert_ne!(fresh[0], ahead[0]);
    assert_eq!(fresh[1], 1);
}

#[tokio::test]
async fn children_see_no_setting_of_the_parent_but_paths_and_driver_selection() {
    // cargo runs tests with CARGO_* variables set: the parent has them, a child must not.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let dir = tempfile::tempdir().unwrap();
    let sb = script(
        dir.path(),
        r#"names=$(env | cut -d= -f1 | sort | tr '\n' ' '); echo "result {\"ok\":\"$names\",\"error\":null,\"peak_rss_bytes\":0}""#,
    );
    let (names, _): (String, _) = sb.run(&probe_op(), limits(10), &mut |_| {}).await.unwrap();
    let names: Vec<&str> = names.split_whitespace().collect();
    assert!(names.contains(&"PATH"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("CARGO")), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("TESSERA_")),
        "{names:?}"
    );
    for name in [
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        "LD_LIBRARY_PATH",
    ] {
        assert!(child_may_see(name), "{name}");
    }
    for name in [
        "TESSERA_S3_SECRET_ACCESS_KEY",
        "TESSERA_AMQP_URL",
        "AWS_SECRET_ACCESS_KEY",
        "HOME",
    ] {
        assert!(!child_may_see(name), "{name}");
    }
}
