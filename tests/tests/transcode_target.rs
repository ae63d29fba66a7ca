//! Target-quality encoding in the one-process farm (issue 46): a source whose segments differ
//! in difficulty (a still test card, then moving detail under grain), encoded with
//! `--target-vmaf`, must come out frame-exact with every segment's VMAF (measured on the
//! stitched output) near the target, and more even across segments than one CRF gives.
//! Bad target settings are refused naming the setting. The second segment of a shot starts
//! where the first ended and stays near it (the neighbour rule). The distributed farm
//! searches the same way on its workers and says so in the job's view.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;
use tessera_tests::farm::Farm;
use tessera_tests::fixture::ffmpeg;
use tessera_tests::job::Job;
use tessera_tests::probe::frame_count;

const TARGET: f64 = 90.0;
const FRAMES: u64 = 200;

/// The lossless file `name` in `dir` made by the filter graph `graph` (its output `[v]`),
/// of `frames` frames.
fn lossless(dir: &Path, name: &str, graph: &str, frames: u64) -> PathBuf {
    let src = dir.join(name);
    let args = ["-filter_complex", graph, "-map", "[v]", "-c:v", "ffv1"];
    ffmpeg(&[&args[..], &[src.to_str().unwrap()]].concat());
    assert_eq!(frame_count(&src), frames);
    src
}

/// 8 s at 25 fps, lossless: 4 s of a still card, 4 s of moving detail with grain.
fn mixed_source(dir: &Path) -> PathBuf {
    let graph = "smptebars=size=640x360:rate=25:duration=4[a];\
                 testsrc2=size=640x360:rate=25:duration=4,noise=alls=14:allf=t[b];\
                 [a][b]concat=n=2:v=1:a=0,format=yuv420p[v]";
    lossless(dir, "mixed.mkv", graph, FRAMES)
}

/// The per-segment mean VMAF of a `--quality` report.
fn segment_vmaf(job: &Job) -> Vec<f64> {
    let report = job.report();
    let quality = report.quality.expect("--quality reports quality");
    let vmaf = quality.vmaf.expect("--quality reports VMAF");
    assert_eq!(vmaf.pooled.frames, FRAMES);
    vmaf.segments.iter().map(|s| s.mean).collect()
}

/// The neighbour rule on the mixed source's four segments (two per shot): the second
/// segment of each shot started its search at the rate factor the first kept, and kept one
/// within the band (1.5 for x264) of it. `searches`: per segment, the rate factor kept and
/// the first probe's.
fn assert_followers_near_leaders(searches: &[(f64, f64)]) {
    assert_eq!(searches.len(), 4, "{searches:?}");
    for (leader, follower) in [(0, 1), (2, 3)] {
        let (kept, _) = searches[leader];
        let (follower_kept, first) = searches[follower];
        assert!(
            (first - kept).abs() < 0.051,
            "segment {follower} should start where segment {leader} ended: {searches:?}"
        );
        assert!(
            (follower_kept - kept).abs() <= 1.5 + 1e-6,
            "segment {follower} strays from segment {leader}: {searches:?}"
        );
    }
}

#[test]
fn target_vmaf_evens_segments_out_near_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let src = mixed_source(dir.path());
    let target = format!("{TARGET}");
    let searched = Job::new(&src, "target.mp4");
    searched.run_ok(2, &["--target-vmaf", &target, "--quality"]);
    assert_eq!(frame_count(&searched.output), FRAMES, "frame-exact");
    let fixed = Job::new(&src, "fixed.mp4");
    fixed.run_ok(2, &["--crf", "23", "--quality"]);
    let (ours, one_crf) = (segment_vmaf(&searched), segment_vmaf(&fixed));
    eprintln!("segment VMAF, target {TARGET}: {ours:?}; CRF 23: {one_crf:?}");
    assert_eq!(ours.len(), 4, "{ours:?}");
    for (i, v) in ours.iter().enumerate() {
        assert!(
            *v >= TARGET - 2.0,
            "segment {i}: VMAF {v:.2} more than 2 below {TARGET}"
        );
    }
    let mean = ours.iter().sum::<f64>() / ours.len() as f64;
    assert!(
        (mean - TARGET).abs() <= 1.5,
        "mean VMAF {mean:.2} far from {TARGET}"
    );
    let spread = |v: &[f64]| {
        v.iter().copied().fold(f64::MIN, f64::max) - v.iter().copied().fold(f64::MAX, f64::min)
    };
    assert!(
        spread(&ours) < spread(&one_crf),
        "the search should even segments out: spread {:.2} against {:.2} at one CRF",
        spread(&ours),
        spread(&one_crf)
    );
    // The report's account of each segment's search: the probes, the one kept, and how far
    // the searched VMAF is from the one measured in the stitched output (the kept probe is
    // the segment's encode, the same frames: only the motion feature of a segment's first
    // frames differs, which sees the previous segment in the stitched output).
    let report = searched.report();
    let output = &report.outputs[0];
    assert_eq!(output.target.len(), 4, "{output:?}");
    for (i, t) in output.target.iter().enumerate() {
        let t = t
            .as_ref()
            .unwrap_or_else(|| panic!("segment {i}: no search in {output:?}"));
        assert_eq!(t.target, TARGET);
        assert!((1..=4).contains(&t.probes.len()), "segment {i}: {t:?}");
        assert!((16.0..=40.0).contains(&t.rate_factor), "segment {i}: {t:?}");
        let kept = t.probes.iter().find(|p| p.rate_factor == t.rate_factor);
        assert_eq!(kept.map(|p| p.vmaf), Some(t.vmaf), "segment {i}: {t:?}");
        assert!(
            (t.vmaf - ours[i]).abs() < 0.5,
            "segment {i}: searched {} measured {}",
            t.vmaf,
            ours[i]
        );
    }
    let error = output
        .target_vmaf_error
        .expect("the search's error is reported");
    eprintln!("searched against measured VMAF: at most {error:.3} apart");
    assert!(error < 0.5, "searched and measured VMAF differ by {error}");
    // The still segments take more rate factor (fewer bits) than the grainy ones.
    let rf: Vec<f64> = output
        .target
        .iter()
        .flatten()
        .map(|t| t.rate_factor)
        .collect();
    assert!(rf[0] > rf[2] && rf[1] > rf[3], "rate factors {rf:?}");
    let searches: Vec<(f64, f64)> = (output.target.iter().flatten())
        .map(|t| (t.rate_factor, t.probes[0].rate_factor))
        .collect();
    assert_followers_near_leaders(&searches);
}

