//! The dry run and the real run agree: the same plan, the same stopping point, the
//! same policy saying no, and the same status while the budget is blocked.

use serde_json::Value;

use crate::common::harness::{Harness, THREE_REGIONS, shorts};
use crate::common::upstream::{answer_fixture, page2};
use crate::common::{Costs, Limit, RedisServer, contains};
use crate::on_both_limiters;

on_both_limiters!(
    the_dry_run_stops_where_the_run_does_under_equal_windows,
    the_dry_run_reports_a_blocked_budget_as_the_run_does,
);

/// Two limits on the chart's pages with the same maximum and the same window: once
/// both are full, both say no with the same wait.
fn equal_limits() -> Costs {
    Costs::youtube()
        .ceiling(9_000)
        .limit(Limit::new("pages-a", 3, "1h").method("videos.list"))
        .limit(Limit::new("pages-b", 3, "1h").method("videos.list"))
}

/// The plan rows that fit, in the short form of the fake's calls (`US p1`).
fn fitting(plan: &Value) -> Vec<String> {
    plan["plan"]
        .as_array()
        .expect("plan is an array")
        .iter()
        .filter(|row| row["fits"] == true)
        .map(|row| {
            let region = row["region"].as_str().expect("region");
            match row["call"].as_str().expect("call") {
                "category names" => format!("{region} categories"),
                call => {
                    let page = call.strip_prefix("trending page ").expect("a chart page");
                    format!("{region} p{page}")
                }
            }
        })
        .collect()
}

fn the_dry_run_stops_where_the_run_does_under_equal_windows(redis: Option<&RedisServer>) {
    let mut h = Harness::new(redis);
    h.costs(equal_limits()).regions(THREE_REGIONS);
    // One page already in both limits' windows: the plan starts from a window the
    // dry run must read, not an empty one.
    h.bare().args(["budget", "charge", "videos.list"]).run();

    let (dry, calls) = h
        .status(75)
        .run(&["run", "--dry-run", "--json", "--concurrency", "1"]);
    assert!(calls.is_empty(), "{calls:?}");
    let plan = dry.json();

    // The run ends with the dry run's status, 75.
    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted")
        .status(75);
    let (real, calls) = h.run(&["run", "--json", "--concurrency", "1"]);
    let report = real.json();

    // The same calls up to the same stop: two pages of US and its categories, then
    // GB's first page is one page too many for both limits.
    assert_eq!(
        fitting(&plan),
        ["US p1", "US p2", "US categories"],
        "{plan}"
    );
    assert_eq!(shorts(&calls), fitting(&plan), "{report}");
    assert_eq!(plan["status"], "budget_exhausted", "{plan}");
    assert_eq!(report["status"], plan["status"], "{report}");
    // Both limits say no with the same wait; both runs name the same one of them.
    let denied_by = plan["denied_by"].as_str().expect("denied_by");
    assert!(
        ["pages-a", "pages-b"].contains(&denied_by),
        "a limit, not the budget: {plan}"
    );
    assert_eq!(report["denied_by"], plan["denied_by"], "{report}");
    assert_eq!(report["remaining"], plan["remaining"], "{report} vs {plan}");
    // The wait is the same instant (the earlier page leaving), seen a little later.
    let (planned, waited) = (
        plan["retry_after_s"].as_f64().expect("retry_after_s"),
        report["retry_after_s"].as_f64().expect("retry_after_s"),
    );
    assert!(
        waited <= planned && planned <= 3600.0,
        "{waited} vs {planned}"
    );
}

fn the_dry_run_reports_a_blocked_budget_as_the_run_does(redis: Option<&RedisServer>) {
    let mut h = Harness::new(redis);
    h.regions(THREE_REGIONS);
    h.fake.answer_instead(
        page2("US"),
        answer_fixture(403, "error_quota_exceeded.json"),
    );
    h.expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_ended("upstream_quota_exhausted");
    let (first, _) = h.status(75).run(&["run", "--json", "--concurrency", "1"]);
    assert_eq!(first.json()["status"], "upstream_quota_exhausted");

    let (dry, calls) = h.status(75).run(&["run", "--dry-run", "--json"]);
    assert!(calls.is_empty(), "{calls:?}");
    let plan = dry.json();
    h.expect_stderr("the upstream said earlier that the key's quota is spent")
        .expect_ended("upstream_quota_exhausted")
        .status(75);
    let (real, calls) = h.run(&["run", "--json", "--concurrency", "1"]);
    assert!(calls.is_empty(), "blocked: {calls:?}");
    let report = real.json();

    assert_eq!(plan["status"], "upstream_quota_exhausted", "{plan}");
    assert_eq!(report["status"], plan["status"], "{report}");
    assert_eq!(plan["denied_by"], "upstream", "{plan}");
    assert_eq!(report["denied_by"], plan["denied_by"], "{report}");
    // The block an earlier run met names its bucket in both.
    assert_eq!(plan["bucket"], "budget", "{plan}");
    assert_eq!(report["bucket"], plan["bucket"], "{report}");
    assert_eq!(fitting(&plan), Vec::<String>::new(), "{plan}");
    // The first region meets the block; the run never reaches the others, in the plan
    // as in the run.
    let statuses = |json: &serde_json::Value| -> Vec<(String, String)> {
        json["regions"]
            .as_array()
            .expect("regions")
            .iter()
            .map(|r| (r["code"].to_string(), r["status"].to_string()))
            .collect()
    };
    assert_eq!(statuses(&plan), statuses(&report), "{plan}\n{report}");
    assert_eq!(
        plan["regions"][0]["status"], "upstream_quota_exhausted",
        "{plan}"
    );
    for region in &plan["regions"].as_array().expect("regions")[1..] {
        assert_eq!(region["status"], "not_attempted", "{plan}");
    }
    // Both wait for the same reset.
    let (planned, waited) = (
        plan["retry_after_s"].as_f64().expect("retry_after_s"),
        report["retry_after_s"].as_f64().expect("retry_after_s"),
    );
    assert!(
        waited <= planned && planned <= 25.0 * 3600.0,
        "{waited} vs {planned}"
    );
    h.bare()
        .args(["run", "--dry-run"])
        .status(75)
        .stdout(contains(
            "---- the run would stop here: the upstream's block would say no",
        ))
        .run();
}
