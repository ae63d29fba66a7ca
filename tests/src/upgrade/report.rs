//! What a rolling upgrade ends with: the figures per phase (how long, jobs submitted and
//! ended, what each switch cost), and the checks that no job was lost, failed, duplicated or
//! came out wrong.
//!
//! Why collected, not asserted one by one: a broken upgrade usually breaks several things at
//! once (a job failed, its outputs missing, a task dead-lettered); the report names them all.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::load::{api, Clip, Load};
use super::{Rolled, Upgrade};
use crate::docker_farm::exact::{audio_seconds, same_audio_duration, same_frames, video_pts};
use crate::docker_farm::{MEDIA_BUCKET, WORK_BUCKET};
use crate::probe::frame_count;

/// One phase of the upgrade and what happened in it.
#[derive(Debug, Clone)]
pub struct Phase {
    /// What runs: e.g. "new dispatcher, old workers".
    pub name: String,
    /// When it began (the switch into it included).
    pub started: Instant,
    /// How long it lasted (s); set when the next one begins.
    pub seconds: f64,
    /// Jobs unfinished when it began (in flight across the switch).
    pub in_flight_at_start: usize,
    /// Seconds the API was away while the dispatcher was replaced (None: not replaced).
    pub api_away_s: Option<f64>,
    /// Workers replaced in it, one at a time.
    pub rolled: Vec<Rolled>,
}

/// Prints the figures: per phase and in all.
pub fn print_figures(phases: &[Phase], load: &Load, total: Duration) {
    println!("[upgrade] figures");
    for (i, p) in phases.iter().enumerate() {
        let submitted = load.jobs.iter().filter(|j| j.phase_submitted == i).count();
        let (ended, done) = load.ended_in(i);
        let away = p.api_away_s.map_or(String::new(), |s| {
            format!(", dispatcher replaced: API away {s:.1} s")
        });
        println!(
            "[upgrade]   phase {i} ({}): {:.0} s, {} in flight at its start, {submitted} \
             submitted, {ended} ended ({done} done){away}",
            p.name, p.seconds, p.in_flight_at_start
        );
        for r in &p.rolled {
            println!(
                "[upgrade]     worker {} drained in {} s, exit {}",
                r.container, r.drain_s, r.exit_code
            );
        }
    }
    let done = load.jobs.iter().filter(|j| j.state == "done").count();
    let failed = load.jobs.iter().filter(|j| j.state == "failed").count();
    println!(
        "[upgrade] jobs {}, done {done}, failed {failed}, outputs {}, submit retries {}, \
         time {:.0} s",
        load.jobs.len(),
        2 * load.jobs.len(),
        load.submit_retries,
        total.as_secs_f64()
    );
}

/// Every check of the end state; the problems found (empty when all hold).
pub fn check_end(up: &Upgrade, load: &Load, clips: &[Clip], phases: &[Phase]) -> Vec<String> {
    let mut problems = Vec::new();
    for j in load.jobs.iter().filter(|j| j.state != "done") {
        problems.push(format!(
            "job {} ({:?}, clip {}) ended {}: {}",
            j.n,
            j.id,
            j.clip,
            j.state,
            j.error.as_deref().unwrap_or("-")
        ));
    }
    problems.extend(check_listing(up, load));
    problems.extend(check_outputs(up, load, clips));
    problems.extend(check_leftovers(up));
    for r in phases.iter().flat_map(|p| &p.rolled) {
        if r.exit_code != "0" {
            problems.push(format!(
                "worker {} exited {} after SIGTERM",
                r.container, r.exit_code
            ));
        }
    }
    let want_worker = format!("tessera/worker:{}", up.new);
    let workers = up.images("worker");
    if workers.is_empty() || workers.iter().any(|w| *w != want_worker) {
        problems.push(format!(
            "the workers at the end run {workers:?}, not only {want_worker}"
        ));
    }
    problems
}

/// The dispatcher lists exactly the jobs submitted (a lost or a second copy of one shows).
fn check_listing(up: &Upgrade, load: &Load) -> Vec<String> {
    let Some((200, list)) = api(&up.farm, "GET", "/v1/jobs?limit=500", None, None) else {
        return vec!["GET /v1/jobs did not answer 200".into()];
    };
    let listed: BTreeSet<String> = list["jobs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|j| j["id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let ours: BTreeSet<String> = load.jobs.iter().filter_map(|j| j.id.clone()).collect();
    if listed == ours {
        Vec::new()
    } else {
        vec![format!(
            "the dispatcher lists {} jobs, {} were submitted; only listed: {:?}; only \
             submitted: {:?}",
            listed.len(),
            ours.len(),
            listed.difference(&ours).collect::<Vec<_>>(),
            ours.difference(&listed).collect::<Vec<_>>()
        )]
    }
}

/// `outputs/` holds exactly two outputs per job, and each has its source's frames: the same
/// decoded count, each packet at its source frame's time, none twice, and the audio as long.
fn check_outputs(up: &Upgrade, load: &Load, clips: &[Clip]) -> Vec<String> {
    let mut problems = Vec::new();
    let want: BTreeSet<String> = load.jobs.iter().flat_map(|j| j.output_keys()).collect();
    let found: BTreeSet<String> = up.farm.keys(MEDIA_BUCKET, "outputs/").into_iter().collect();
    if want != found {
        problems.push(format!(
            "outputs/: missing {:?}, unexpected {:?}",
            want.difference(&found).collect::<Vec<_>>(),
            found.difference(&want).collect::<Vec<_>>()
        ));
    }
    let mut frames_checked = 0u64;
    for job in &load.jobs {
        let src = &clips[job.clip];
        let (src_pts, src_frames, src_audio) = (
            video_pts(&src.path),
            frame_count(&src.path),
            audio_seconds(&src.path),
        );
        for key in job.output_keys().iter().filter(|k| found.contains(*k)) {
            let out = up.farm.work.join(key.replace('/', "_"));
            if let Err(e) = up.farm.download(key, &out) {
                problems.push(format!("{key}: cannot be read back: {e}"));
                continue;
            }
            let frames = frame_count(&out);
            let checks = [
                same_frames(&src_pts, &video_pts(&out)),
                same_audio_duration(src_audio, audio_seconds(&out)),
                (frames == src_frames)
                    .then_some(())
                    .ok_or(format!("{frames} frames decoded, the source {src_frames}")),
            ];
            problems.extend(
                checks
                    .into_iter()
                    .filter_map(Result::err)
                    .map(|e| format!("{key}: {e}")),
            );
            frames_checked += frames;
            let _ = std::fs::remove_file(&out);
        }
    }
    println!(
        "[upgrade] outputs checked: {} files, {frames_checked} frames decoded",
        found.len()
    );
    problems
}

/// The work area empties (within a minute: only the `ended/` markers stay) and no task or
/// event is left in a queue; dead-lettered messages are named.
fn check_leftovers(up: &Upgrade) -> Vec<String> {
    let mut problems = Vec::new();
    let mut left = Vec::new();
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        left = up.farm.keys(WORK_BUCKET, "jobs/");
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    if !left.is_empty() {
        problems.push(format!(
            "the work area still holds {} objects: {:?}",
            left.len(),
            &left[..left.len().min(8)]
        ));
    }
    let depths = up.queue_depths();
    println!("[upgrade] queues at the end: {depths:?}");
    // Status reports are not work: an old dispatcher does not read them, and they expire.
    let reports = tessera_model::wire::QUEUE_STATUS;
    for (name, n) in depths.iter().filter(|(q, n)| *n > 0 && q != reports) {
        problems.push(format!("{n} message(s) left in {name}"));
    }
    problems
}