/// With a target, cuts move to scene changes near the segment length: a source of three
/// shots (a still card, moving detail under grain, a cellular automaton) changing at frames
/// 70 and 140, with 3 s segments (75 frames), is cut there, frame-exact.
#[test]
fn target_segments_are_cut_at_scene_changes() {
    let dir = tempfile::tempdir().unwrap();
    let graph = "smptebars=size=320x180:rate=25:duration=2.8[a];\
                 testsrc2=size=320x180:rate=25:duration=2.8,noise=alls=14:allf=t[b];\
                 life=size=320x180:rate=25:seed=46:ratio=0.3:mold=8,trim=duration=2.4[c];\
                 [a][b][c]concat=n=3:v=1:a=0,format=yuv420p[v]";
    let src = lossless(dir.path(), "shots.mkv", graph, 200);
    let target = format!("{TARGET}");
    let job = Job::new(&src, "shots.mp4");
    job.run_ok(3, &["--target-vmaf", &target]);
    assert_eq!(frame_count(&job.output), 200, "frame-exact");
    // Segment starts: the shot changes are among them (the last round of segments is then
    // halved so both workers finish together).
    let starts = |frames: &[u64]| -> Vec<u64> {
        frames
            .iter()
            .scan(0, |at, &n| {
                let start = *at;
                *at += n;
                Some(start)
            })
            .collect()
    };
    let cut = starts(&job.report().segment_frames);
    assert!(cut.contains(&70) && cut.contains(&140), "starts {cut:?}");
    // Without a target the same settings cut by length (at the source's keyframes or frames).
    let plain = Job::new(&src, "plain.mp4");
    plain.run_ok(3, &[]);
    let by_length = starts(&plain.report().segment_frames);
    assert!(!by_length.contains(&70), "starts {by_length:?}");
}

/// HEVC and AV1 search too, and their segments, encoded at different CRFs, still stitch
/// (x265 and x264 headers are made independent of the CRF).
#[test]
fn hevc_and_av1_targets_stitch_and_reach_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let src = mixed_source(dir.path());
    let target = format!("{TARGET}");
    for codec in ["hevc", "av1"] {
        let job = Job::new(&src, &format!("{codec}.mp4"));
        job.run_ok(
            2,
            &["--codec", codec, "--target-vmaf", &target, "--quality"],
        );
        assert_eq!(frame_count(&job.output), FRAMES, "{codec}: frame-exact");
        let segments = segment_vmaf(&job);
        eprintln!("{codec}: segment VMAF {segments:?}");
        assert!(
            segments.iter().all(|v| *v >= TARGET - 2.0),
            "{codec}: {segments:?}"
        );
    }
}

