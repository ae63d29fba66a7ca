//! Which stitched object each output is: the first result of its stitch, stored under a key
//! of that attempt's own (keys::attempt), is the one measured, packaged and delivered.
//!
//! Why apart: the same stitch task can run twice (delivered twice, republished after a
//! lapse); the rule that the first checked result stands, and that a key an event names is
//! followed only inside its output's own, is pure and tested here.

use tessera_model::wire::{keys, StitchTask};

/// What the stitches of a job's outputs cost, for its report.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stitched {
    /// The largest peak RSS of the stitch children.
    pub(crate) peak_rss_bytes: u64,
    /// Seconds the QC gate took, summed over outputs.
    pub(crate) check_seconds: f64,
    /// The ETag of the object each output's stitch stored after its QC gate passed, by
    /// output index (`None`: unknown, an older worker's or a store without tags): the
    /// delivery copies exactly that object (review N6).
    pub(crate) etags: Vec<Option<String>>,
    /// The key each output's stitch stored it under, by output index (`None`: the task's
    /// `result_key`, an older worker's). Why: each attempt stores under its own key, and the
    /// first result to arrive is the one delivered (keys::attempt).
    pub(crate) keys: Vec<Option<String>>,
}

impl Stitched {
    /// Keeps output `index`'s first result: its ETag and stored key.
    pub(crate) fn record(
        &mut self,
        outputs: usize,
        index: usize,
        etag: Option<String>,
        key: Option<String>,
    ) {
        self.etags.resize(outputs, None);
        self.keys.resize(outputs, None);
        self.etags[index] = etag;
        self.keys[index] = key;
    }
}

/// `tasks` with each `result_key` replaced by the key its stitch stored the output under:
/// what the quality report, the package and the delivery read. A key that is not an attempt
/// of its task's `result_key` (a forged or garbled event) is not followed: the task's own
/// key stays, and its ETag pin then refuses whatever lies there.
pub(crate) fn at_stored_keys(tasks: &[StitchTask], keys: &[Option<String>]) -> Vec<StitchTask> {
    let mut tasks = tasks.to_vec();
    for (task, key) in tasks.iter_mut().zip(keys) {
        match key {
            Some(key) if keys::is_attempt_of(key, &task.result_key) => {
                task.result_key = key.clone()
            }
            Some(key) => tracing::warn!(job = %task.job_id, output = task.output, key,
                "a stitch reported a key outside its output's; not followed"),
            None => {}
        }
    }
    tasks
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::wire::keys::output;

    fn task(i: u32) -> StitchTask {
        let rate = |num, den| tessera_model::probe::Rational { num, den };
        StitchTask {
            v: tessera_model::wire::WIRE_VERSION,
            job_id: "j".into(),
            plan: 1,
            output: i,
            segment_keys: Vec::new(),
            audio_key: None,
            audio_tracks: Vec::new(),
            video_bias: 0,
            video_time_base: rate(1, 25),
            start_seconds: 0.0,
            display_matrix: None,
            frame_rate: rate(25, 1),
            container: tessera_model::encode::Container::Mkv,
            result_key: output("j", 1, i, "mkv"),
            expected_frames: 1,
            chapters: Vec::new(),
            title: None,
            subtitles: Vec::new(),
            expect: None,
            heartbeats: true,
            attempt_keys: true,
        }
    }

    #[test]
    fn outputs_are_read_where_their_stitch_stored_them_and_nowhere_else() {
        let tasks = [task(0), task(1), task(2)];
        let mut stitched = Stitched::default();
        let first = keys::attempt(&tasks[0].result_key, "aa01");
        stitched.record(3, 0, Some("e0".into()), Some(first.clone()));
        // Output 1: a key of another output's; output 2: an older worker's, no key.
        let foreign = keys::attempt(&tasks[0].result_key, "bb02");
        stitched.record(3, 1, Some("e1".into()), Some(foreign));
        stitched.record(3, 2, Some("e2".into()), None);
        let read = at_stored_keys(&tasks, &stitched.keys);
        assert_eq!(read[0].result_key, first);
        assert_eq!(read[1].result_key, tasks[1].result_key);
        assert_eq!(read[2].result_key, tasks[2].result_key);
        assert_eq!(
            stitched.etags,
            [Some("e0".into()), Some("e1".into()), Some("e2".into())]
        );
    }
}
