//! Which of a job's segments wait for their scene's first segment, and what that leader kept
//! (the rule: `tessera_model::target::scenes`; docs/architecture.md).
//!
//! Why shared: the publisher holds a follower back until its leader is done, the collect
//! stage records each segment's result as it comes in (or as an earlier run left it), and
//! `segment_task` gives a follower its band, whenever it is published or republished.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tessera_model::encode::{RateControl, RenditionSpec, TargetQuality, TargetResult};
use tessera_model::settings::{scene_band_half, target_search};
use tessera_model::target::scenes::follower_band;
use tessera_model::wire::SegmentTask;
use tokio::sync::Notify;

/// The leaders of one run of a job, and the rate factors each finished segment kept.
pub(crate) struct SceneLeads {
    /// Per segment, the segment it follows (`None`: it leads).
    leaders: Vec<Option<u32>>,
    /// Per segment, once done: the rate factor kept per rendition (`None` for one without
    /// a target or without an account).
    kept: Mutex<Vec<Option<Vec<Option<f64>>>>>,
    /// Whether the run's segments go to the GPU (NVENC's cq grid).
    gpu: bool,
    /// Segments recorded since the publisher last looked (`take_recorded`).
    recorded: Mutex<Vec<u32>>,
    /// Wakes the publisher when a segment's result is recorded.
    changed: Notify,
}

/// Followers' tasks the publisher holds (`T`: a segment task), by the leader each waits for.
/// Why keyed: a shot of thousands of segments holds thousands of tasks, and each leader's
/// result releases only its own followers (no scan of every held task per result).
pub(crate) struct Held<T>(BTreeMap<u32, Vec<(u32, T)>>);

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held(BTreeMap::new())
    }
}

impl<T> Held<T> {
    /// Holds segment `segment`'s `task` until `leader` is done.
    pub(crate) fn hold(&mut self, leader: u32, segment: u32, task: T) {
        self.0.entry(leader).or_default().push((segment, task));
    }

    /// The tasks of the followers of `done` (leaders just recorded), in segment order.
    pub(crate) fn release(&mut self, done: &[u32]) -> Vec<T> {
        let mut tasks: Vec<(u32, T)> = (done.iter())
            .filter_map(|l| self.0.remove(l))
            .flatten()
            .collect();
        tasks.sort_unstable_by_key(|(segment, _)| *segment);
        tasks.into_iter().map(|(_, task)| task).collect()
    }

    /// Whether no task is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl SceneLeads {
    /// `leaders` from `scene_leaders` (all `None` when no segment follows another).
    pub(crate) fn new(leaders: Vec<Option<u32>>, gpu: bool) -> Self {
        let kept = Mutex::new(vec![None; leaders.len()]);
        SceneLeads {
            leaders,
            kept,
            gpu,
            recorded: Mutex::new(Vec::new()),
            changed: Notify::new(),
        }
    }

    /// The segment `segment` follows, if any.
    pub(crate) fn leader(&self, segment: u32) -> Option<u32> {
        self.leaders.get(segment as usize).copied().flatten()
    }

    /// The leader `segment` must wait for: `None` for a leader, or for a follower whose
    /// leader is done.
    pub(crate) fn waits_for(&self, segment: u32) -> Option<u32> {
        self.leader(segment)
            .filter(|&l| self.lock().get(l as usize).is_none_or(Option::is_none))
    }

