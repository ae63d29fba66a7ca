//! The checks after a chaos run: each job's end against S3 (outputs present, frame count,
//! every decoded frame, and a package's files, equal to the same job's from a run without
//! faults), the
//! dispatcher's log (duplicated deliveries) and the farm (queues and work area empty).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::frames::{differing_frames, try_frame_hashes, FrameHash};
use super::report::Report;
use super::shape::Shape;
use crate::farm::{Farm, TOKEN};
use crate::fixture::fixture;
use crate::playback::Summary;

/// What an output holds: its decoded frames (an error where they cannot be decoded) and,
/// for a package, the names of its files.
#[derive(Debug)]
pub struct Content {
    /// Every decoded frame, hashed; for a package, through its master playlist.
    pub frames: Result<Vec<FrameHash>, String>,
    /// The package's files, relative to its folder, sorted (empty for a file).
    pub names: Vec<String>,
    /// Each package file's size in bytes, by name: when frames differ, the files of
    /// another size than the reference's point at the culprit (a truncated copy, a file of
    /// another run).
    pub sizes: HashMap<String, u64>,
}

/// Reads output `key` (relative to the `output` bucket) back: a file is downloaded and
/// decoded; a package (a key ending in `/`) is downloaded whole and decoded through its
/// `master.m3u8`, as a player would.
pub fn content(farm: &Farm, key: &str) -> Content {
    let local = farm
        .dir
        .path()
        .join(key.trim_end_matches('/').replace('/', "_"));
    if !key.ends_with('/') {
        farm.download("output", key, &local);
        return Content {
            frames: try_frame_hashes(&local),
            names: Vec::new(),
            sizes: HashMap::new(),
        };
    }
    let (mut names, mut sizes) = (Vec::new(), HashMap::new());
    for full in farm.list("output", key) {
        let name = full.strip_prefix(key).unwrap_or(&full).to_string();
        let path = local.join(&name);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("package folder");
        farm.download("output", &full, &path);
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        sizes.insert(name.clone(), size);
        names.push(name);
    }
    names.sort();
    Content {
        frames: try_frame_hashes(&local.join("master.m3u8")),
        names,
        sizes,
    }
}

/// Submits the reference jobs: one job per shape in `shapes` with `submit`, once the faults
/// are over (the doors all open); (output prefix, job id, shape) of each.
pub fn submit_references(
    farm: &Farm,
    shapes: &[Shape],
    submit: impl Fn(&Farm, &str, Shape) -> String,
) -> Vec<(String, String, Shape)> {
    let by_name: std::collections::BTreeMap<String, Shape> =
        shapes.iter().map(|s| (s.name(), *s)).collect();
    by_name
        .iter()
        .map(|(name, shape)| {
            let prefix = format!("reference/{name}");
            (prefix.clone(), submit(farm, &prefix, *shape), *shape)
        })
        .collect()
}

/// The content of each output of the reference `jobs`, waited for. Panics if one fails or
/// cannot be decoded: without its reference no output can be judged.
pub fn reference_contents(
    farm: &Farm,
    jobs: &[(String, String, Shape)],
) -> HashMap<String, Content> {
    let mut contents = HashMap::new();
    for (prefix, id, shape) in jobs {
        let job = farm.wait_job(id, Duration::from_secs(600));
        assert_eq!(job["state"], "done", "reference job {prefix}: {job}");
        for key in shape.outputs(prefix) {
            let content = content(farm, &key);
            if let Err(e) = &content.frames {
                panic!("reference {key}: {e}");
            }
            contents.insert(key, content);
        }
    }
    contents
}

/// Each job's end against S3: a done job has every output, each with its source's frame
/// count, the reference's frames and (a package) the reference's files; a failed one has a
/// reason, no output, and is one of `may_fail` (the jobs a fault is meant to fail). Counts
/// into `report`.
pub fn check_jobs(
    farm: &Farm,
    (views, mixed): (&[Value], &[Shape]),
    may_fail: &[usize],
    references: &HashMap<String, Content>,
    report: &mut Report,
) {
    for (i, (job, shape)) in views.iter().zip(mixed).enumerate() {
        let keys = shape.outputs(&format!("chaos/{i}"));
        let present = keys
            .iter()
            .filter(|k| !farm.list("output", k).is_empty())
            .count();
        match job["state"].as_str() {
            Some("done") => {
                report.done += 1;
                if present != keys.len() {
                    report.lost += 1;
                    continue;
                }
                let source = Summary::of(&fixture(shape.fixture())).frame_count;
                let reference = shape.outputs(&format!("reference/{}", shape.name()));
                for (key, ref_key) in keys.iter().zip(&reference) {
                    let found = content(farm, key);
                    if let Some(wrong) = judge(&references[ref_key], &found, source, report) {
                        report.corrupt += 1;
                        report.corrupt_keys.push(format!("{key}: {wrong}"));
                    }
                }
            }
            Some("failed" | "cancelled") => {
                let meant = may_fail.contains(&i);
                if !meant {
                    report.failed_unexpectedly += 1;
                }
                if job["error"]["code"].as_str().is_some_and(|c| !c.is_empty()) {
                    report.failed_with_reason += 1;
                    let code = job["error"]["code"].as_str().unwrap_or_default();
                    let message = job["error"]["message"].as_str().unwrap_or_default();
                    let why = if meant {
                        ""
                    } else {
                        " (UNEXPECTED: no fault meant it)"
                    };
                    report
                        .failures
                        .push(format!("job {i}{why}: {code}: {message}"));
                }
                if present > 0 {
                    report.partial += 1;
                }
            }
            _ => report.hung += 1,
        }
    }
}

