//! Neighbouring segments of one scene must not pump: which segment leads each run of
//! segments no scene change separates, and the rate factors a follower may search.
//!
//! Why: every segment searches its own rate factor, in parallel. Two segments of one shot
//! that land at different ends of the search's window (a flat curve lets a still shot land
//! anywhere in several CRF units) would show a visible step in quality where nothing in the
//! picture changed. The rule (docs/architecture.md): the first segment of a run of segments
//! with no scene change between them searches freely; every other segment of the run is
//! published once that leader is done, starts its search at the rate factor the leader kept
//! and stays within [`follower_band`] of it, so no two segments of one scene are more than
//! twice the band's half apart. A scene change between two segments frees them from each
//! other.

/// For each segment, the segment it follows (`None`: it leads; it begins the input or a
/// scene). `starts`: each segment's first pts, ascending; `scenes`: the pts of the frames that
/// begin a scene, ascending. Segment `i` follows its predecessor's leader when no scene
/// begins after the predecessor's first frame and at or before its own first frame.
pub fn scene_leaders(starts: &[i64], scenes: &[i64]) -> Vec<Option<u32>> {
    let mut leaders: Vec<Option<u32>> = Vec::with_capacity(starts.len());
    for (i, &start) in starts.iter().enumerate() {
        let follows = i.checked_sub(1).and_then(|p| {
            let previous = starts[p];
            // Scenes beginning in (previous, start].
            let from = scenes.partition_point(|&s| s <= previous);
            let to = scenes.partition_point(|&s| s <= start);
            (from == to).then(|| leaders[p].unwrap_or(p as u32))
        });
        leaders.push(follows);
    }
    leaders
}

/// The rate factors a follower may search: within `half` of the rate factor its leader kept,
/// inside the rendition's own bounds (`min`, `max`). A leader kept at a bound gives a band
/// that reaches past it only on the inside.
pub fn follower_band(leader: f64, half: f64, (min, max): (f64, f64)) -> (f64, f64) {
    let lo = (leader - half).clamp(min, max);
    let hi = (leader + half).clamp(min, max);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::{follower_band, scene_leaders};

    #[test]
    fn a_scene_change_frees_a_segment_from_its_predecessor() {
        // Segments at 0, 100, 200, 300, 400; scenes begin at 200 (a cut there) and 350
        // (inside the fourth segment).
        let starts = [0, 100, 200, 300, 400];
        assert_eq!(
            scene_leaders(&starts, &[200, 350]),
            vec![None, Some(0), None, Some(2), None]
        );
        // No scene change: one shot, every segment follows the first.
        assert_eq!(
            scene_leaders(&starts, &[]),
            vec![None, Some(0), Some(0), Some(0), Some(0)]
        );
        // A scene at the very first frame changes nothing; one at every cut frees them all.
        assert_eq!(scene_leaders(&starts[..2], &[0]), vec![None, Some(0)]);
        assert_eq!(scene_leaders(&starts, &[100, 200, 300, 400]), vec![None; 5]);
        assert_eq!(scene_leaders(&[], &[5]), Vec::<Option<u32>>::new());
        assert_eq!(scene_leaders(&[7], &[]), vec![None]);
    }

    #[test]
    fn every_follower_leads_back_to_a_leader_without_a_scene_between() {
        // Generated: segment starts and scenes at random; a follower's leader is a leader,
        // precedes it, and no scene begins in (leader's start, follower's start].
        let mut seed = 46u64;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for _ in 0..500 {
            let mut starts = vec![0i64];
            for _ in 0..next(12) {
                let last = *starts.last().unwrap();
                starts.push(last + 1 + next(50) as i64);
            }
            let end = *starts.last().unwrap() + 50;
            let mut scenes: Vec<i64> = (0..next(6)).map(|_| next(end as u64) as i64).collect();
            scenes.sort_unstable();
            let leaders = scene_leaders(&starts, &scenes);
            for (i, l) in leaders.iter().enumerate() {
                let Some(l) = *l else { continue };
                let l = l as usize;
                assert!(
                    l < i && leaders[l].is_none(),
                    "{starts:?} {scenes:?} {leaders:?}"
                );
                let between = scenes.iter().any(|&s| s > starts[l] && s <= starts[i]);
                assert!(!between, "{starts:?} {scenes:?} {leaders:?}");
            }
            // And a segment leads only where a scene begins in its predecessor's range.
            for i in 1..starts.len() {
                if leaders[i].is_none() {
                    let s = scenes.iter().any(|&s| s > starts[i - 1] && s <= starts[i]);
                    assert!(s, "{starts:?} {scenes:?} {leaders:?}");
                }
            }
        }
    }

    #[test]
    fn the_band_stays_inside_the_renditions_bounds() {
        assert_eq!(follower_band(24.0, 1.5, (16.0, 40.0)), (22.5, 25.5));
        assert_eq!(follower_band(16.5, 1.5, (16.0, 40.0)), (16.0, 18.0));
        assert_eq!(follower_band(40.0, 1.5, (16.0, 40.0)), (38.5, 40.0));
        // A leader outside the bounds (an earlier run's, other settings): the nearest bound.
        assert_eq!(follower_band(50.0, 1.5, (16.0, 40.0)), (40.0, 40.0));
    }
}
