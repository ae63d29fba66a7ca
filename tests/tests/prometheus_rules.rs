//! The monitoring that ships with tessera: the Prometheus alerting rules pass `promtool check
//! rules` and their unit tests (`promtool test rules`: each alert firing and staying quiet),
//! the Prometheus Operator's copy of them says the same, every metric the rules and the Grafana
//! dashboard query is one the product exports (a renamed metric fails here, not in an
//! operator's silent alert), and the dashboard is Grafana JSON of the expected shape.
//!
//! Needs `promtool` (Debian's `prometheus` package, installed by scripts/setup-deps.sh).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tessera_tests::run::run_command;

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `promtool` on PATH; a clear failure where it is missing (CI installs it).
fn promtool() -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("promtool"))
            .find(|p| p.is_file())
    });
    found.expect(
        "promtool not found on PATH: install Debian's prometheus package \
         (scripts/setup-deps.sh does; apt-get install prometheus)",
    )
}

#[test]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    let promtool = promtool();
    let rules = root().join("deploy/prometheus/tessera-rules.yaml");
    let tests = root().join("deploy/prometheus/tessera-rules.test.yaml");
    let limit = Duration::from_secs(120);
    let check = run_command(
        &promtool,
        ["check".as_ref(), "rules".as_ref(), rules.as_os_str()],
        limit,
    );
    check.assert_success();
    assert!(
        check.stdout.contains("SUCCESS: 6 rules found"),
        "{}",
        check.describe()
    );
    let test = run_command(
        &promtool,
        ["test".as_ref(), "rules".as_ref(), tests.as_os_str()],
        limit,
    );
    test.assert_success();
    // Every alert of the rules file has a unit test that shows it firing and one that shows
    // it quiet (an empty exp_alerts).
    let test_text = read("deploy/prometheus/tessera-rules.test.yaml");
    for alert in alert_names(&read("deploy/prometheus/tessera-rules.yaml")) {
        let at = format!("alertname: {alert}\n");
        let cases: Vec<&str> = test_text
            .split("      - eval_time:")
            .filter(|c| c.contains(&at))
            .collect();
        assert!(
            cases.iter().any(|c| c.contains("exp_alerts: []")),
            "{alert}: no test where it stays quiet"
        );
        assert!(
            cases.iter().any(|c| c.contains("- exp_labels:")),
            "{alert}: no test where it fires"
        );
    }
}

/// The `alert:` names of a rules file.
fn alert_names(rules: &str) -> Vec<String> {
    rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(|a| a.trim().to_string())
        .collect()
}

#[test]
fn the_prometheus_operator_rule_holds_the_rules_file() {
    let rules = read("deploy/prometheus/tessera-rules.yaml");
    let groups = &rules[rules.find("\ngroups:").expect("a groups key") + 1..];
    let indented: String = groups
        .lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("  {l}\n")
            }
        })
        .collect();
    let wrapper = read("deploy/k8s/components/monitoring/prometheusrule.yaml");
    assert!(wrapper.contains("kind: PrometheusRule\n"));
    let spec = &wrapper[wrapper.find("\nspec:\n").expect("a spec") + "\nspec:\n".len()..];
    assert!(
        spec == indented,
        "prometheusrule.yaml's spec differs from tessera-rules.yaml's groups: copy them over"
    );
    let kustomization = read("deploy/k8s/components/monitoring/kustomization.yaml");
    assert!(
        kustomization.contains("- prometheusrule.yaml"),
        "{kustomization}"
    );
}

/// The `tessera_*` metric names in `text`, a histogram's series under its family's name.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("tessera_") {
        let start = i + at;
        let preceded = start > 0 && is_name_byte(bytes[start - 1]);
        let mut end = start;
        while end < bytes.len() && is_name_byte(bytes[end]) {
            end += 1;
        }
        if !preceded {
            let name = &text[start..end];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name);
            names.insert(family.to_string());
        }
        i = end;
    }
    names
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The product's Rust sources, without tests (the code before a `#[cfg(test)]`, and no
/// `tests` module file): where a metric must be named to be exported.
fn product_source() -> String {
    let mut text = String::new();
    for dir in [
        "dispatcher/src",
        "worker/src",
        "farm/src",
        "engine/src",
        "gpu/src",
    ] {
        collect_source(&root().join(dir), &mut text);
    }
    assert!(text.len() > 100_000, "product sources not found");
    text
}