/// The edges of the search in a real encode: a one-frame source (one segment of one frame)
/// searches and keeps a probe; a peak-rate cap too low for the target ends the search at the
/// best probe it allows, and the output keeps the cap.
#[test]
fn a_one_frame_source_and_a_tight_cap_end_their_searches() {
    let dir = tempfile::tempdir().unwrap();
    let still = lossless(
        dir.path(),
        "one.mkv",
        "testsrc2=size=320x180:rate=25,trim=end_frame=1,format=yuv420p[v]",
        1,
    );
    let one = Job::new(&still, "one.mp4");
    one.run_ok(2, &["--target-vmaf", "95"]);
    assert_eq!(frame_count(&one.output), 1);
    let report = one.report();
    let t = report.outputs[0].target[0]
        .as_ref()
        .expect("the one segment searched");
    assert!(!t.probes.is_empty() && t.probes.len() <= 4, "{t:?}");

    let src = mixed_source(dir.path());
    let capped = Job::new(&src, "capped.mp4");
    capped.run_ok(2, &["--target-vmaf", "97", "--max-bitrate", "150k"]);
    assert_eq!(frame_count(&capped.output), FRAMES, "frame-exact");
    let report = capped.report();
    for (i, t) in report.outputs[0].target.iter().enumerate() {
        let t = t
            .as_ref()
            .unwrap_or_else(|| panic!("segment {i}: no search"));
        assert!((1..=4).contains(&t.probes.len()), "segment {i}: {t:?}");
    }
    // 8 s under a 150 kb/s peak with a 300 kb buffer: at most 150k x 8 s + the buffer.
    let bits = std::fs::metadata(&capped.output).unwrap().len() * 8;
    assert!(
        bits <= 150_000 * 8 + 300_000 + 100_000,
        "{bits} bits over the cap"
    );
}

#[test]
fn bad_target_settings_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("tiny.mkv");
    ffmpeg(&[
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=64x64:rate=25:duration=1",
        "-c:v",
        "ffv1",
        src.to_str().unwrap(),
    ]);
    for (args, says) in [
        (&["--target-vmaf", "140"][..], "target VMAF 140"),
        (
            &["--target-vmaf", "90", "--min-crf", "30", "--max-crf", "20"][..],
            "min rate factor 30",
        ),
        (&["--min-crf", "20"][..], "give a target_vmaf"),
        (
            &["--target-vmaf", "90", "--max-crf", "70"][..],
            "max rate factor 70",
        ),
    ] {
        let job = Job::new(&src, "out.mp4");
        let run = job.run(1, args);
        assert!(!run.status.success(), "{args:?} accepted");
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
        assert!(!job.output.exists(), "{args:?} wrote an output");
    }
}

/// The distributed farm: a job submitted with a target through the API searches on the
/// workers, comes out frame-exact, and its view carries each segment's search and the
/// stitched output's VMAF, even when the dispatcher is killed and restarted after the first
/// segment is in (the searches of segments done before are kept with them).
#[test]
fn the_farm_searches_on_its_workers_and_shows_each_segments_search() {
    let dir = tempfile::tempdir().unwrap();
    let src = mixed_source(dir.path());
    let mut farm = Farm::start_with("target", 2, &[]);
    farm.upload(&src, "input", "mixed.mkv");
    let id = farm.submit(
        "s3://input/mixed.mkv",
        "s3://output/mixed.mp4",
        json!({"target": {"vmaf": TARGET}, "preset": "veryfast", "max_bitrate": 20_000_000}),
        json!({"segment_seconds": 2, "psnr": true}),
    );
    farm.wait_segments_done(&id, 1, Duration::from_secs(300));
    farm.kill_dispatcher();
    farm.start_dispatcher();
    let job = farm.wait_job(&id, Duration::from_secs(600));
    assert_eq!(job["state"], "done", "{job}");
    farm.assert_frame_exact(&src, "mixed.mp4");
    let searched = &job["targets"][0];
    assert_eq!(searched["destination"], "s3://output/mixed.mp4", "{job}");
    let segments = searched["segments"].as_array().expect("segments");
    assert_eq!(segments.len(), 4, "{job}");
    for (i, s) in segments.iter().enumerate() {
        let rf = s["rate_factor"].as_f64().unwrap_or(-1.0);
        assert!((16.0..=40.0).contains(&rf), "segment {i}: {s}");
        let probes = s["probes"].as_array().map_or(0, Vec::len);
        assert!((1..=4).contains(&probes), "segment {i}: {s}");
        let vmaf = s["vmaf"].as_f64().unwrap_or(0.0);
        assert!(vmaf >= TARGET - 2.0, "segment {i}: {s}");
    }
    let first = |s: &serde_json::Value| s["probes"][0]["rate_factor"].as_f64().unwrap_or(-1.0);
    let searches: Vec<(f64, f64)> = (segments.iter())
        .map(|s| (s["rate_factor"].as_f64().unwrap_or(-1.0), first(s)))
        .collect();
    assert_followers_near_leaders(&searches);
    let error = searched["vmaf_error"].as_f64().expect("vmaf_error");
    assert!(error < 0.5, "searched and measured VMAF differ by {error}");
    let mean = job["vmaf"].as_f64().expect("the view's VMAF");
    assert!(
        (mean - TARGET).abs() <= 1.5,
        "mean VMAF {mean} far from {TARGET}"
    );
}
