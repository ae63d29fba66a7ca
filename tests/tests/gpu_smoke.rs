//! The GPU smoke test (`tessera-gpu-smoke`, run on a card's host by `scripts/gpu-smoke.sh`)
//! from cargo, on a machine that has both cargo and the card.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use tessera_tests::run::{run_ffmpeg_tool, tessera_bin};

/// Makes the two clips the smoke test transcodes (1080p H.264 with AAC, 1080p HEVC Main10),
/// `seconds` long at 30 fps, as `scripts/gpu-smoke.sh` does.
fn make_clips(dir: &Path, seconds: u32) {
    let video = format!("-f lavfi -i testsrc2=size=1920x1080:rate=30:duration={seconds}");
    let h264 = format!(
        "{video} -f lavfi -i sine=frequency=440:duration={seconds} -c:v libx264 \
         -preset veryfast -g 60 -bf 3 -pix_fmt yuv420p -c:a aac"
    );
    let hevc10 = format!(
        "{video} -c:v libx265 -preset ultrafast -x265-params log-level=error \
         -pix_fmt yuv420p10le -tag:v hvc1"
    );
    for (args, name) in [(h264, "h264-1080p.mp4"), (hevc10, "hevc10-1080p.mp4")] {
        let out = dir.join(name);
        let args = format!("-hide_banner -loglevel error -y {args}");
        let all = args
            .split_whitespace()
            .map(OsStr::new)
            .chain([out.as_os_str()]);
        run_ffmpeg_tool("ffmpeg", all);
    }
}

/// The five GPU cases and the NVDEC check through `tessera` of this build; asserts that
/// every case that could run passed (no card: every case skipped, said plainly, passes).
/// `GPU_SMOKE_SECONDS` sets the clips' length (default 10); `GPU_SMOKE_SELF_TEST=1` runs the
/// cases with `--gpu off`, which needs no card (the checks on real outputs).
///
/// Run it with `cargo test -p tessera-tests --test gpu_smoke -- --ignored --nocapture`
/// after `cargo build --workspace --bins` (the same profile). Where cargo is not (a card's
/// host), `scripts/gpu-smoke.sh --prepare DIR` bundles the binary, `tessera` and the clips.
#[test]
#[ignore = "needs an NVIDIA card (or GPU_SMOKE_SELF_TEST=1) and minutes of 1080p encoding"]
fn gpu_smoke_cases_pass() {
    let seconds = std::env::var("GPU_SMOKE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let dir = tempfile::tempdir().expect("temp dir");
    let clips = dir.path().join("clips");
    std::fs::create_dir_all(&clips).expect("clips dir");
    make_clips(&clips, seconds);
    let mut smoke = Command::new(env!("CARGO_BIN_EXE_tessera-gpu-smoke"));
    smoke
        .arg("--tessera")
        .arg(tessera_bin())
        .arg("--clips")
        .arg(&clips)
        .arg("--out")
        .arg(dir.path().join("out"));
    if std::env::var("GPU_SMOKE_SELF_TEST").is_ok_and(|v| v == "1") {
        smoke.arg("--self-test");
    }
    let status = smoke.status().expect("run tessera-gpu-smoke");
    assert!(status.success(), "the GPU smoke test failed ({status})");
}
