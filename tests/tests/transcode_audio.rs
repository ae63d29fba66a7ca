//! End-to-end transcodes that stress the audio path: no audio at all,
//! audio longer than video, and two language-tagged tracks. Each runs the
//! real `tessera` binary and checks every invariant in
//! `tessera_tests::check` (which compares every audio track's codec,
//! language, A/V offset and duration with the source's).

use tessera_tests::{fixture, streams_of, transcode_and_check, Fixture, Job};

#[test]
fn no_audio() {
    let src = fixture(Fixture::NoAudio);
    assert!(
        streams_of(&src, "audio").is_empty(),
        "fixture should have no audio"
    );
    let c = transcode_and_check(&src, "out.mp4", 1, &[]);
    assert!(c.out.audio.is_empty(), "output gained an audio track");
}

#[test]
fn audio_longer_than_video() {
    let src = fixture(Fixture::AudioLongerThanVideo);
    let c = transcode_and_check(&src, "out.mp4", 1, &[]);
    let video_end = c.src.rel_times().last().copied().unwrap_or_default();
    let audio = c.src.audio[0].duration();
    assert!(
        audio > video_end + 1.5,
        "fixture: audio {audio:.2} s vs video {video_end:.2} s"
    );
    let out_audio = c.out.audio[0].duration();
    assert!(
        (out_audio - audio).abs() <= 0.1,
        "audio cut to the video? output audio {out_audio:.3} s, source {audio:.3} s"
    );
}

#[test]
fn two_audio_tracks_with_languages_to_mkv() {
    let src = fixture(Fixture::TwoAudioLanguages);
    let langs = |p: &std::path::Path| -> Vec<Option<String>> {
        streams_of(p, "audio")
            .into_iter()
            .map(|s| s.language)
            .collect()
    };
    let want = vec![Some("eng".to_owned()), Some("fra".to_owned())];
    assert_eq!(langs(&src), want, "fixture languages");
    let c = transcode_and_check(&src, "out.mkv", 1, &[]);
    assert_eq!(langs(&c.out.path), want, "output languages, in order");
    for (i, (s, o)) in c.src.audio.iter().zip(&c.out.audio).enumerate() {
        assert!(
            (s.duration() - o.duration()).abs() <= 0.1,
            "track {i}: duration {:.3} vs source {:.3}",
            o.duration(),
            s.duration()
        );
    }
}

/// 5.1 stays 5.1 (the AAC source is copied as it is); `--stereo-downmix`, its env variable
/// and its config-file key mix it down to stereo, re-encoding even a track that would have
/// been copied, and keep it in sync and whole.
#[test]
fn surround_is_kept_unless_mixed_down_to_stereo() {
    let src = fixture(Fixture::SurroundAac);
    let channels = |p: &std::path::Path| -> Vec<Option<u64>> {
        streams_of(p, "audio")
            .into_iter()
            .map(|s| s.channels)
            .collect()
    };
    assert_eq!(channels(&src), vec![Some(6)], "fixture channels");
    let kept = transcode_and_check(&src, "out.mp4", 1, &[]);
    assert_eq!(channels(&kept.out.path), vec![Some(6)], "5.1 kept");
    let job = Job::new(&src, "out.mp4");
    job.run_ok(1, &["--stereo-downmix", "true"]);
    // Every invariant but the channel count, which is the point.
    let (mixed, problems) = tessera_tests::check::measure_transcode(&src, job, 2);
    let others: Vec<&String> = problems
        .iter()
        .filter(|p| !p.starts_with("audio 0: Some(2) channels, source Some(6)"))
        .collect();
    assert!(others.is_empty(), "mixed down: {others:?}");
    assert_eq!(
        channels(&mixed.out.path),
        vec![Some(2)],
        "mixed down by flag"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("tessera.toml");
    std::fs::write(&config, "[transcode]\nstereo_downmix = true\n").expect("write config");
    let job = Job::new(&src, "out.mp4");
    let config_arg = config.to_string_lossy().into_owned();
    job.run_ok(1, &["--config", &config_arg]);
    assert_eq!(
        channels(&job.output),
        vec![Some(2)],
        "mixed down by the config file"
    );
}

/// Positions, in `log` (tessera's stderr at `--log info`), of the audio step's start and of
/// every "segment encoded" line.
fn audio_and_segments(log: &str) -> (usize, Vec<usize>) {
    let lines: Vec<&str> = log.lines().collect();
    let began = lines
        .iter()
        .position(|l| l.contains("audio step began"))
        .unwrap_or_else(|| panic!("no audio step in the log:\n{log}"));
    let segments = (lines.iter().enumerate())
        .filter(|(_, l)| l.contains("segment encoded"))
        .map(|(i, _)| i)
        .collect();
    (began, segments)
}

/// The one-process farm shares one media child per worker with the dispatcher. A job of one
/// round of segments (one per worker) runs its audio step on the child the first segment to
/// end freed, never before a segment (which would make that segment's worker wait); a job
/// of more segments than workers begins it at once. The audio is whole either way.
#[test]
fn the_audio_step_of_a_one_round_job_waits_for_a_free_child() {
    let src = fixture(Fixture::ClosedGopH264);
    let src_audio = tessera_tests::Summary::of(&src).audio[0].duration();
    for (segment_seconds, one_round) in [(10, true), (1, false)] {
        let job = Job::new(&src, &format!("out-{segment_seconds}.mp4"));
        let log = ["--log", "tessera_engine=info,tessera_worker=info"];
        let run = job.run_ok(segment_seconds, &log);
        let (began, segments) = audio_and_segments(&run.stderr);
        if one_round {
            assert_eq!(segments.len(), 2, "one segment per worker:\n{}", run.stderr);
            assert!(
                segments[0] < began,
                "the audio step began before any segment ended:\n{}",
                run.stderr
            );
        } else {
            assert!(
                segments.len() > 2,
                "more segments than workers:\n{}",
                run.stderr
            );
            assert!(
                began < segments[0],
                "the audio step waited though the job has more rounds:\n{}",
                run.stderr
            );
        }
        let out_audio = tessera_tests::Summary::of(&job.output).audio[0].duration();
        assert!(
            (out_audio - src_audio).abs() <= 0.05,
            "{segment_seconds} s segments: output audio {out_audio:.3} s, source {src_audio:.3} s"
        );
    }
}
