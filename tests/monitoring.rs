//! The monitoring that ships with the project (docs/metrics.md): the Prometheus
//! alert rules pass `promtool check rules` and their own unit tests, the rules and
//! the Grafana dashboard use only metric names the binary writes, and the dashboard's
//! queries parse, scope by instance, and suit their panels (dates, tables).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::harness::Harness;
use crate::common::promtool::promtool_binary;
use crate::common::upstream::{Billing, FakeUpstream};

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path)
}

fn promtool(args: &[&str]) -> (i32, String) {
    let out = Command::new(promtool_binary())
        .current_dir(contrib("prometheus"))
        .args(args)
        .output()
        .expect("running promtool");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_alert_rules_are_valid_and_pass_their_unit_tests() {
    let (code, out) = promtool(&["check", "rules", "trendsync.rules.yml"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = promtool(&["test", "rules", "trendsync.rules.test.yml"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Every `trendsync_…` name in `text`.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("trendsync_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The metric families a complete run under the granular cost file writes.
fn written_families() -> BTreeSet<String> {
    let mut h = Harness::with(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.costs(include_str!("../quota-costs.granular.toml"));
    let file = h.scratch.file("trendsync.prom");
    h.cmd()
        .arg("--metrics-file")
        .arg(&file)
        .args(["run", "--region", "US"])
        .run();
    let mut text = std::fs::read_to_string(&file).expect("the metrics file");
    // A family written only on a day the upstream refused a bucket early: a pool of
    // 2 units while the costs file says 10,000.
    let h = Harness::with(FakeUpstream::billing(Billing::single(2)), None);
    let file = h.scratch.file("early.prom");
    h.cmd()
        .arg("--metrics-file")
        .arg(&file)
        .args(["run", "--region", "US", "--concurrency", "1"])
        .status(75)
        .expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_stderr("upstream_quota_exhausted")
        .run();
    text.push_str(&std::fs::read_to_string(&file).expect("the metrics file"));
    assert!(
        text.contains("# TYPE trendsync_bucket_upstream_spent_at_units gauge"),
        "{text}"
    );
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_rules_and_the_dashboard_use_only_metrics_the_binary_writes() {
    let written = written_families();
    assert!(written.contains("trendsync_build_info"), "{written:?}");
    for file in ["prometheus/trendsync.rules.yml", "grafana/trendsync.json"] {
        let text = std::fs::read_to_string(contrib(file)).expect("a shipped file");
        let used = names_in(&text);
        assert!(!used.is_empty(), "{file} queries no trendsync metric");
        let unknown: Vec<&String> = used.difference(&written).collect();
        assert!(
            unknown.is_empty(),
            "{file} uses metrics the binary never writes: {unknown:?}; it writes {written:?}"
        );
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(contrib("grafana/trendsync.json")).expect("read"),
    )
    .expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() >= 5));
}

/// The metric names a PromQL expression selects, whatever their prefix: its identifiers
/// outside strings, label matchers, ranges and grouping lists that are neither a
/// function (followed by `(`) nor a keyword.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // The keywords a grouping list follows.
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    // Other words that are not names: keywords, and the aggregations, which may put
    // their grouping before their `(`.
    const NOT_NAMES: [&str; 21] = [
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "Inf",
        "NaN",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let mut skip_list = false;
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '"' | '\'' | '`' => Some(c),
            '{' => Some('}'),
            '[' => Some(']'),
            '(' if skip_list => Some(')'),
            _ => None,
        };
        if let Some(close) = close {
            // Skip to the closing character, over the strings inside a matcher.
            skip_list = false;
            let mut quote = if close == c { Some(c) } else { None };
            i += 1;
            while i < chars.len() {
                match (quote, chars[i]) {
                    (Some(_), '\\') => i += 1,
                    (Some(q), ch) if ch == q => {
                        if close == q {
                            break;
                        }
                        quote = None;
                    }
                    (None, ch) if ch == close => break,
                    (None, ch @ ('"' | '\'' | '`')) => quote = Some(ch),
                    _ => {}
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if GROUPING.contains(&word.as_str()) {
                skip_list = true;
            } else if !NOT_NAMES.contains(&word.as_str()) && next != Some(&'(') {
                names.insert(word);
            }
            continue;
        }
        if !c.is_whitespace() {
            skip_list = false;
        }
        i += 1;
    }
    names
}

#[test]
fn metric_names_finds_the_selected_names_only() {
    let names = metric_names(
        r#"sum by (instance, method) (increase(up{job="a b", x=~"c{d}"}[1h] offset 5m)) / on (instance) group_left(version) foo:bar > bool 1e3 * 1000"#,
    );
    let expected: BTreeSet<String> = ["up", "foo:bar"].map(str::to_owned).into();
    assert_eq!(names, expected);
}

/// Grafana's date units: each reads its value as milliseconds since the epoch.
fn is_date_unit(unit: &str) -> bool {
    unit.starts_with("dateTime")
}

/// The panels of `dashboard`, with those nested in collapsed rows.
fn panels(dashboard: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    all
}

/// The units a panel shows its values in: its default and those its overrides set.
fn units(panel: &serde_json::Value) -> Vec<&str> {
    let config = &panel["fieldConfig"];
    let mut units: Vec<&str> = config["defaults"]["unit"].as_str().into_iter().collect();
    for o in config["overrides"].as_array().into_iter().flatten() {
        for p in o["properties"].as_array().into_iter().flatten() {
            if p["id"] == "unit" {
                units.extend(p["value"].as_str());
            }
        }
    }
    units
}

/// What is wrong with the dashboard, one line each: promtool's parse of every
/// expression, the metric names, the date units, the table panels, the instance variable.
fn dashboard_problems(dashboard: &serde_json::Value, written: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let instance = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "instance" && v["type"] == "query");
    match instance {
        None => problems.push("no `instance` query variable".to_owned()),
        Some(v) => {
            // Its values come from a metric every run writes, with its `instance` label.
            let query = v["query"]["query"].as_str().or(v["query"].as_str());
            let query = query.unwrap_or_default();
            let names = names_in(query);
            if names.is_empty()
                || !names.is_subset(written)
                || !query.starts_with("label_values(")
                || !query.contains("instance)")
            {
                problems.push(format!(
                    "the instance variable's query `{query}` is not the label_values of \
                     `instance` on a metric the binary writes"
                ));
            }
        }
    }
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("?");
        let targets: Vec<&serde_json::Value> =
            panel["targets"].as_array().into_iter().flatten().collect();
        for t in &targets {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            let names = metric_names(expr);
            if names.is_empty() {
                problems.push(format!("{title}: `{expr}` reads no trendsync metric"));
            }
            for name in names.difference(written) {
                problems.push(format!("{title}: `{name}` is not written by the binary"));
            }
            let selectors = expr.matches("trendsync_").count();
            let scoped = expr.matches("instance=~\"$instance\"").count();
            if scoped < selectors {
                problems.push(format!(
                    "{title}: `{expr}` does not select instance=~\"$instance\" on every metric"
                ));
            }
            if units(panel).into_iter().any(is_date_unit) && !expr.contains("* 1000") {
                problems.push(format!(
                    "{title}: a date unit on `{expr}`, which is in seconds (no `* 1000`)"
                ));
            }
            if panel["type"] == "table" && !(t["instant"] == true && t["format"] == "table") {
                problems.push(format!(
                    "{title}: a table panel whose query is not instant with the table format"
                ));
            }
            let parsed = expr.replace("$instance", ".+");
            rules.push_str(&format!(
                "      - record: dashboard:expr_{}\n        expr: {}\n",
                rules.lines().count(),
                serde_json::Value::from(parsed)
            ));
        }
    }
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("dashboard.rules.yml");
    std::fs::write(&file, &rules).expect("writing the rules file");
    let (code, out) = promtool(&["check", "rules", &file.to_string_lossy()]);
    if code != 0 {
        problems.push(format!(
            "promtool does not parse every expression:\n{out}\n{rules}"
        ));
    }
    problems
}

#[test]
fn the_dashboard_reads_its_data_right() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(contrib("grafana/trendsync.json")).expect("read"),
    )
    .expect("the dashboard is JSON");
    let problems = dashboard_problems(&dashboard, &written_families());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
