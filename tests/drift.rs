//! The upstream's `quotaExceeded` as a measurement (docs/budget.md, "When the upstream
//! refuses"): an upstream whose pool is spent long before the quota the costs file says,
//! end to end on both limiters. The figure is recorded once per bucket and upstream day,
//! shown by `budget` and `status`, written to the metrics file, and fires the shipped
//! alert.

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
    // As Prometheus stores it: the scrape adds the host's `instance`.
    let name_and_labels = name_and_labels.replacen('{', "{instance=\"host1\",", 1);
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
              instance: host1
              severity: warning
              budget: key1
              bucket: budget
            exp_annotations:
              runbook_url: "docs/alerts.md#trendsyncupstreamspentearly"
              summary: "trendsync on host1: the upstream said bucket budget of budget key1 was spent when trendsync had counted {units} units today"
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

/// After two upstream days in a row spent early, `budget` suggests a quota and ceiling for
/// a bucket over the upstream's own day, and for no other (docs/budget.md, "When the
/// upstream refuses"). The binary's clock is moved with faketime, a Redis's with the shim,
/// and the fake upstream dates its answers alike, so the clock check agrees.
#[cfg(target_os = "linux")]
mod two_days {
    use serde_json::Value;

    use super::WARN;
    use crate::common::harness::Harness;
    use crate::common::redis_server::{real_now_us, unix_us};
    use crate::common::upstream::{Billing, FakeUpstream};
    use crate::common::{RedisServer, Trendsync};

    /// What the upstream grants the key's search bucket a day, against the 100 of the
    /// granular file.
    const SEARCHES: u64 = 10;
    /// Noon in Los Angeles on two days in a row.
    const DAY_1: &str = "2026-11-24T20:00:00Z";
    const DAY_2: &str = "2026-11-25T20:00:00Z";

    /// One region, its first chart page, and 12 searches.
    fn regions() -> String {
        let mut text = String::from(
            "[defaults]\npages = 1\ncategories = []\n\n[[region]]\ncode = \"US\"\noffset = 0\n",
        );
        for i in 0..12 {
            text.push_str(&format!(
                "\n[[region.search]]\nname = \"s{i}\"\nq = \"q{i}\"\n"
            ));
        }
        text
    }

    /// `cmd`, its clock (and the upstream's `Date`) at `at`, standing still there. A
    /// Redis's clock runs; it is set once per day ([`spent_early_on_two_days`]).
    fn at_time(h: &Harness<'_>, cmd: Trendsync, at: &str) -> Trendsync {
        h.fake
            .shift_dates((unix_us(at) - real_now_us()) / 1_000_000);
        let stamp = at.trim_end_matches('Z').replace('T', " ");
        cmd.env("TZ", "UTC")
            .faketime(&["--exclude-monotonic", "-f", &stamp])
    }

    fn bucket<'a>(budget: &'a Value, name: &str) -> &'a Value {
        budget["buckets"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["name"] == name))
            .unwrap_or_else(|| panic!("a bucket {name} in {budget}"))
    }

    fn spent_early_on_two_days(redis: Option<&RedisServer>) {
        let mut h = Harness::with(
            FakeUpstream::billing(Billing::granular(10_000, SEARCHES, 10_000)),
            redis,
        );
        h.costs(include_str!("../quota-costs.granular.toml"))
            .regions(&regions());
        for day in [DAY_1, DAY_2] {
            h.fake.midnight();
            if let Some(server) = redis {
                server.clock().set_now_us(unix_us(day));
            }
            let run = at_time(&h, h.cmd(), day)
                .args(["run", "--json", "--concurrency", "1"])
                .status(75)
                .expect_stderr("quota is spent")
                .expect_stderr(WARN)
                .expect_stderr("upstream_quota_exhausted")
                .run();
            assert_eq!(run.json()["status"], "upstream_quota_exhausted", "{day}");
            // The searches the upstream billed, and the one it refused: each
            // charged before it was sent.
            let budget = at_time(&h, h.bare(), day)
                .args(["budget", "--json"])
                .run()
                .json();
            assert_eq!(
                bucket(&budget, "search")["upstream_spent_at"],
                SEARCHES + 1,
                "{day}: {budget}"
            );
            assert_eq!(bucket(&budget, "budget")["upstream_spent_at"], Value::Null);
            if day == DAY_1 {
                assert_eq!(
                    bucket(&budget, "search")["suggested"],
                    Value::Null,
                    "{budget}"
                );
            }
        }
        let budget = at_time(&h, h.bare(), DAY_2)
            .args(["budget", "--json"])
            .run()
            .json();
        let suggested = &bucket(&budget, "search")["suggested"];
        assert_eq!(suggested["quota"], SEARCHES + 1, "{budget}");
        // The granular file's share: a ceiling of 95 for a quota of 100.
        assert_eq!(suggested["ceiling"], (SEARCHES + 1) * 95 / 100, "{budget}");
        assert_eq!(
            suggested["days"][0]["day_start"], "2026-11-24T08:00:00Z",
            "{budget}"
        );
        let text = at_time(&h, h.bare(), DAY_2).arg("budget").run().stdout;
        assert!(
            text.contains(&format!(
                "suggested   quota {}, ceiling {}",
                SEARCHES + 1,
                (SEARCHES + 1) * 95 / 100
            )),
            "{text}"
        );
    }

    #[test]
    fn embedded() {
        spent_early_on_two_days(None);
    }

    #[test]
    fn redis() {
        let server = RedisServer::start_at(unix_us(DAY_1));
        spent_early_on_two_days(Some(&server));
    }
}
