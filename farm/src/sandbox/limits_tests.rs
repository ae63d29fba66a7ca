//! Sandbox tests of the memory bound of GPU children (no RLIMIT_AS, resident memory watched),
//! with stand-in children as in tests.rs.

use super::tests::{limits, probe_op, script};
use super::*;
use std::os::unix::fs::PermissionsExt;

/// A GPU child (`Limits::for_gpu`) has no address-space limit, which would make CUDA's
/// context creation fail; a software child keeps it. Both see CUDA_DEVICE_ORDER=PCI_BUS_ID.
#[tokio::test]
async fn gpu_children_have_no_address_space_limit() {
    let dir = tempfile::tempdir().unwrap();
    let sb = script(
        dir.path(),
        r#"lim=$(awk '/Max address space/ {print $4}' /proc/$$/limits)
echo "result {\"ok\":\"$lim $CUDA_DEVICE_ORDER\",\"error\":null,\"peak_rss_bytes\":0}""#,
    );
    let (soft, _): (String, _) = sb.run(&probe_op(), limits(10), &mut |_| {}).await.unwrap();
    assert_eq!(soft, format!("{} PCI_BUS_ID", 8u64 << 30));
    let (gpu, _): (String, _) = sb
        .run(&probe_op(), limits(10).for_gpu(), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(gpu, "unlimited PCI_BUS_ID");
}

/// A worker's children get its CUDA kernel cache (`CUDA_CACHE_PATH`) and may write in it
/// (Landlock included); without one the variable is unset (GPU re-review, failure 6).
#[tokio::test]
async fn children_get_a_cuda_kernel_cache_they_may_write_in() {
    let dir = tempfile::tempdir().unwrap();
    let body = r#"touch "${CUDA_CACHE_PATH:-/nonexistent}/kernel" 2>/dev/null && w=yes || w=no
echo "result {\"ok\":\"${CUDA_CACHE_PATH:-unset} $w\",\"error\":null,\"peak_rss_bytes\":0}""#;
    let plain = script(dir.path(), body);
    let (none, _): (String, _) = plain
        .run(&probe_op(), limits(10), &mut |_| {})
        .await
        .unwrap();
    assert_eq!(none, "unset no");
    let cache = dir.path().join(".cuda-cache-w0");
    let confinement = confine::Confinement::default().cuda_cache(&cache);
    let sb = script(dir.path(), body).confined(confinement);
    let (got, _): (String, _) = sb.run(&probe_op(), limits(10), &mut |_| {}).await.unwrap();
    assert_eq!(got, format!("{} yes", cache.display()));
    assert!(cache.join("kernel").exists());
}

/// Without RLIMIT_AS, a GPU child is bounded by its resident memory: one that grows past the
/// limit is killed within a moment, long before its time limit, and the error says why.
#[tokio::test]
async fn a_gpu_child_above_its_resident_limit_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let sb = script(
        dir.path(),
        "exec python3 -c 'import time; x = b\"x\" * (300 << 20); time.sleep(60)'",
    );
    let small = Limits {
        memory_bytes: 100 << 20,
        ..limits(60)
    }
    .for_gpu();
    let started = Instant::now();
    let err = sb
        .run::<serde_json::Value>(&probe_op(), small, &mut |_| {})
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20), "killed late");
    assert_eq!(err.code().as_str(), "child_crashed");
    assert!(err.to_string().contains("resident memory"), "{err}");
    // The same through a warm slot (how workers run GPU segments): a serving child never
    // sees its stdin end, so this one allocates at once.
    let path = dir.path().join("serving.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\nexec python3 -c 'import time; x = b\"x\" * (300 << 20); time.sleep(60)'\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut slot = SandboxSlot::new(Sandbox::new(path), WarmPolicy::default());
    let err = slot
        .run::<serde_json::Value>(&probe_op(), small, &mut |_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("resident memory"), "{err}");
}