    /// The segments recorded since the last call (the publisher releases their followers).
    pub(crate) fn take_recorded(&self) -> Vec<u32> {
        std::mem::take(&mut *self.recorded.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Records what `segment` kept (its event's searches, in output order; empty for none)
    /// and wakes the publisher.
    pub(crate) fn record(&self, segment: u32, targets: &[Option<TargetResult>]) {
        if let Some(slot) = self.lock().get_mut(segment as usize) {
            *slot = Some(
                targets
                    .iter()
                    .map(|t| t.as_ref().map(|t| t.rate_factor))
                    .collect(),
            );
        }
        (self.recorded.lock().unwrap_or_else(|p| p.into_inner())).push(segment);
        self.changed.notify_one();
    }

    /// Until a result is recorded (one recorded while nobody waited counts).
    pub(crate) async fn changed(&self) {
        self.changed.notified().await;
    }

    /// The rendition `spec` (output `index`) as follower `segment` encodes it: its target's
    /// bounds narrowed to the band around the rate factor its leader kept, the search
    /// starting there. Unchanged for a leader, for a rendition without a target, and while
    /// the leader's result is unknown (a republish of a task an older dispatcher published).
    pub(crate) fn follower_spec(
        &self,
        segment: u32,
        index: usize,
        spec: &RenditionSpec,
    ) -> RenditionSpec {
        let mut spec = spec.clone();
        let Some(target) = spec.target else {
            return spec;
        };
        let kept = self.leader(segment).and_then(|l| {
            let kept = self.lock();
            kept.get(l as usize)?
                .as_ref()?
                .get(index)
                .copied()
                .flatten()
        });
        let Some(kept) = kept else {
            return spec;
        };
        let search = target_search(&spec, &target, self.gpu);
        let half = scene_band_half(spec.codec, self.gpu);
        let (lo, hi) = follower_band(kept, half, (search.min_rate_factor, search.max_rate_factor));
        spec.target = Some(TargetQuality {
            min_rate_factor: Some(lo),
            max_rate_factor: Some(hi),
            ..target
        });
        spec.rate = RateControl::Crf(kept.clamp(lo, hi) as f32);
        spec
    }

    /// `task`'s renditions as [`Self::follower_spec`] gives them (the same again for a task
    /// already bound).
    pub(crate) fn bind(&self, task: &mut SegmentTask) {
        if self.leader(task.segment).is_none() {
            return;
        }
        for (index, (spec, _)) in task.renditions.iter_mut().enumerate() {
            *spec = self.follower_spec(task.segment, index, spec);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Option<Vec<Option<f64>>>>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::{Held, SceneLeads};
    use tessera_model::encode::VideoCodec;
    use tessera_model::encode::{RateControl, RenditionSpec, TargetQuality, TargetResult};

    fn spec(target: Option<TargetQuality>) -> RenditionSpec {
        RenditionSpec {
            name: "r".into(),
            codec: VideoCodec::H264,
            rate: RateControl::Crf(23.0),
            preset: "medium".into(),
            height: None,
            hdr: Default::default(),
            maxrate: None,
            profile: None,
            target,
        }
    }

    #[test]
    fn held_tasks_go_when_their_own_leader_is_done_in_segment_order() {
        let mut held = Held::default();
        held.hold(0, 3, "s3");
        held.hold(4, 5, "s5");
        held.hold(0, 1, "s1");
        held.hold(0, 2, "s2");
        assert!(held.release(&[7, 9]).is_empty());
        assert_eq!(held.release(&[4, 0]), ["s1", "s2", "s3", "s5"]);
        assert!(held.is_empty() && held.release(&[0]).is_empty());
    }

    fn kept(rate_factor: f64) -> Option<TargetResult> {
        Some(TargetResult {
            target: 93.0,
            rate_factor,
            vmaf: 93.2,
            probes: Vec::new(),
        })
    }

    #[test]
    fn a_follower_waits_for_its_leader_and_searches_near_it() {
        // Segments 0 and 2 lead; 1 follows 0, 3 follows 2.
        let leads = SceneLeads::new(vec![None, Some(0), None, Some(2)], false);
        assert_eq!(leads.waits_for(0).or(leads.waits_for(2)), None);
        assert_eq!((leads.waits_for(1), leads.waits_for(3)), (Some(0), Some(2)));
        let targeted = spec(Some(TargetQuality {
            vmaf: 93.0,
            min_rate_factor: None,
            max_rate_factor: None,
        }));
        let plain = spec(None);
        // Unknown leader result: unchanged.
        assert_eq!(leads.follower_spec(1, 0, &targeted), targeted);
        leads.record(0, &[kept(27.3), None]);
        assert_eq!((leads.waits_for(1), leads.waits_for(3)), (None, Some(2)));
        assert_eq!(leads.take_recorded(), vec![0]);
        assert_eq!(leads.take_recorded(), Vec::<u32>::new());
        let follower = leads.follower_spec(1, 0, &targeted);
        let t = follower.target.unwrap();
        assert_eq!(
            (t.min_rate_factor, t.max_rate_factor),
            (Some(25.8), Some(28.8))
        );
        assert_eq!(follower.rate, RateControl::Crf(27.3));
        // A rendition with no target, or whose leader kept nothing: unchanged; a leader too.
        assert_eq!(leads.follower_spec(1, 1, &plain), plain);
        assert_eq!(leads.follower_spec(1, 1, &targeted), targeted);
        assert_eq!(leads.follower_spec(0, 0, &targeted), targeted);
        // A leader with no account (an earlier run's record): its followers go unbounded.
        leads.record(2, &[]);
        assert_eq!(leads.waits_for(3), None);
        assert_eq!(leads.follower_spec(3, 0, &targeted), targeted);
        // Near a bound, the band stops at it.
        leads.record(0, &[kept(39.5)]);
        let t = leads.follower_spec(1, 0, &targeted).target.unwrap();
        assert_eq!(
            (t.min_rate_factor, t.max_rate_factor),
            (Some(38.0), Some(40.0))
        );
    }
}
