//! The GPU smoke test (`tessera-gpu-smoke`, run on a card's host by `scripts/gpu-smoke.sh`)
//! from cargo, on a machine that has both cargo and the card: the script itself, so the clips
//! and the cases are the ones a card's host runs.

use std::process::Command;

use tessera_tests::run::tessera_bin;

/// Every GPU case, the NVDEC check and the catch rows through `tessera` of this build, by
/// `scripts/gpu-smoke.sh` (which makes the clips); asserts the verdict (no card: every case
/// skipped, said plainly, passes). `GPU_SMOKE_SECONDS` sets the clips' length (default 10);
/// `GPU_SMOKE_SELF_TEST=1` runs the cases with `--gpu off`, which needs no card (the checks
/// on real outputs, and each shown to catch wrong input).
///
/// Run it with `cargo test -p tessera-tests --test gpu_smoke -- --ignored --nocapture`
/// after `cargo build --workspace --bins` (the same profile). Where cargo is not (a card's
/// host), `scripts/gpu-smoke.sh --prepare DIR` bundles the binary, `tessera` and the clips.
#[test]
#[ignore = "needs an NVIDIA card (or GPU_SMOKE_SELF_TEST=1) and minutes of 1080p encoding"]
fn gpu_smoke_cases_pass() {
    let seconds = std::env::var("GPU_SMOKE_SECONDS").unwrap_or_else(|_| "10".into());
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = tessera_bin();
    let bin_dir = bin.parent().expect("the binaries' directory");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/gpu-smoke.sh");
    let mut run = Command::new("bash");
    run.arg(script)
        .arg("--bin")
        .arg(bin_dir)
        .arg("--out")
        .arg(dir.path())
        .args(["--seconds", &seconds]);
    if std::env::var("GPU_SMOKE_SELF_TEST").is_ok_and(|v| v == "1") {
        run.arg("--self-test");
    }
    let status = run.status().expect("run scripts/gpu-smoke.sh");
    assert!(status.success(), "the GPU smoke test failed ({status})");
}
