//! End-to-end transcodes that stress the audio path: no audio at all,
//! audio longer than video, and two language-tagged tracks. Each runs the
//! real `tessera` binary and checks every invariant in
//! `tessera_tests::check` (which compares every audio track's codec,
//! language, A/V offset and duration with the source's).

use tessera_tests::{fixture, streams_of, transcode_and_check, Fixture};

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
