//! A finished job's quality segment by segment: for each output that was measured or searched
//! a target (and each package rung that searched), one row per segment with its VMAF in the stitched output (mean and worst frame)
//! and, for a target, the rate factor its search kept, the VMAF the search scored and the
//! probes it ran.
//!
//! Why on the job page: "which scene looks worst, and what did the search do there?" is read
//! beside the segment timeline, without fetching the report.

use maud::{html, Markup};
use serde_json::Value;

/// The tables of `report` (a finished job's report), or nothing when no output has a
/// per-segment VMAF or a target search. A package's rungs that searched get one each.
pub fn segment_quality(report: &Value) -> Markup {
    let outputs = report["outputs"].as_array().cloned().unwrap_or_default();
    html! {
        @for o in &outputs {
            @let title = o["destination"].as_str().unwrap_or("-").to_string();
            (table(&title, o, &o["target"]))
            @for r in o["rungs"].as_array().into_iter().flatten() {
                @let rung = format!("{title} ({})", r["rendition"].as_str().unwrap_or("-"));
                (table(&rung, &Value::Null, &r["target"]))
            }
        }
    }
}

/// One table: `output`'s measured segments (none for a rung) beside the `searched` ones.
fn table(title: &str, output: &Value, searched: &Value) -> Markup {
    let measured = output["quality"]["vmaf"]["segments"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let searched = searched.as_array().cloned().unwrap_or_default();
    html! {
        @if !measured.is_empty() || searched.iter().any(|s| !s.is_null()) {
            h2 { "Quality by segment: " (title) }
            table.segment-quality {
                thead { tr {
                    th { "Segment" } th { "VMAF" } th { "Worst frame" }
                    th { "Rate factor" } th { "Searched VMAF" } th { "Probes (rate factor: VMAF)" }
                } }
                tbody {
                    @for i in 0..measured.len().max(searched.len()) {
                        @let m = measured.get(i).cloned().unwrap_or(Value::Null);
                        @let s = searched.get(i).cloned().unwrap_or(Value::Null);
                        tr {
                            td { (i) }
                            td { (fixed(&m["mean"])) }
                            td { (fixed(&m["min"])) }
                            td { (plain(&s["rate_factor"])) }
                            td { (fixed(&s["vmaf"])) }
                            td { (probes(&s["probes"])) }
                        }
                    }
                }
            }
            @if let Some(e) = output["target_vmaf_error"].as_f64() {
                p { "Searched and measured VMAF at most " (format!("{e:.2}")) " apart." }
            }
        }
    }
}

/// A number to two places, or a dash.
fn fixed(v: &Value) -> String {
    v.as_f64().map_or_else(|| "-".into(), |f| format!("{f:.2}"))
}

/// A number as written, or a dash.
fn plain(v: &Value) -> String {
    v.as_f64().map_or_else(|| "-".into(), |f| format!("{f}"))
}

/// `rate factor: VMAF` of each probe, in the order they ran.
fn probes(v: &Value) -> String {
    let list: Vec<String> = (v.as_array().into_iter().flatten())
        .map(|p| format!("{}: {}", plain(&p["rate_factor"]), fixed(&p["vmaf"])))
        .collect();
    if list.is_empty() {
        "-".into()
    } else {
        list.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::segment_quality;
    use serde_json::json;

    #[test]
    fn each_segment_shows_its_vmaf_and_its_search() {
        let report = json!({"outputs": [{"destination": "s3://out/a.mp4",
            "quality": {"vmaf": {"segments": [{"mean": 91.234, "min": 80.5}, {"mean": 90.1, "min": 85.0}]}},
            "target": [{"rate_factor": 27.5, "vmaf": 91.3, "probes": [{"rate_factor": 23.0, "vmaf": 96.4}, {"rate_factor": 27.5, "vmaf": 91.3}]}, null],
            "target_vmaf_error": 0.085}, {"destination": "s3://out/plain.mp4"}]});
        let html = segment_quality(&report).into_string();
        assert!(
            html.contains("Quality by segment: s3://out/a.mp4"),
            "{html}"
        );
        assert!(html.contains("<td>91.23</td><td>80.50</td><td>27.5</td><td>91.30</td><td>23: 96.40, 27.5: 91.30</td>"), "{html}");
        assert!(
            html.contains("<td>1</td><td>90.10</td><td>85.00</td><td>-</td><td>-</td><td>-</td>"),
            "{html}"
        );
        assert!(html.contains("at most 0.09 apart"), "{html}");
        assert!(
            !html.contains("plain.mp4"),
            "an output without figures has no table: {html}"
        );
        assert!(segment_quality(&json!({})).into_string().is_empty());
        // A package's rung that searched gets its own table; one that did not, none.
        let report = json!({"outputs": [{"destination": "s3://out/pkg/", "rungs": [
            {"rendition": "v0", "target": [{"rate_factor": 24.5, "vmaf": 93.1, "probes": [{"rate_factor": 24.5, "vmaf": 93.1}]}]},
            {"rendition": "v1", "target": [null]}]}]});
        let html = segment_quality(&report).into_string();
        assert!(
            html.contains("Quality by segment: s3://out/pkg/ (v0)"),
            "{html}"
        );
        assert!(
            html.contains("<td>0</td><td>-</td><td>-</td><td>24.5</td><td>93.10</td>"),
            "{html}"
        );
        assert!(!html.contains("(v1)"), "{html}");
    }
}
