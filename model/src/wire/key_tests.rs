//! Forged tasks: every store key a segment or stitch task names must lie in its own job's
//! plan, in the area of what the key is for, or the task is refused when it is read.

use super::*;
use crate::encode::{RateControl, VideoCodec};
use crate::images::{ImageFormat, StillImage};
use crate::probe::ColorInfo;
use crate::wire::keys::Area;

const JOB: &str = "j1";
const PLAN: u64 = 0xab;

fn rational(num: i32, den: i32) -> Rational {
    Rational { num, den }
}

/// A segment task as the dispatcher writes it: chunk, one rendition, one still.
fn segment_task() -> SegmentTask {
    let spec = RenditionSpec {
        name: "720p".into(),
        codec: VideoCodec::H264,
        rate: RateControl::Crf(23.0),
        preset: "fast".into(),
        height: Some(720),
        hdr: Default::default(),
        maxrate: None,
        profile: None,
        target: None,
    };
    let image = StillImage {
        width: 320,
        height: 180,
        format: ImageFormat::Jpeg,
        quality: 80,
    };
    let source = SegmentSource {
        start_pts: 0,
        end_pts: 100,
        time_base: rational(1, 25),
        bias: 0,
        frame_rate: rational(25, 1),
        sample_aspect_ratio: rational(1, 1),
        source_size: None,
        color: ColorInfo::default(),
        source_bit_depth: 8,
        keyframes: Vec::new(),
    };
    SegmentTask {
        v: WIRE_VERSION,
        job_id: JOB.into(),
        plan: PLAN,
        segment: 2,
        chunk_key: keys::chunk(JOB, PLAN, 2),
        encode: SegmentEncode {
            source,
            expected_frames: 100,
            expected_pts: None,
            source_codec: "h264".into(),
            source_pix_fmt: "yuv420p".into(),
        },
        renditions: vec![(spec, keys::encoded(JOB, PLAN, "720p", 2))],
        stills: vec![StillTask {
            pts: 40,
            images: vec![(image, keys::still(JOB, PLAN, "thumbs/0001.jpg"))],
        }],
        segments: 4,
        cut: None,
    }
}

/// A stitch task as the dispatcher writes it.
fn stitch_task() -> StitchTask {
    StitchTask {
        v: WIRE_VERSION,
        job_id: JOB.into(),
        plan: PLAN,
        output: 0,
        segment_keys: (0..2)
            .map(|i| keys::encoded(JOB, PLAN, "720p", i))
            .collect(),
        audio_key: Some(keys::audio(JOB, PLAN)),
        audio_tracks: Vec::new(),
        video_bias: 0,
        video_time_base: rational(1, 25),
        start_seconds: 0.0,
        display_matrix: None,
        frame_rate: rational(25, 1),
        container: Container::Mp4,
        result_key: keys::output(JOB, PLAN, 0, "mp4"),
        expected_frames: 200,
        chapters: Vec::new(),
        title: None,
        subtitles: Vec::new(),
        expect: None,
        heartbeats: true,
        attempt_keys: true,
    }
}

/// Keys a forged task might name instead of its own: another job's, another plan's, the
/// end markers, outside any job, and tricks with `..` and empty parts.
fn forged_keys() -> Vec<String> {
    vec![
        "ended/x".into(),
        keys::ended(JOB),
        keys::output("victim", PLAN, 0, "mp4"),
        keys::output(JOB, PLAN + 1, 0, "mp4"),
        format!("{}x", keys::job_prefix(JOB)),
        format!("{}stills/../output/00.mp4", keys::plan_prefix(JOB, PLAN)),
        format!("{}stills//x.jpg", keys::plan_prefix(JOB, PLAN)),
        format!("{}stills/./x.jpg", keys::plan_prefix(JOB, PLAN)),
        format!("{}stills/", keys::plan_prefix(JOB, PLAN)),
    ]
}

/// Asserts the body is refused with a reason naming `key`.
fn refused<T: for<'de> serde::Deserialize<'de> + Versioned>(body: &[u8], key: &str) {
    let err = decode_message::<T>(body)
        .err()
        .unwrap_or_else(|| panic!("{key} accepted"));
    let shown = key.escape_debug().to_string();
    assert!(err.to_string().contains(&shown), "{key}: {err}");
}

