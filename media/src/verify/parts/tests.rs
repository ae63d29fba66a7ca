//! Tests of the QC gate's decode in parts: where the borders fall, which keyframes start a
//! part, that parts join only in time order, and what a references-only read counts.

use super::*;

#[test]
fn borders_sit_before_the_keyframes_nearest_even_shares() {
    assert_eq!(borders(&[], 0.0, 4.0, 1), vec![0.0]);
    assert_eq!(borders(&[], 0.0, 4.0, 4), vec![0.0, 1.0, 2.0, 3.0]);
    assert_eq!(borders(&[], 0.0, 4.0, 0), vec![0.0]);
    let near = |b: Vec<f64>, want: &[f64]| {
        assert_eq!(b.len(), want.len(), "{b:?}");
        for (x, y) in b.iter().zip(want) {
            assert!((x - y).abs() < 1e-5, "{b:?} != {want:?}");
        }
    };
    // Two segments of a 5 s clip: the second starts at 2.467 s, the even share is 2.483 s.
    near(borders(&[0.0, 2.467], 0.0, 4.967, 2), &[0.0, 2.467]);
    near(
        borders(&[0.0, 1.0, 2.0, 3.0, 4.0], 0.0, 5.0, 3),
        &[0.0, 2.0, 3.0],
    );
    // A sparse index: never an empty or repeated border among its keyframes.
    near(borders(&[0.0, 2.0, 2.1], 0.0, 4.0, 3), &[0.0, 2.0, 2.1]);
    // Fewer indexed keyframes than parts: the even shares.
    near(borders(&[0.0], 0.0, 4.0, 2), &[0.0, 2.0]);
}

#[test]
fn parts_change_only_at_keyframes_that_reach_a_border() {
    let b = [0.0, 2.0, 4.0];
    // Packets (key, dts) of a stream with keyframes every 1.5 s.
    let packets = [
        (true, 0.0),
        (false, 1.0),
        (true, 1.5),
        (false, 2.5),
        (true, 3.0),
        (true, 4.5),
        (false, 5.0),
    ];
    let mut part = 0;
    let parts: Vec<usize> = packets
        .iter()
        .map(|&(key, dts)| {
            part = part_of(part, key, dts, &b);
            part
        })
        .collect();
    // Part 1 starts at the keyframe at 3.0 (the first to reach 2.0), part 2 at 4.5.
    assert_eq!(parts, vec![0, 0, 0, 0, 1, 2, 2]);
    // A keyframe past two borders skips the empty part between them.
    assert_eq!(part_of(0, true, 4.5, &b), 2);
    assert_eq!(part_of(0, false, 9.0, &b), 0);
}

fn shown(frames: u64, first: f64, last: f64) -> Shown {
    Shown {
        frames,
        decoded: frames,
        first: Some(first),
        last: Some(last),
    }
}

#[test]
fn parts_join_only_in_time_order() {
    let whole = shown(10, 0.0, 0.36).then(shown(5, 0.4, 0.56)).unwrap();
    assert_eq!(
        (whole.frames, whole.first, whole.last),
        (15, Some(0.0), Some(0.56))
    );
    let err = shown(10, 0.0, 0.36).then(shown(5, 0.36, 0.56)).unwrap_err();
    assert!(err.contains("backwards"), "{err}");
    // An empty part changes nothing, wherever it is.
    assert_eq!(
        shown(10, 0.0, 0.36).then(Shown::default()).unwrap().frames,
        10
    );
    assert_eq!(
        Shown::default().then(shown(10, 0.0, 0.36)).unwrap().frames,
        10
    );
}
