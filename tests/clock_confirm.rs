//! When answers cannot check the limiter's clock, and when no call can (issue 34): an
//! answer with no readable `Date` is a warning once a run, skew recorded or not; and a
//! skew record clears at the first run after the clocks agree, even with the budget
//! spent, by a request that carries no key and so bills nothing.

use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::redis_server::real_now_us;
use crate::common::upstream::{API_KEY, DateForm};
use crate::common::{RedisServer, Trendsync, contains};
use crate::on_both_limiters;

on_both_limiters!(
    an_answer_without_a_readable_date_is_a_warning_once_a_run,
    a_skew_record_clears_with_the_budget_spent,
    a_skew_record_stays_with_the_budget_spent_while_the_clock_is_wrong,
);

const DAY_AND_AN_HOUR_US: i64 = 25 * 3600 * 1_000_000;

/// What the warning says of an answer with no readable `Date`.
const UNDATED: &str = "the answer carried no readable Date";

/// The proxy that strips `Date`, with no skew ever recorded: before, a whole
/// run went by without a word; now its first undated answer is a warning naming the
/// call and what to look at, and the run goes on.
fn an_answer_without_a_readable_date_is_a_warning_once_a_run(redis: Option<&RedisServer>) {
    let h = Harness::new(redis);
    // The HTTP server adds a `Date` to an answer that has none; an empty one is
    // read alike, as no date.
    h.fake.date_form(DateForm::Empty);
    let ran = h
        .cmd()
        .args(["run", "--json"])
        .expect_stderr(UNDATED)
        .stderr(contains(UNDATED).count(1))
        .run();
    assert_eq!(ran.json()["status"], "complete", "{}", ran.stdout);
    let line = ran
        .stderr
        .lines()
        .find(|l| l.contains(UNDATED))
        .expect("the warning");
    assert!(line.contains(" WARN "), "{line}");
    // The first undated answer of whichever region came first.
    for said in [
        "videos.list for ",
        "could not be checked",
        "proxy",
        "strips",
    ] {
        assert!(line.contains(said), "{said:?} in {line}");
    }
    assert_eq!(h.fake.calls().len(), 24, "every call of the run");
    assert!(
        h.fake.without_key().is_empty(),
        "no request without the key"
    );
}

/// The limiter's clock, a day and an hour ahead of the upstream's for the next
/// command built: the binary's under `faketime` on the embedded limiter, Redis's
/// `TIME` (until [`clock_right`]) on Redis.
fn clock_ahead(h: &Harness<'_>) -> Trendsync {
    match h.redis {
        Some(server) => {
            server.clock().set_shift_us(DAY_AND_AN_HOUR_US);
            h.cmd()
        }
        None => h.cmd().faketime(&["-f", "+25h"]),
    }
}

/// The limiter's clock right again.
fn clock_right(h: &Harness<'_>) {
    if let Some(server) = h.redis {
        server.clock().set_shift_us(0);
    }
}

