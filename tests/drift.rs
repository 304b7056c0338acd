//! The upstream's `quotaExceeded` as a measurement (DESIGN.md 3.5): an upstream whose
//! pool is spent long before the quota the costs file says, end to end on both
//! limiters. The figure is recorded once per bucket and upstream day, shown by
//! `budget` and `status`, written to the metrics file, and fires the shipped alert.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::common::RedisServer;
use crate::common::harness::{Harness, REGIONS};
use crate::common::promtool::promtool_binary;
use crate::common::upstream::{Billing, FakeUpstream};
use crate::on_both_limiters;

/// What the upstream really grants the key a day, against the 10,000 of the default
/// costs file.
const POOL: u64 = 60;
const CONCURRENCY: u64 = 4;

/// Every shipped region with its overall chart and six category charts, two pages
/// each: 120 calls of 1 unit, twice the pool.
fn regions() -> String {
    let mut text = String::from(
        "[defaults]\npages = 2\ncategories = [\"1\", \"2\", \"10\", \"15\", \"17\", \"20\"]\n",
    );
    for (i, code) in REGIONS.iter().enumerate() {
        text.push_str(&format!("\n[[region]]\ncode = \"{code}\"\noffset = {i}\n"));
    }
    text
}

/// What the WARN says, in part.
const WARN: &str = "spends from the same quota, or the key's quota is lower than configured";

/// The main bucket of a `budget --json` or `status --json`'s budget.
fn main_bucket(buckets: &Value) -> &Value {
    buckets
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == "budget"))
        .unwrap_or_else(|| panic!("a main bucket in {buckets}"))
}

/// Runs the shipped alert rules over `series` (one line of the metrics file) with
/// promtool, and expects TrendsyncUpstreamSpentEarly to fire with `units`.
fn alert_fires(scratch: &Path, series: &str, units: u64) {
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus/trendsync.rules.yml");
    let (name_and_labels, value) = series.rsplit_once(' ').expect("a sample line");
    assert_eq!(value, units.to_string(), "{series}");
    let test = format!(
        r#"rule_files:
  - {rules}
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: '{name_and_labels}'
        values: '{value}x10'
    alert_rule_test:
      - eval_time: 5m
        alertname: TrendsyncUpstreamSpentEarly
        exp_alerts:
          - exp_labels:
              severity: warning
              budget: key1
              bucket: budget
            exp_annotations:
              summary: "trendsync: the upstream said bucket budget of budget key1 was spent when trendsync had counted {units} units today"
              description: "The upstream refused the bucket's calls before trendsync had counted its configured quota since midnight Pacific: another consumer of the API key spends from the same quota, or the key's quota is lower than configured (an upstream audit can lower it). Compare with the key's quota page in the Cloud console; `trendsync budget` shows the figure and, after two such days in a row, the quota and ceiling to configure."
"#,
        rules = rules.display(),
    );
    let file = scratch.join("drift.test.yml");
    std::fs::write(&file, test).expect("writing the promtool test");
    let out = Command::new(promtool_binary())
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("running promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    assert!(said.contains("SUCCESS"), "{said}");
}

/// The upstream refuses at 60 units while the default costs file says 10,000: the
/// run stops as `upstream_quota_exhausted`, and the budget records what it had
/// counted since midnight Pacific at the first refusal, within `--concurrency` calls
/// of 60. One WARN says it; a second run that day, refused again, says nothing more.
fn the_upstream_spent_the_bucket_early(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(POOL)), redis);
    h.regions(&regions());
    let metrics = h.scratch.file("trendsync.prom");
    let concurrency = CONCURRENCY.to_string();

    h.expect_stderr("quota is spent")
        .expect_stderr(WARN)
        .expect_ended("upstream_quota_exhausted")
        .status(75);
    let ran = h
        .cmd()
        .arg("--metrics-file")
        .arg(&metrics)
        .args(["run", "--json", "--concurrency", &concurrency])
        .run();
    assert_eq!(ran.json()["status"], "upstream_quota_exhausted");
    assert_eq!(h.fake.billed()["budget"], POOL);
    let warned: Vec<&str> = ran.stderr.lines().filter(|l| l.contains(WARN)).collect();
    assert_eq!(warned.len(), 1, "one WARN: {}", ran.stderr);
    assert!(warned[0].contains("quota 10000"), "{}", warned[0]);

    let budget = h.budget();
    let main = main_bucket(&budget["buckets"]);
    let spent = main["upstream_spent_at"]
        .as_u64()
        .unwrap_or_else(|| panic!("upstream_spent_at is set: {budget}"));
    assert!(
        (POOL..=POOL + CONCURRENCY).contains(&spent),
        "within --concurrency calls of {POOL}: {spent}"
    );
    assert!(
        warned[0].contains(&format!("had counted {spent} units")),
        "the WARN names the figure {spent}: {}",
        warned[0]
    );
    // The main bucket of the default file holds search.list too, over a sliding 24 h:
    // its figure, and no suggestion.
    assert_eq!(main["suggested"], Value::Null, "{budget}");

    let text = h.bare().arg("budget").run().stdout;
    assert!(
        text.contains(&format!("said the quota is spent today at {spent} units")),
        "{text}"
    );

    let status = h.bare().args(["status", "--json"]).run().json();
    assert_eq!(
        main_bucket(&status["budget"]["buckets"])["upstream_spent_at"],
        spent,
        "{status}"
    );
    let text = h.bare().arg("status").run().stdout;
    assert!(
        text.contains(&format!(
            "spent today at {spent} units counted, below quota 10000"
        )),
        "{text}"
    );

    // The metrics file has the series, and the shipped alert fires on it.
    let written = std::fs::read_to_string(&metrics).expect("the metrics file");
    let series: Vec<&str> = written
        .lines()
        .filter(|l| l.starts_with("trendsync_bucket_upstream_spent_at_units{"))
        .collect();
    assert_eq!(
        series,
        [format!(
            "trendsync_bucket_upstream_spent_at_units{{budget=\"key1\",bucket=\"budget\"}} {spent}"
        )],
        "{written}"
    );
    alert_fires(h.scratch.path(), series[0], spent);

    // The operator lifts the block; the upstream refuses again the same day. The
    // figure stays the first one, and nothing more is said of it.
    h.bare()
        .args(["budget", "unblock"])
        .expect_stderr("lifted the upstream block")
        .run();
    h.expect_stderr("quota is spent")
        .expect_ended("upstream_quota_exhausted")
        .status(75);
    let again = h.cmd().args(["run", "--json", "--concurrency", "1"]).run();
    assert!(!again.stderr.contains(WARN), "{}", again.stderr);
    assert_eq!(
        main_bucket(&h.budget()["buckets"])["upstream_spent_at"],
        spent
    );
}

on_both_limiters!(the_upstream_spent_the_bucket_early);