fn collect_source(dir: &Path, out: &mut String) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "tests" {
                collect_source(&path, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push_str(text.split("#[cfg(test)]").next().unwrap_or(""));
            out.push('\n');
        }
    }
}

/// Whether `source` names the metric `name` exactly (not as the prefix of a longer name).
fn exports(source: &str, name: &str) -> bool {
    source.match_indices(name).any(|(at, _)| {
        let next = source.as_bytes().get(at + name.len()).copied();
        let prev = at.checked_sub(1).map(|p| source.as_bytes()[p]);
        !next.is_some_and(is_name_byte) && !prev.is_some_and(is_name_byte)
    })
}

/// Every expression of the dashboard's panels.
fn dashboard_exprs(dashboard: &Value) -> Vec<String> {
    let panels = dashboard["panels"].as_array().expect("panels");
    panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("a target's expr").to_string())
        .collect()
}

#[test]
fn every_metric_the_rules_and_the_dashboard_query_is_exported() {
    let source = product_source();
    let dashboard: Value = serde_json::from_str(&read("deploy/grafana/tessera.json")).unwrap();
    let rules = read("deploy/prometheus/tessera-rules.yaml");
    let exprs: String = rules
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .chain(dashboard_exprs(&dashboard).iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let names = metric_names(&exprs);
    assert!(names.len() >= 15, "too few metrics found: {names:?}");
    let missing: Vec<&String> = names.iter().filter(|n| !exports(&source, n)).collect();
    assert!(
        missing.is_empty(),
        "queried but not exported by the product: {missing:?}"
    );
    // The check itself can fail: a name the product does not export is caught.
    assert!(!exports(&source, "tessera_jobs_renamed_total"));
    assert!(!exports(&source, "tessera_job"), "a prefix is not a metric");
}

#[test]
fn the_dashboard_is_grafana_json_with_the_expected_panels() {
    let dashboard: Value = serde_json::from_str(&read("deploy/grafana/tessera.json")).unwrap();
    assert_eq!(dashboard["uid"], "tessera-farm");
    assert!(dashboard["schemaVersion"].as_u64().unwrap() >= 36);
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    assert!(
        variables.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus data source variable"
    );
    let panels = dashboard["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().expect("a title");
        assert!(
            ids.insert(p["id"].as_u64().expect("an id")),
            "{title}: id twice"
        );
        let grid = &p["gridPos"];
        for k in ["h", "w", "x", "y"] {
            assert!(grid[k].is_u64(), "{title}: gridPos.{k}");
        }
        assert!(
            grid["x"].as_u64().unwrap() + grid["w"].as_u64().unwrap() <= 24,
            "{title}: wider than the grid"
        );
        if p["type"] == "row" {
            continue;
        }
        assert!(
            ["timeseries", "stat", "gauge", "table"].contains(&p["type"].as_str().unwrap()),
            "{title}"
        );
        assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{title}: targets"));
        assert!(!targets.is_empty(), "{title}: no query");
        for t in targets {
            assert!(
                t["expr"].as_str().is_some_and(|e| e.contains("tessera_")),
                "{title}: {t}"
            );
            assert_eq!(t["datasource"]["uid"], "${datasource}", "{title}");
        }
    }
    let titles: Vec<&str> = panels.iter().filter_map(|p| p["title"].as_str()).collect();
    for wanted in [
        "Jobs by state",
        "Job failure rate by error code",
        "Queue depth",
        "Oldest message age",
        "Dead letters",
        "Card encoder sessions in use vs budget",
        "Worker restarts",
        "Minutes of video per hour",
        "Segment durations",
    ] {
        assert!(titles.contains(&wanted), "no panel {wanted:?}: {titles:?}");
    }
}

#[test]
fn metric_names_are_read_from_expressions() {
    let names = metric_names(
        "histogram_quantile(0.9, rate(tessera_segment_media_seconds_bucket[5m])) / x_tessera_no",
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["tessera_segment_media_seconds"]
    );
}