/// The limiter's clock's name in `status --json` and the metrics.
fn clock_of(h: &Harness<'_>) -> &'static str {
    if h.redis.is_some() { "redis" } else { "host" }
}

/// The one skew record of the limiter's clock that `status --json` shows.
fn skew_in_status(h: &Harness<'_>) -> Value {
    let status = h.bare().args(["status", "--json"]).run().json();
    let found: Vec<Value> = status["clock_skew"]
        .as_array()
        .expect("clock_skew is a list")
        .iter()
        .filter(|s| s["clock"] == clock_of(h))
        .cloned()
        .collect();
    assert_eq!(found.len(), 1, "{status}");
    found[0].clone()
}

/// The one request without the key the fake received, which carried the key
/// nowhere: no key header, no `key` parameter, the key nowhere in its URL.
fn the_request_without_the_key(h: &Harness<'_>) -> wiremock::Request {
    let keyless = h.fake.without_key();
    assert_eq!(keyless.len(), 1, "one request without the key");
    let req = keyless[0].clone();
    assert!(!req.headers.contains_key("x-goog-api-key"), "{}", req.url);
    assert!(
        req.url.query_pairs().all(|(k, _)| k != "key"),
        "{}",
        req.url
    );
    assert!(!req.url.as_str().contains(API_KEY), "{}", req.url);
    let headers = format!("{:?}", req.headers);
    assert!(!headers.contains(API_KEY), "{headers}");
    assert_eq!(req.url.path(), "/videoCategories", "{}", req.url);
    req
}

/// A run on the right clock (an answer confirms it, so the jump below cannot
/// empty the window: tests/clock_skew.rs), the rest of the budget's ceiling charged
/// by hand, then a run on a clock a day and an hour ahead: it records the skew.
fn skew_recorded_and_budget_spent(h: &Harness<'_>) {
    h.cmd().args(["run"]).run();
    let used = h.budget()["used"].as_u64().expect("used");
    let rest = (9500 - used).to_string();
    h.bare()
        .args(["budget", "charge", "videos.list", "--count", &rest])
        .run();
    clock_ahead(h)
        .args(["run"])
        .expect_stderr("25h ahead of the upstream's")
        .expect_ended("clock_skew")
        .status(75)
        .run();
    clock_right(h);
    assert_eq!(skew_in_status(h)["too_far"], true);
    assert!(h.fake.without_key().is_empty(), "the run made calls");
}

/// The repro: a skew recorded, then the clock fixed with the budget spent.
/// Before, the run stopped `budget_exhausted` before any call, nothing cleared the
/// record, and `budget charge` stayed refused for the clock until the budget freed.
/// Now the run checks the clock with one request that carries no key: the clocks
/// agree, the record clears, and nothing is charged or counted for it.
fn a_skew_record_clears_with_the_budget_spent(redis: Option<&RedisServer>) {
    // The scenario moves Redis's clock: a server of its own whose clock can move.
    let movable = redis.map(|_| RedisServer::start_at(real_now_us()));
    let h = Harness::new(movable.as_ref());
    // Charges made on the clock that was ahead are newer than the right clock's now.
    h.allow_stderr("went back");
    skew_recorded_and_budget_spent(&h);
    let calls_before = h.fake.calls().len();

    let ran = h
        .cmd()
        .args(["--metrics-file", "trendsync.prom", "run", "--json"])
        .expect_stderr("25h ahead of the upstream's when last compared")
        .expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted")
        .status(75)
        .stderr(contains("the clocks agree again"))
        .stderr(contains("request without the key"))
        .run();
    let report = ran.json();
    assert_eq!(report["status"], "budget_exhausted", "{report}");
    assert_eq!(report["calls"], 0, "{report}");
    assert_eq!(report["units_charged"], 0, "{report}");
    assert_eq!(h.fake.calls().len(), calls_before, "no call with the key");
    the_request_without_the_key(&h);
    // The metrics count every call of every run: those with the key, and no other.
    let metrics = std::fs::read_to_string(h.scratch.file("trendsync.prom")).expect("metrics");
    let counted: f64 = metrics
        .lines()
        .filter_map(|l| l.strip_prefix("trendsync_upstream_calls_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(counted, calls_before as f64, "{metrics}");
    // The clock-skew alert reads this: the clocks agree.
    let skew_line = format!(
        "trendsync_clock_skew_seconds{{clock=\"{}\"}} ",
        clock_of(&h)
    );
    let skew_s: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(skew_line.as_str()))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {skew_line}in:\n{metrics}"));
    assert!(skew_s.abs() < 5.0, "{skew_s}");

    let skew = skew_in_status(&h);
    assert_eq!(skew["too_far"], false, "{skew}");
    // The clock is trusted again: a charge from the reserve is granted.
    let charged = h
        .bare()
        .args(["budget", "charge", "videos.list", "--reserve", "--json"])
        .run()
        .json();
    assert!(charged["denied_by"].is_null(), "{charged}");
}

/// The same with the limiter's clock still wrong (here the upstream's answers are
/// dated a day and an hour behind it, so that the window is spent on the limiter's
/// own clock): the request without the key disagrees too, the run stops on the clock,
/// and the record stays.
fn a_skew_record_stays_with_the_budget_spent_while_the_clock_is_wrong(redis: Option<&RedisServer>) {
    let h = Harness::new(redis);
    h.bare()
        .args(["budget", "charge", "videos.list", "--count", "9499"])
        .run();
    h.fake.shift_dates(-25 * 3600);
    // Its one call spends the ceiling, and its answer records the skew.
    h.cmd()
        .args(["run", "--concurrency", "1"])
        .expect_stderr("25h ahead of the upstream's")
        .expect_ended("clock_skew")
        .status(75)
        .run();
    assert_eq!(h.fake.calls().len(), 1);
    assert_eq!(skew_in_status(&h)["too_far"], true);

    let ran = h
        .cmd()
        .args(["run", "--json"])
        .expect_stderr("25h ahead of the upstream's when last compared")
        .expect_stderr("25h ahead of the upstream's (the Date of its answers)")
        .expect_stderr("stopped: ")
        .expect_ended("clock_skew")
        .status(75)
        .run();
    let report = ran.json();
    assert_eq!(report["status"], "clock_skew", "{report}");
    assert_eq!(report["calls"], 0, "{report}");
    assert_eq!(h.fake.calls().len(), 1, "no call with the key");
    the_request_without_the_key(&h);
    assert_eq!(skew_in_status(&h)["too_far"], true);
    let refused = h
        .bare()
        .args(["budget", "charge", "videos.list", "--reserve", "--json"])
        .expect_stderr("nothing was charged")
        .status(75)
        .run()
        .json();
    assert_eq!(refused["denied_by"], "clock", "{refused}");
}
