//! Readable views of the API's job JSON: one job as lines, jobs as a table, live progress.
//!
//! Why apart from `progress`: the local farm's display counts frames it sees being encoded;
//! the API reports a job's state and segments, so a remote job is shown by segments.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

/// Whether the job has ended (done, failed or cancelled).
pub fn is_final(job: &Value) -> bool {
    matches!(job["state"].as_str(), Some("done" | "failed" | "cancelled"))
}

/// The job's output URI, once the server reports one.
pub fn output_of(job: &Value) -> Option<String> {
    job["outputs"][0].as_str().map(str::to_string)
}

/// An `s3://` location given as a string or as `{"bucket", "key"}`.
fn uri(v: &Value) -> String {
    match (v.as_str(), v["bucket"].as_str(), v["key"].as_str()) {
        (Some(s), _, _) => s.to_string(),
        (None, Some(b), Some(k)) => format!("s3://{b}/{k}"),
        _ => "-".to_string(),
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ts: i64) -> String {
    format!("{} UTC", tessera_model::civil::utc_datetime(ts))
}

/// `done/total segments (percent%)`.
fn progress(job: &Value) -> String {
    format!(
        "{}/{} segments ({}%)",
        job["segments_done"].as_u64().unwrap_or(0),
        job["segments_total"].as_u64().unwrap_or(0),
        job["percent"].as_f64().unwrap_or(0.0)
    )
}

/// One output's target search in a line: the VMAF aimed at, the range of rate factors its
/// segments kept, and how far the searched VMAF fell from the measured one.
fn target_line(t: &Value) -> Option<String> {
    let segments: Vec<&Value> = t["segments"]
        .as_array()?
        .iter()
        .filter(|s| !s.is_null())
        .collect();
    let aim = segments.first()?["target"].as_f64()?;
    let rf: Vec<f64> = segments
        .iter()
        .filter_map(|s| s["rate_factor"].as_f64())
        .collect();
    let (lo, hi) = rf
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
    let mut line = format!(
        "VMAF {aim}: rate factor {lo}-{hi} over {} segments",
        segments.len()
    );
    if let Some(e) = t["vmaf_error"].as_f64() {
        line.push_str(&format!(", searched within {e:.2} of measured"));
    }
    Some(line)
}

/// One job as `name: value` lines (what `tessera status` prints).
pub fn describe(job: &Value) -> String {
    let mut lines = vec![
        ("job", job["id"].as_str().unwrap_or("-").to_string()),
        ("state", job["state"].as_str().unwrap_or("-").to_string()),
        ("progress", progress(job)),
        ("input", uri(&job["input"])),
        ("output", output_of(job).unwrap_or_else(|| "-".into())),
    ];
    if let Some(fps) = job["encode_fps"].as_f64() {
        lines.push(("speed", format!("{fps:.1} fps")));
    }
    if let Some(db) = job["psnr"].as_f64() {
        lines.push(("psnr", format!("{db:.2} dB")));
    }
    if let Some(vmaf) = job["vmaf"].as_f64() {
        lines.push(("vmaf", format!("{vmaf:.2}")));
    }
    for t in job["targets"].as_array().into_iter().flatten() {
        lines.extend(target_line(t).map(|l| ("target", l)));
    }
    for (name, field) in [("created", "created_at"), ("updated", "updated_at")] {
        if let Some(t) = job["timings"][field].as_i64() {
            lines.push((name, utc(t)));
        }
    }
    if let Some(w) = job["timings"]["wall_s"].as_f64() {
        lines.push(("wall", format!("{w:.1} s")));
    }
    if let Some(code) = job["error"]["code"].as_str() {
        let message = job["error"]["message"].as_str().unwrap_or("");
        lines.push(("error", format!("{code}: {message}")));
    }
    lines
        .into_iter()
        .map(|(name, value)| format!("{:<9} {value}\n", format!("{name}:")))
        .collect()
}

/// Jobs as a table with a header line (what `tessera list` prints); "no jobs" when empty.
pub fn table(jobs: &[Value]) -> String {
    if jobs.is_empty() {
        return "no jobs\n".to_string();
    }
    let mut out = format!(
        "{:<32}  {:<9}  {:>8}  {:>6}  OUTPUT\n",
        "ID", "STATE", "SEGMENTS", "DONE"
    );
    for job in jobs {
        let segments = format!(
            "{}/{}",
            job["segments_done"].as_u64().unwrap_or(0),
            job["segments_total"].as_u64().unwrap_or(0)
        );
        out.push_str(&format!(
            "{:<32}  {:<9}  {segments:>8}  {:>5}%  {}\n",
            job["id"].as_str().unwrap_or("-"),
            job["state"].as_str().unwrap_or("-"),
            job["percent"].as_f64().unwrap_or(0.0),
            output_of(job).unwrap_or_else(|| "-".into())
        ));
    }
    out
}

/// Live progress of one remote job on stderr: a bar on a terminal, else a plain line each
/// time the state or the segment count changes.
pub struct JobDisplay {
    id: String,
    bar: Option<ProgressBar>,
    last: String,
}

impl JobDisplay {
    /// A display for job `id`; `terminal` picks the bar.
    pub fn new(id: &str, terminal: bool) -> Self {
        let bar = terminal.then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} segments {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        JobDisplay {
            id: id.to_string(),
            bar,
            last: String::new(),
        }
    }

    /// Shows the job's latest view.
    pub fn update(&mut self, job: &Value) {
        let state = job["state"].as_str().unwrap_or("-");
        if let Some(bar) = &self.bar {
            bar.set_length(job["segments_total"].as_u64().unwrap_or(0));
            bar.set_position(job["segments_done"].as_u64().unwrap_or(0));
            bar.set_message(state.to_string());
            bar.tick();
            return;
        }
        let line = format!("job {}: {state}, {}", self.id, progress(job));
        if line != self.last {
            eprintln!("{line}");
            self.last = line;
        }
    }

    /// Leaves the bar's last state on screen.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn views() {
        let job = json!({"id": "j1", "state": "failed", "segments_total": 4, "segments_done": 1,
            "percent": 25.0, "input": {"bucket": "in", "key": "a.mp4"}, "outputs": [null],
            "timings": {"created_at": 0, "updated_at": 60, "wall_s": null},
            "error": {"code": "input_invalid", "message": "in: not a video"}});
        let text = describe(&job);
        assert!(text.contains("state:    failed\n"), "{text}");
        assert!(text.contains("input:    s3://in/a.mp4\n"), "{text}");
        assert!(text.contains("1/4 segments (25%)"), "{text}");
        assert!(
            text.contains("error:    input_invalid: in: not a video\n"),
            "{text}"
        );
        assert!(text.contains("updated:  1970-01-01 00:01:00 UTC"), "{text}");
        assert!(is_final(&job) && output_of(&job).is_none());
        let searched = json!({"id": "j2", "state": "done", "targets": [{"destination": "s3://o/a.mp4",
            "vmaf_error": 0.085, "segments": [{"target": 90.0, "rate_factor": 31.5, "vmaf": 90.4},
            null, {"target": 90.0, "rate_factor": 22.0, "vmaf": 89.9}]}]});
        let text = describe(&searched);
        assert!(
            text.contains("target:   VMAF 90: rate factor 22-31.5 over 2 segments, searched within 0.09 of measured\n"),
            "{text}"
        );
        let rows = table(&[job]);
        assert!(
            rows.starts_with("ID ") && rows.lines().count() == 2,
            "{rows}"
        );
        assert_eq!(table(&[]), "no jobs\n");
    }
}
