//! The monitoring that ships with the project (DESIGN.md section 7): the Prometheus
//! alert rules pass `promtool check rules` and their own unit tests, and the rules and
//! the Grafana dashboard use only metric names the binary writes.

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
    let text = std::fs::read_to_string(&file).expect("the metrics file");
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
