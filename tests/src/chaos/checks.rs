//! The checks after a chaos run: each job's end against S3 (outputs present, frame count,
//! every decoded frame equal to the same job's output from a run without faults), the
//! dispatcher's log (duplicated deliveries) and the farm (queues and work area empty).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::frames::{differing_frames, frame_hashes, FrameHash};
use super::report::Report;
use crate::farm::{Farm, TOKEN};
use crate::fixture::{fixture, Fixture};
use crate::playback::Summary;

/// The outputs of a job (relative to the `output` bucket), as `submit` names them.
pub fn outputs(prefix: &str) -> [String; 2] {
    [format!("{prefix}/a.mp4"), format!("{prefix}/b.mkv")]
}

/// Submits the reference jobs: one job per kind in `kinds` with `submit`, once the faults
/// are over (the doors all open); (output prefix, job id) of each.
pub fn submit_references(
    farm: &Farm,
    kinds: &[Fixture],
    submit: impl Fn(&Farm, &str, Fixture) -> String,
) -> Vec<(String, String)> {
    let by_name: std::collections::BTreeMap<String, Fixture> =
        kinds.iter().map(|k| (format!("{k:?}"), *k)).collect();
    by_name
        .iter()
        .map(|(name, kind)| {
            let prefix = format!("reference/{name}");
            (prefix.clone(), submit(farm, &prefix, *kind))
        })
        .collect()
}

/// The frame hashes of each output of the reference `jobs`, waited for. Panics if one
/// fails: without its reference no output can be judged.
pub fn reference_hashes(farm: &Farm, jobs: &[(String, String)]) -> HashMap<String, Vec<FrameHash>> {
    let mut hashes = HashMap::new();
    for (prefix, id) in jobs {
        let job = farm.wait_job(id, Duration::from_secs(600));
        assert_eq!(job["state"], "done", "reference job {prefix}: {job}");
        for key in outputs(prefix) {
            let local = farm.dir.path().join(key.replace('/', "_"));
            farm.download("output", &key, &local);
            hashes.insert(key, frame_hashes(&local));
        }
    }
    hashes
}

/// Each job's end against S3: a done job has both outputs, each with its source's frame
/// count and the reference's frames; a failed one has a reason and no output. Counts into
/// `report`.
pub fn check_jobs(
    farm: &Farm,
    views: &[Value],
    mixed: &[Fixture],
    references: &HashMap<String, Vec<FrameHash>>,
    report: &mut Report,
) {
    for (i, (job, kind)) in views.iter().zip(mixed).enumerate() {
        let keys = outputs(&format!("chaos/{i}"));
        let present: Vec<&String> = keys
            .iter()
            .filter(|k| !farm.list("output", k).is_empty())
            .collect();
        match job["state"].as_str() {
            Some("done") => {
                report.done += 1;
                if present.len() != keys.len() {
                    report.lost += 1;
                    continue;
                }
                let source = Summary::of(&fixture(*kind)).frame_count;
                let reference = outputs(&format!("reference/{kind:?}"));
                for (key, ref_key) in keys.iter().zip(&reference) {
                    let local = farm.dir.path().join(key.replace('/', "_"));
                    farm.download("output", key, &local);
                    let differing = differing_frames(&references[ref_key], &frame_hashes(&local));
                    report.frames_differing += differing;
                    if Summary::of(&local).frame_count != source || differing > 0 {
                        report.corrupt += 1;
                        report
                            .corrupt_keys
                            .push(format!("{key}: {differing} frames differ"));
                    }
                }
            }
            Some("failed" | "cancelled") => {
                if job["error"]["code"].as_str().is_some_and(|c| !c.is_empty()) {
                    report.failed_with_reason += 1;
                    let code = job["error"]["code"].as_str().unwrap_or_default();
                    let message = job["error"]["message"].as_str().unwrap_or_default();
                    report.failures.push(format!("job {i}: {code}: {message}"));
                }
                if !present.is_empty() {
                    report.partial += 1;
                }
            }
            _ => report.hung += 1,
        }
    }
}

/// All jobs' views (the API may be restarting: an unanswered GET is a Null view).
pub fn jobs_view(farm: &Farm, ids: &[String]) -> Vec<Value> {
    ids.iter()
        .map(|id| {
            farm.http("GET", &format!("/v1/jobs/{id}"), Some(TOKEN), None)
                .1
        })
        .collect()
}

/// The farm is left clean: queues drained, work area empty (cleanup is asynchronous).
/// Workers stop a dead job's tasks within seconds; the dispatcher sweeps an ended job's
/// work area again a minute after its end. Waits up to 2 minutes; counts into `report`.
pub fn check_clean(farm: &Farm, report: &mut Report) {
    let clean_by = Instant::now() + Duration::from_secs(120);
    loop {
        report.queued_left = ["tessera.encode.cpu", "tessera.stitch", "tessera.events"]
            .iter()
            .flat_map(|q| [q.to_string(), format!("{q}.dead")])
            .map(|q| farm.vhost.ready(&q))
            .sum();
        let left = farm.list("work", "jobs/");
        report.work_left = left.len();
        report.work_left_keys = left.into_iter().take(5).collect();
        if (report.queued_left == 0 && report.work_left == 0) || Instant::now() > clean_by {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Destinations the log shows delivered more than once ("output delivered" lines).
pub fn duplicated_deliveries(log: &str) -> usize {
    let mut seen = HashMap::<&str, usize>::new();
    for line in log.lines().filter(|l| l.contains("output delivered")) {
        if let Some(dest) = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("destination="))
        {
            *seen.entry(dest).or_default() += 1;
        }
    }
    seen.values().filter(|n| **n > 1).count()
}
