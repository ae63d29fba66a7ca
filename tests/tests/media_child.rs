//! The media child executable (`tessera-media`): only it links FFmpeg, the parents find it
//! beside them (or at `$TESSERA_MEDIA_BIN`), and a missing one is an error that names it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tessera_tests::fixture::{fixture, Fixture};
use tessera_tests::run::{run_command, run_tessera, tessera_bin};

/// A sibling of the `tessera` binary under test, if it was built.
fn sibling(name: &str) -> Option<PathBuf> {
    let path = tessera_bin().with_file_name(name);
    path.is_file().then_some(path)
}

/// The shared libraries `ldd` says `exe` needs.
fn needed(exe: &Path) -> String {
    let run = run_command(Path::new("ldd"), [exe], Duration::from_secs(30));
    // A static executable makes ldd say "not a dynamic executable" (exit 1): no libraries.
    run.stdout
}

#[test]
fn only_the_media_child_links_ffmpeg() {
    let media = sibling("tessera-media").expect("tessera-media is built beside tessera");
    let mut parents = vec![tessera_bin()];
    parents.extend(
        ["tessera-worker", "tessera-dispatcher"]
            .into_iter()
            .filter_map(sibling),
    );
    for exe in &parents {
        let libs = needed(exe);
        for lib in [
            "libavcodec",
            "libavformat",
            "libavfilter",
            "libswscale",
            "libx264",
        ] {
            assert!(
                !libs.contains(lib),
                "{} links {lib}; only tessera-media may:\n{libs}",
                exe.display()
            );
        }
    }
    // The child is what links FFmpeg: dynamically here, or statically in the static build
    // (then it has FFmpeg's symbols and needs no libav* library).
    let libs = needed(&media);
    let symbols = std::fs::read(&media).unwrap();
    let has = |needle: &[u8]| symbols.windows(needle.len()).any(|w| w == needle);
    assert!(
        libs.contains("libavcodec") || has(b"avcodec_send_packet"),
        "tessera-media links no FFmpeg: {libs}"
    );
}

#[test]
fn the_media_child_by_hand_says_what_it_is() {
    let media = sibling("tessera-media").expect("tessera-media is built beside tessera");
    let run = run_command(&media, Vec::<&str>::new(), Duration::from_secs(30));
    assert_eq!(run.status.code(), Some(2), "{}", run.describe());
    assert!(
        run.stderr.contains("started by") && run.stderr.contains("tessera-worker"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_missing_media_child_is_named_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let lone = dir.path().join("tessera");
    std::fs::copy(tessera_bin(), &lone).unwrap();
    let input = fixture(Fixture::ClosedGopH264);
    let out = dir.path().join("out.mp4");
    let args = [
        "transcode".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ];
    let run = run_command(&lone, args, Duration::from_secs(60));
    assert!(!run.status.success(), "{}", run.describe());
    let expected = dir.path().join("tessera-media");
    assert!(
        run.stderr.contains(&expected.display().to_string())
            && run.stderr.contains("TESSERA_MEDIA_BIN"),
        "{}",
        run.describe()
    );
    assert!(!out.exists(), "an output was written");

    // $TESSERA_MEDIA_BIN pointing nowhere is named too; pointing at the child, it works.
    let mut cmd = std::process::Command::new(&lone);
    cmd.args(["probe".as_ref(), input.as_os_str()]);
    let nowhere = dir.path().join("no-such-media-child");
    let run = cmd.env("TESSERA_MEDIA_BIN", &nowhere).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(stderr.contains(&nowhere.display().to_string()), "{stderr}");
    let media = sibling("tessera-media").expect("tessera-media is built beside tessera");
    let run = cmd.env("TESSERA_MEDIA_BIN", &media).output().unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("h264"), "{stdout}");
}

#[test]
fn tessera_gpu_reports_the_media_childs_ffmpeg() {
    let run = run_tessera(["gpu", "--json"]);
    run.assert_success();
    let report: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let ffmpeg = &report["ffmpeg"];
    // Debian's FFmpeg 5.1 (and the static build) has the CUDA path and NVENC for H.264/HEVC
    // built in, whether or not a card is present.
    for key in ["cuda_hwaccel", "scale_cuda", "h264_nvenc", "hevc_nvenc"] {
        assert_eq!(ffmpeg[key], true, "{key}: {report}");
    }
}