#[test]
fn the_dispatchers_own_tasks_are_read() {
    let seg = segment_task();
    assert_eq!(
        decode_message::<SegmentTask>(&encode_message(&seg)).unwrap(),
        seg
    );
    let stitch = stitch_task();
    let read = decode_message::<StitchTask>(&encode_message(&stitch)).unwrap();
    assert_eq!(read, stitch);
}

#[test]
fn a_forged_still_key_is_refused() {
    let mut forged = forged_keys();
    // The job's own plan, but another area: a still must not replace the stitched output.
    forged.push(keys::output(JOB, PLAN, 0, "mp4"));
    forged.push(keys::chunk(JOB, PLAN, 3));
    for key in forged {
        let mut task = segment_task();
        task.stills[0].images[0].1 = key.clone();
        refused::<SegmentTask>(&encode_message(&task), &key);
    }
}

#[test]
fn forged_chunk_and_rendition_keys_are_refused() {
    let mut forged = forged_keys();
    forged.push(keys::output(JOB, PLAN, 0, "mp4"));
    for key in forged.iter().chain([&keys::audio(JOB, PLAN)]) {
        let mut task = segment_task();
        task.renditions[0].1 = key.clone();
        refused::<SegmentTask>(&encode_message(&task), key);
    }
    for key in forged.iter().chain([&keys::encoded(JOB, PLAN, "720p", 2)]) {
        let mut task = segment_task();
        task.chunk_key = key.clone();
        refused::<SegmentTask>(&encode_message(&task), key);
    }
}

#[test]
fn forged_stitch_keys_are_refused() {
    let mut forged = forged_keys();
    forged.push(keys::chunk(JOB, PLAN, 0));
    for key in forged.iter().chain([&keys::encoded(JOB, PLAN, "720p", 0)]) {
        let mut task = stitch_task();
        task.result_key = key.clone();
        refused::<StitchTask>(&encode_message(&task), key);
    }
    for key in forged.iter().chain([&keys::output(JOB, PLAN, 0, "mp4")]) {
        let mut task = stitch_task();
        task.segment_keys[1] = key.clone();
        refused::<StitchTask>(&encode_message(&task), key);
        let mut task = stitch_task();
        task.audio_key = Some(key.clone());
        refused::<StitchTask>(&encode_message(&task), key);
    }
}

/// A stitch task of a dispatcher from before stitch heartbeats has no `heartbeats` field: it
/// reads as `false`, so a newer worker holds its delivery and sends no `running` event, which
/// that dispatcher would dead-letter and fail the job `task_lost` for (found by
/// scripts/rolling-upgrade.sh: an old dispatcher with new workers).
#[test]
fn a_stitch_task_without_heartbeats_asks_for_none() {
    let mut task = serde_json::to_value(stitch_task()).unwrap();
    assert_eq!(task["heartbeats"], true);
    task.as_object_mut().unwrap().remove("heartbeats");
    let old: StitchTask = decode_message(task.to_string().as_bytes()).unwrap();
    assert!(!old.heartbeats);
}

/// A whole-input task as the dispatcher writes it: the segment of one encode, its stitch.
fn whole_task() -> WholeTask {
    let mut encode_task = segment_task();
    encode_task.segment = 0;
    encode_task.chunk_key = keys::chunk(JOB, PLAN, 0);
    encode_task.renditions[0].1 = keys::encoded(JOB, PLAN, "720p", 0);
    encode_task.stills.clear();
    let mut stitch = stitch_task();
    stitch.segment_keys.truncate(1);
    WholeTask {
        v: WIRE_VERSION,
        job_id: JOB.into(),
        plan: PLAN,
        source_key: keys::source(JOB, PLAN, "mp4"),
        split: one_segment_split(),
        encode_task,
        audio: None,
        stitch_tasks: vec![stitch],
    }
}

/// The split of a plan's one segment of 100 frames.
fn one_segment_split() -> WholeSplit {
    WholeSplit {
        segment: crate::probe::SegmentPlan {
            index: 0,
            start_pts: 0,
            end_pts: 100,
            first_packet: 0,
            last_packet: 99,
            frames: 100,
            starts_on_keyframe: true,
            first_frame_pts: Some(0),
            last_frame_pts: Some(99),
        },
        bias: 0,
        dts_rule: Default::default(),
        derived_pts: None,
    }
}

