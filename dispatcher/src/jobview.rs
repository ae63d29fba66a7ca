//! What a client sees of a job: the API's view of a job row (state, progress, outputs,
//! report fields), and which jobs a caller may see at all.
//!
//! Why a file of its own: the API answers it and the runner posts the same view to a job's
//! webhook; neither should import the other for it.

use serde_json::json;

use crate::auth::Principal;
use crate::db::{JobRow, JobState};

/// The API view of a job row.
pub fn view(row: &JobRow) -> serde_json::Value {
    let percent = if row.state == JobState::Done {
        100.0
    } else if row.segments_total > 0 {
        (f64::from(row.segments_done) * 100.0 / f64::from(row.segments_total) * 10.0).round() / 10.0
    } else {
        0.0
    };
    let report = row.report.clone().unwrap_or(serde_json::Value::Null);
    json!({
        "id": row.id,
        "state": row.state,
        "segments_total": row.segments_total,
        "segments_done": row.segments_done,
        "percent": percent,
        "input": row.request.get("input"),
        "outputs": outputs(row, &report),
        "priority": row.request.get("priority"),
        "hardware": row.request.get("hardware"),
        "encode_fps": report.get("encode_fps"),
        "frames": report.get("frames"),
        "median_segment_overhead_s": report.get("median_segment_overhead_s"),
        "psnr": report.get("quality").and_then(|q| q.get("psnr")),
        "vmaf": report.pointer("/quality/vmaf/pooled/mean"),
        "targets": targets(&report),
        "warnings": report.get("warnings").cloned().unwrap_or_else(|| json!([])),
        "timings": {"created_at": row.created_at, "updated_at": row.updated_at, "wall_s": report.get("wall_s")},
        "error": row.error_code.as_ref().map(|c| json!({"code": c, "message": row.error_message})),
    })
}

/// The target-quality account of each output that searched: its destination, per segment
/// the search (rate factor kept, its VMAF, the probes), and the largest gap between a
/// segment's searched VMAF and the one measured after the stitch (when quality was asked).
/// A package's searched rungs come as their own entries, with the rung's `rendition`.
fn targets(report: &serde_json::Value) -> serde_json::Value {
    let list = report.get("outputs").and_then(|o| o.as_array());
    let searched = |o: &&serde_json::Value| {
        (o.get("target").and_then(|t| t.as_array())).is_some_and(|t| t.iter().any(|s| !s.is_null()))
    };
    let files = (list.into_iter().flatten().filter(searched)).map(|o| {
        json!({"destination": o.get("destination"), "segments": o.get("target"),
            "vmaf_error": o.get("target_vmaf_error")})
    });
    let rungs = list.into_iter().flatten().flat_map(|o| {
        let rungs = o
            .get("rungs")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten();
        rungs.filter(searched).map(|r| {
            json!({"destination": o.get("destination"), "rendition": r.get("rendition"),
                "segments": r.get("target")})
        })
    });
    files.chain(rungs).collect::<Vec<_>>().into()
}

/// The output URIs of a job: what was delivered when done, else what was asked for.
fn outputs(row: &JobRow, report: &serde_json::Value) -> serde_json::Value {
    let field = |list: Option<&serde_json::Value>, name: &str| -> Vec<serde_json::Value> {
        list.and_then(|l| l.as_array())
            .map(|l| l.iter().filter_map(|o| o.get(name).cloned()).collect())
            .unwrap_or_default()
    };
    let delivered = field(report.get("outputs"), "destination");
    if delivered.is_empty() {
        let asked = field(row.request.get("outputs"), "destination");
        // Requested destinations are stored as {bucket, key}.
        let uris = asked.iter().filter_map(|d| {
            Some(format!(
                "s3://{}/{}",
                d.get("bucket")?.as_str()?,
                d.get("key")?.as_str()?
            ))
        });
        // A package is stored as {spec, bucket, prefix}.
        let package = row.request.get("package").and_then(|p| {
            Some(format!(
                "s3://{}/{}",
                p.get("bucket")?.as_str()?,
                p.get("prefix")?.as_str()?
            ))
        });
        serde_json::Value::from(uris.chain(package).collect::<Vec<_>>())
    } else {
        serde_json::Value::from(delivered)
    }
}

/// A job `who` may see: another tenant's job is answered as missing, not as forbidden, so
/// its existence does not leak.
pub fn visible(row: Option<JobRow>, who: &Principal) -> Option<JobRow> {
    row.filter(|r| who.sees(&r.owner))
}

#[cfg(test)]
mod tests {
    use super::targets;
    use serde_json::json;

    #[test]
    fn files_and_package_rungs_that_searched_are_listed() {
        let search = json!({"target": 93.0, "rate_factor": 24.5, "vmaf": 93.2, "probes": []});
        let report = json!({"outputs": [
            {"destination": "s3://o/a.mp4", "target": [search, null], "target_vmaf_error": 0.2},
            {"destination": "s3://o/b.mp4", "target": [null, null]},
            {"destination": "s3://o/pkg/", "rungs": [
                {"rendition": "v0", "target": [search]},
                {"rendition": "v1", "target": [null]}]}]});
        let listed = targets(&report);
        let listed = listed.as_array().unwrap();
        assert_eq!(listed.len(), 2, "{listed:?}");
        assert_eq!(listed[0]["destination"], "s3://o/a.mp4");
        assert_eq!(listed[0]["vmaf_error"], 0.2);
        assert_eq!(listed[1]["destination"], "s3://o/pkg/");
        assert_eq!(listed[1]["rendition"], "v0");
        assert_eq!(listed[1]["segments"][0]["rate_factor"], 24.5);
        // No search anywhere: an empty list.
        assert_eq!(targets(&json!({"outputs": []})), json!([]));
    }
}