/// Frames differing per stream (`stream N: differing of frames`), for a report.
fn per_stream(reference: &[FrameHash], found: &[FrameHash]) -> String {
    let ids: std::collections::BTreeSet<u32> =
        reference.iter().chain(found).map(|f| f.stream).collect();
    let only = |h: &[FrameHash], id: u32| -> Vec<FrameHash> {
        h.iter().filter(|f| f.stream == id).cloned().collect()
    };
    ids.iter()
        .map(|&id| {
            let (r, f) = (only(reference, id), only(found, id));
            format!("stream {id}: {} of {}", differing_frames(&r, &f), f.len())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is wrong with `found` against its `reference` (None when nothing): frames that
/// differ (counted into `report`), a first video stream without the source's `frames`, or
/// a package's files missing or extra.
pub fn judge(
    reference: &Content,
    found: &Content,
    frames: u64,
    report: &mut Report,
) -> Option<String> {
    let hashes = match (&reference.frames, &found.frames) {
        (Ok(r), Ok(f)) => (r, f),
        (_, Err(e)) => return Some(format!("cannot be decoded: {e}")),
        (Err(e), _) => return Some(format!("its reference cannot be decoded: {e}")),
    };
    let differing = differing_frames(hashes.0, hashes.1);
    report.frames_differing += differing;
    let missing: Vec<&String> = (reference.names.iter())
        .filter(|n| !found.names.contains(n))
        .collect();
    let extra: Vec<&String> = (found.names.iter())
        .filter(|n| !reference.names.contains(n))
        .collect();
    let video = hashes.1.iter().filter(|f| f.stream == 0).count() as u64;
    if differing > 0 || video != frames || !missing.is_empty() || !extra.is_empty() {
        let resized: Vec<String> = (reference.sizes.iter())
            .filter_map(|(n, size)| {
                let got = found.sizes.get(n)?;
                (got != size).then(|| format!("{n}: {got} bytes, reference {size}"))
            })
            .collect();
        return Some(format!(
            "{differing} frames differ ({}), {video} video frames of {frames}, files missing \
             {missing:?}, files extra {extra:?}, files of another size {resized:?}",
            per_stream(hashes.0, hashes.1)
        ));
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::frames::parse_framemd5;

    fn package(names: &[&str], listing: &str) -> Content {
        Content {
            frames: Ok(parse_framemd5(listing)),
            names: names.iter().map(|n| n.to_string()).collect(),
            sizes: names.iter().map(|n| (n.to_string(), 10)).collect(),
        }
    }

    #[test]
    fn a_package_missing_a_file_or_with_a_foreign_frame_is_judged_wrong() {
        let listing = "0, 0, 0, 1, 9, aa\n0, 1, 1, 1, 9, bb\n1, 0, 0, 1, 9, cc\n";
        let reference = package(&["master.m3u8", "v0/seg-00000.ts"], listing);
        let mut report = Report::default();
        assert_eq!(judge(&reference, &reference, 2, &mut report), None);
        let short = package(&["master.m3u8"], listing);
        let wrong = judge(&reference, &short, 2, &mut report).expect("a file is missing");
        assert!(wrong.contains("v0/seg-00000.ts"), "{wrong}");
        let foreign = package(
            &["master.m3u8", "v0/seg-00000.ts"],
            "0, 0, 0, 1, 9, aa\n0, 1, 1, 1, 9, zz\n1, 0, 0, 1, 9, cc\n",
        );
        let mut truncated = foreign;
        truncated.sizes.insert("v0/seg-00000.ts".into(), 3);
        let wrong = judge(&reference, &truncated, 2, &mut report).expect("a frame differs");
        assert!(
            wrong.contains("stream 0: 1 of 2, stream 1: 0 of 1"),
            "{wrong}"
        );
        assert!(
            wrong.contains("v0/seg-00000.ts: 3 bytes, reference 10"),
            "{wrong}"
        );
        assert_eq!(report.frames_differing, 1);
        assert!(
            judge(&reference, &reference, 3, &mut report).is_some(),
            "3 source frames, 2 decoded"
        );
        let broken = Content {
            frames: Err("framemd5 of x: Invalid data".into()),
            names: reference.names.clone(),
            sizes: reference.sizes.clone(),
        };
        assert!(judge(&reference, &broken, 2, &mut report).is_some());
    }
}