#[test]
fn a_whole_task_is_read_and_named_in_dead_letters() {
    let task = whole_task();
    let body = encode_message(&task);
    assert_eq!(decode_message::<WholeTask>(&body).unwrap(), task);
    assert_eq!(task.check(), Ok(()));
    assert_eq!(
        task_identity(&body),
        Some((JOB.into(), PLAN, TaskRef::Whole))
    );
}

#[test]
fn forged_whole_task_keys_are_refused() {
    let mut forged = forged_keys();
    forged.push(keys::output(JOB, PLAN, 0, "mp4"));
    for key in &forged {
        let mut task = whole_task();
        task.source_key = key.clone();
        refused::<WholeTask>(&encode_message(&task), key);
        let mut task = whole_task();
        task.encode_task.renditions[0].1 = key.clone();
        refused::<WholeTask>(&encode_message(&task), key);
    }
    // A nested stitch of another job writes that job's output.
    let mut task = whole_task();
    task.stitch_tasks[0].result_key = keys::output("victim", PLAN, 0, "mp4");
    refused::<WholeTask>(
        &encode_message(&task),
        &keys::output("victim", PLAN, 0, "mp4"),
    );
}

#[test]
fn a_whole_task_stitches_only_its_own_one_segment() {
    let mut task = whole_task();
    task.stitch_tasks[0].segment_keys = vec![keys::encoded(JOB, PLAN, "1080p", 0)];
    assert!(task.check().unwrap_err().contains("names no rendition"));
    let mut task = whole_task();
    task.stitch_tasks[0]
        .segment_keys
        .push(keys::encoded(JOB, PLAN, "720p", 1));
    assert!(task.check().unwrap_err().contains("not of one segment"));
    let mut task = whole_task();
    task.stitch_tasks.clear();
    assert!(task.check().unwrap_err().contains("no output"));
}

/// A segment task the worker cuts from the job's source.
fn cut_task() -> SegmentTask {
    let mut task = segment_task();
    task.cut = Some(SegmentCut {
        source_key: keys::source(JOB, PLAN, ""),
        split: one_segment_split(),
    });
    task
}

#[test]
fn a_cut_task_is_read_and_a_plain_one_carries_no_cut() {
    let task = cut_task();
    assert_eq!(
        decode_message::<SegmentTask>(&encode_message(&task)).unwrap(),
        task
    );
    let plain = String::from_utf8(encode_message(&segment_task())).unwrap();
    assert!(!plain.contains("cut"), "{plain}");
}

#[test]
fn a_forged_cut_source_key_is_refused() {
    let mut forged = forged_keys();
    forged.push(keys::output(JOB, PLAN, 0, "mp4"));
    forged.push(keys::chunk(JOB, PLAN, 0));
    for key in &forged {
        let mut task = cut_task();
        if let Some(cut) = task.cut.as_mut() {
            cut.source_key = key.clone();
        }
        refused::<SegmentTask>(&encode_message(&task), key);
    }
}

/// An attempt's key lies beside its result key, in the same area, and only keys of that
/// shape are taken as attempts of it.
#[test]
fn attempt_keys_lie_beside_their_result_key_and_nothing_else_passes() {
    let result = keys::output(JOB, PLAN, 1, "mp4");
    let tagged = keys::attempt(&result, "00ff3a");
    assert_eq!(
        tagged,
        format!("{}01.00ff3a.mp4", Area::Output.prefix(JOB, PLAN))
    );
    assert!(Area::Output.holds(&tagged, JOB, PLAN));
    assert!(keys::is_attempt_of(&tagged, &result));
    assert!(keys::is_attempt_of(&result, &result));
    let other = keys::output(JOB, PLAN, 2, "mp4");
    let refused = [
        keys::attempt(&other, "00ff3a"),
        keys::attempt(&result, "not-hex"),
        format!("{}01..mp4", Area::Output.prefix(JOB, PLAN)),
        format!("{}01.ab/../02.mp4", Area::Output.prefix(JOB, PLAN)),
        format!("{}01.ab.mkv", Area::Output.prefix(JOB, PLAN)),
        keys::output("j2", PLAN, 1, "mp4"),
    ];
    for key in refused {
        assert!(!keys::is_attempt_of(&key, &result), "{key}");
    }
    // A key without an extension gets its tag at the end.
    assert_eq!(keys::attempt("a/b", "01"), "a/b.01");
    assert!(keys::is_attempt_of("a/b.01", "a/b"));
    assert!(!keys::is_attempt_of("a/b.01/c", "a/b"));
}
