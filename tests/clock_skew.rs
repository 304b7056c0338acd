//! The limiter's clock against the upstream's (docs/budget.md, "The clock", issue 16 item 7): each
//! answer's `Date` is compared with the limiter's time at the charge before it. A
//! clock stepped a day ahead (`faketime` for the binary, the shim for a Redis) stops
//! the run after one call, is recorded and shown, keeps later runs to one call and
//! `budget charge` refused, until a run sees the clocks agree.

use serde_json::Value;

use crate::common::harness::{Harness, blocked_until_a_pacific_midnight};
use crate::common::redis_server::real_now_us;
use crate::common::upstream::{DateForm, answer_fixture, page1};
use crate::common::{RedisServer, contains, lacks};
use crate::on_both_limiters;

on_both_limiters!(
    with_a_skew_recorded_an_answer_without_a_readable_date_stops_the_run_after_one_call,
    a_date_in_either_obsolete_form_is_compared_too,
);

const DAY_AND_AN_HOUR_S: f64 = 25.0 * 3600.0;

/// The one skew record of `clock` that `status --json` shows.
fn skew_in_status(h: &Harness<'_>, clock: &str) -> Value {
    let ran = h.bare().args(["status", "--json"]).run();
    let status = ran.json();
    let found: Vec<&Value> = status["clock_skew"]
        .as_array()
        .expect("clock_skew is a list")
        .iter()
        .filter(|s| s["clock"] == clock)
        .collect();
    assert_eq!(found.len(), 1, "{status}");
    found[0].clone()
}

/// The value of the `trendsync_clock_skew_seconds` sample of `clock` in `metrics`.
fn skew_in_metrics(metrics: &str, clock: &str) -> f64 {
    let prefix = format!("trendsync_clock_skew_seconds{{clock=\"{clock}\"}} ");
    let line = metrics
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no {prefix}in:\n{metrics}"));
    line[prefix.len()..].parse().expect("a number")
}

fn assert_near(what: &str, seen: f64, expected: f64) {
    assert!(
        (seen - expected).abs() < 5.0,
        "{what}: {seen}, expected about {expected}"
    );
}

/// The case on the embedded limiter: 9,000 units charged, then the host's
/// clock 25 hours ahead. Before, the run spent a second day's units; now its first
/// answer shows the skew and it stops there.
#[test]
fn a_host_clock_a_day_ahead_stops_the_run_after_one_call_until_the_clocks_agree() {
    let h = Harness::new(None);
    h.bare()
        .args(["budget", "charge", "videos.list", "--count", "9000"])
        .run();

    let ahead = || {
        h.cmd()
            .args(["--metrics-file", "trendsync.prom", "run", "--json"])
            .faketime(&["-f", "+25h"])
            .expect_stderr("this host's clock is 25h ahead")
            .expect_ended("clock_skew")
            .status(75)
            .run()
    };
    let ran = ahead();
    // Nothing told this run the clock was wrong before its first answer: the calls
    // already under way (one per region at once, 4) are all it made.
    let first = h.fake.received();
    assert!((1..=4).contains(&first), "{first} calls: {}", ran.stderr);
    let report = ran.json();
    assert_eq!(report["status"], "clock_skew", "{report}");
    assert_eq!(report["calls"], first, "{report}");
    assert_eq!(report["units_charged"], first, "{report}");
    let said: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.contains("this host's clock is 25h ahead of the upstream's"))
        .collect();
    assert!(!said.is_empty(), "{}", ran.stderr);
    assert!(
        said[0].contains("fix this host's clock"),
        "names the clock to fix: {}",
        said[0]
    );
    // Recorded, and shown.
    let skew = skew_in_status(&h, "host");
    assert_near(
        "status",
        skew["skew_s"].as_f64().expect("skew_s"),
        DAY_AND_AN_HOUR_S,
    );
    assert_eq!(skew["too_far"], true, "{skew}");
    h.bare()
        .arg("status")
        .stdout(contains(
            "clock: this host's clock is 25h ahead of the upstream's",
        ))
        .run();
    let metrics = std::fs::read_to_string(h.scratch.file("trendsync.prom")).expect("metrics");
    assert_near(
        "metrics",
        skew_in_metrics(&metrics, "host"),
        DAY_AND_AN_HOUR_S,
    );
    // Its calls were made and answered: counted, though nothing of them was stored.
    assert!(
        metrics.contains(&format!(
            "trendsync_upstream_calls_total{{method=\"videos.list\",outcome=\"ok\"}} {first}\n"
        )),
        "{metrics}"
    );

    // The next run on the wrong clock makes one call, not one per region at once.
    let ran = ahead();
    assert_eq!(h.fake.received(), first + 1, "one call: {}", ran.stderr);

    // A charge by hand is refused, saying why and what to do.
    let ran = h
        .bare()
        .args(["budget", "charge", "videos.list", "--json"])
        .expect_stderr("nothing was charged")
        .status(75)
        .stderr(contains("trendsync run"))
        .run();
    assert_eq!(ran.json()["denied_by"], "clock", "{}", ran.stdout);

    // The clock fixed: the run checks it with its first answer and goes on; the
    // entries the wrong clock made are newer than now, which is said.
    let before = h.fake.received();
    let ran = h
        .cmd()
        .args(["run", "--json"])
        .expect_stderr("this host's clock is 25h ahead of the upstream's when last compared")
        .expect_stderr("this host's clock went back")
        .stderr(contains("the clocks agree again"))
        .stderr(contains("went back"))
        .run();
    assert_eq!(ran.json()["status"], "complete");
    assert_eq!(h.fake.received() - before, 24, "every region's calls");
    let skew = skew_in_status(&h, "host");
    assert_near("status", skew["skew_s"].as_f64().expect("skew_s"), 0.0);
    assert_eq!(skew["too_far"], false, "{skew}");
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .expect_stderr("this host's clock went back")
        .run();
}

/// The upstream's clock, not the host's, is the one that moved (or a host whose
/// clock is behind): the same stop, the other way.
#[test]
fn a_host_clock_behind_the_upstream_stops_the_run_too() {
    let h = Harness::new(None);
    h.fake.shift_dates(3600);
    h.cmd()
        .args(["run", "--region", "US"])
        .expect_stderr("this host's clock is 1h behind")
        .expect_ended("clock_skew")
        .status(75)
        .stderr(contains("this host's clock is 1h behind the upstream's"))
        .run();
    assert_eq!(h.fake.received(), 1);
    let skew = skew_in_status(&h, "host");
    assert_near("status", skew["skew_s"].as_f64().expect("skew_s"), -3600.0);
    // Four minutes is within bounds: the run goes on, and clears the record.
    h.fake.shift_dates(240);
    h.cmd()
        .args(["run", "--region", "US"])
        .expect_stderr("this host's clock is 1h behind the upstream's when last compared")
        .run();
    let skew = skew_in_status(&h, "host");
    assert_eq!(skew["too_far"], false, "{skew}");
}

/// An upstream whose `Date` is the last second of the year 9999 (past where jiff's
/// timestamps end) stops the run like any other skew, and every text that tells of it
/// writes that time as RFC 3339 or says "far future": before, `status` and the run's
/// own lines printed it as `@253402300799s`.
#[test]
fn a_date_in_the_year_9999_is_written_as_a_time() {
    let h = Harness::new(None);
    h.fake.date_form(DateForm::LastOf9999);
    let ran = h
        .cmd()
        .args(["run", "--region", "US"])
        .expect_stderr("this host's clock is")
        .expect_ended("clock_skew")
        .status(75)
        .stderr(lacks("@"))
        .run();
    assert!(
        ran.stderr.contains("behind the upstream's"),
        "{}",
        ran.stderr
    );
    for args in [&["status"][..], &["budget"], &["runs"]] {
        h.bare()
            .args(args)
            .stdout(lacks("@"))
            .stderr(lacks("@"))
            .run();
    }
    let skew = skew_in_status(&h, "host");
    assert_eq!(skew["too_far"], true, "{skew}");
    assert!(!skew.to_string().contains('@'), "{skew}");
}

/// With Redis, Redis `TIME` is the limiter's clock: a Redis server a day ahead stops
/// the run the same way, naming the Redis server's clock as the one to fix.
#[test]
fn a_redis_clock_a_day_ahead_stops_the_run_and_names_the_redis_server() {
    let server = RedisServer::start_at(real_now_us() + 25 * 3600 * 1_000_000);
    let h = Harness::new(Some(&server));
    h.cmd()
        .args(["run", "--region", "US"])
        .expect_stderr("the Redis server's clock (TIME) is 25h ahead")
        .expect_ended("clock_skew")
        .status(75)
        .run();
    assert_eq!(h.fake.received(), 1, "a region's calls are made one by one");
    // The next run, of every region, makes one call too.
    let ran = h
        .cmd()
        .args(["run"])
        .expect_stderr("25h ahead of the upstream's when last compared")
        .expect_stderr("25h ahead of the upstream's (the Date of its answers)")
        .expect_stderr("stopped: the Redis server's clock (TIME) is 25h ahead")
        .expect_ended("clock_skew")
        .status(75)
        .stderr(contains(
            "the Redis server's clock (TIME) is 25h ahead of the upstream's",
        ))
        .stderr(contains("Redis server's host"))
        .run();
    assert_eq!(h.fake.received(), 2, "{}", ran.stderr);
    let skew = skew_in_status(&h, "redis");
    assert_eq!(skew["too_far"], true, "{skew}");
    assert_eq!(skew["in_use"], true, "{skew}");
    h.bare()
        .args(["budget", "charge", "videos.list"])
        .expect_stderr("nothing was charged")
        .status(75)
        .run();

    server.clock().set_now_us(real_now_us());
    h.cmd()
        .args(["run"])
        .expect_stderr("25h ahead of the upstream's when last compared")
        // The entries charged on Redis's day-ahead clock are newer than its time now.
        .expect_stderr("the Redis server's clock (TIME) went back")
        .run();
    // `status` reads the window too, and says so as well.
    h.expect_stderr("the Redis server's clock (TIME) went back");
    let skew = skew_in_status(&h, "redis");
    assert_eq!(skew["too_far"], false, "{skew}");
    h.bare().args(["budget", "charge", "videos.list"]).run();
}

/// The last `trendsync_last_run_status` of `kind` set to 1 in `metrics`.
fn status_in_metrics(metrics: &str, kind: &str) -> String {
    let prefix = format!("trendsync_last_run_status{{kind=\"{kind}\",status=\"");
    let set: Vec<&str> = metrics
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .filter_map(|l| l.strip_suffix("\"} 1"))
        .collect();
    assert_eq!(set.len(), 1, "one status set in:\n{metrics}");
    set[0].to_owned()
}

/// The proxy (docs/budget.md, "The clock", "the check fails closed"): with a skew recorded,
/// an upstream whose answers carry no readable `Date` (empty, then unparsable)
/// cannot confirm the limiter's clock. Before, the run warned and made every call;
/// now each run makes its one call and stops, `clock_skew` (75) in the JSON, the
/// metrics and the history, and the record stays until an answer agrees.
fn with_a_skew_recorded_an_answer_without_a_readable_date_stops_the_run_after_one_call(
    redis: Option<&RedisServer>,
) {
    let h = Harness::new(redis);
    let clock = if redis.is_some() { "redis" } else { "host" };
    h.fake.shift_dates(3600);
    h.cmd()
        .args(["run", "--region", "US"])
        .expect_stderr("1h behind the upstream's")
        .expect_ended("clock_skew")
        .status(75)
        .run();
    assert_eq!(h.fake.received(), 1);
    assert_eq!(skew_in_status(&h, clock)["too_far"], true);

    h.fake.shift_dates(0);
    for (form, shown) in [
        (DateForm::Empty, "empty"),
        (DateForm::Unreadable, "unparsable"),
    ] {
        h.fake.date_form(form);
        let before = h.fake.received();
        let ran = h
            .cmd()
            .args(["--metrics-file", "trendsync.prom", "run", "--json"])
            .expect_stderr("1h behind the upstream's when last compared")
            .expect_stderr("had no readable Date")
            .expect_ended("clock_skew")
            .status(75)
            .run();
        assert_eq!(
            h.fake.received() - before,
            1,
            "{shown} Date: one call, not every region's: {}",
            ran.stderr
        );
        let report = ran.json();
        assert_eq!(report["status"], "clock_skew", "{shown}: {report}");
        assert_eq!(report["calls"], 1, "{shown}: {report}");
        let metrics = std::fs::read_to_string(h.scratch.file("trendsync.prom")).expect("metrics");
        assert_eq!(status_in_metrics(&metrics, "run"), "clock_skew", "{shown}");
        // Nothing was measured: the record still says the clock is too far.
        assert_eq!(skew_in_status(&h, clock)["too_far"], true, "{shown}");
    }
    // In the history: each of the three runs, on the one region it called.
    let runs = h
        .bare()
        .args(["runs", "--status", "clock_skew", "--json"])
        .run()
        .json();
    let stopped: Vec<&Value> = runs["runs"].as_array().expect("a list").iter().collect();
    assert_eq!(stopped.len(), 3, "{runs}");
    assert!(
        stopped
            .iter()
            .all(|r| r["reason"].as_str().is_some_and(|w| w.contains("clock"))),
        "{runs}"
    );
    let status = h.bare().args(["status", "--json"]).run().json();
    let last: Vec<&Value> = status["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .filter(|r| r["last_status"] == "clock_skew")
        .collect();
    assert!(!last.is_empty(), "{status}");

    // A `Date` the clocks agree by, in the asctime form a proxy may write, confirms
    // the clock: the run goes on and clears the record.
    h.fake.date_form(DateForm::Asctime);
    let ran = h
        .cmd()
        .args(["run", "--json"])
        .expect_stderr("1h behind the upstream's when last compared")
        .stderr(contains("the clocks agree again"))
        .run();
    assert_eq!(ran.json()["status"], "complete");
    assert_eq!(skew_in_status(&h, clock)["too_far"], false);
}

/// A `Date` in the obsolete RFC 850 or asctime form, as a proxy may rewrite it, is
/// read and compared like an IMF-fixdate one: an upstream an hour ahead stops the
/// run after its first call. Before, such a `Date` was unreadable and the run made
/// every call.
fn a_date_in_either_obsolete_form_is_compared_too(redis: Option<&RedisServer>) {
    for form in [DateForm::Rfc850, DateForm::Asctime] {
        let h = Harness::new(redis);
        h.fake.date_form(form);
        h.fake.shift_dates(3600);
        let ran = h
            .cmd()
            .args(["run", "--region", "US", "--json"])
            .expect_stderr("1h behind the upstream's")
            .expect_ended("clock_skew")
            .status(75)
            .run();
        assert_eq!(h.fake.received(), 1, "{form:?}: {}", ran.stderr);
        assert_eq!(ran.json()["status"], "clock_skew", "{form:?}");
    }
}

/// With Redis, the block a `quotaExceeded` sets ends at the next Pacific midnight by
/// Redis `TIME`, the clock every host's limiter holds it against, whatever this
/// host's own clock says (its answers agree with Redis, so nothing stops the run).
/// Before, a host 3 days ahead blocked every host for 3 days more, and a host 2 days
/// behind set a block already over, so the others kept calling into `quotaExceeded`.
#[test]
fn a_quota_block_on_redis_ends_at_the_next_pacific_midnight_by_redis_time() {
    for host_off in ["+72h", "-48h"] {
        let server = RedisServer::start();
        let h = Harness::new(Some(&server));
        h.fake.answer_instead(
            page1("US"),
            answer_fixture(403, "error_quota_exceeded.json"),
        );
        h.cmd()
            .args(["run", "--region", "US"])
            .faketime(&["-f", host_off])
            .expect_stderr("quota is spent")
            // Measured by Redis's day too, whatever the host's clock says.
            .expect_stderr("had counted 1 units")
            .expect_ended("upstream_quota_exhausted")
            .status(75)
            .run();
        assert_eq!(h.fake.received(), 1, "{host_off}");
        let budget = h.bare().args(["budget", "--json"]).run().json();
        let until = blocked_until_a_pacific_midnight(&budget, host_off);
        let ahead_s = (until.as_microsecond() - real_now_us()) / 1_000_000;
        assert!(
            ahead_s > 0 && ahead_s <= 25 * 3600,
            "{host_off}: the next one by Redis TIME, {ahead_s} s ahead: {until}"
        );
    }
}

/// A host clock that jumps a day ahead may evict the window's entries on its first
/// charge, before any answer can tell it is wrong, but it may not lose them: the log
/// keeps every call the window would still hold by the time the upstream last
/// confirmed, and back on the right clock the window is counted again from it. So the
/// wrong clock's runs make one call each, and the real entries still count after.
#[test]
fn a_clock_that_jumped_ahead_does_not_empty_the_embedded_window_for_good() {
    let h = Harness::new(None);
    let used_before = confirmed_then_mostly_spent(&h);

    for _ in 0..2 {
        h.cmd()
            .args(["run", "--json", "--concurrency", "1"])
            .faketime(&["-f", "+25h"])
            .expect_stderr("this host's clock is 25h ahead")
            .expect_ended("clock_skew")
            .status(75)
            .run();
    }
    let wrong_clock_calls = 2;

    // Back on the right clock: every real entry counts again (and the two calls made
    // on the wrong clock, dated a day ahead, count too: the safe side).
    let ran = h.bare().args(["budget", "--json"]).run();
    let used = ran.json()["used"].as_u64().expect("used");
    assert_whole(used, used_before, wrong_clock_calls);
}

/// A run on the right clock confirms it; then most of the budget is spent. The
/// units used then.
fn confirmed_then_mostly_spent(h: &Harness<'_>) -> u64 {
    h.run(&["run"]);
    h.bare()
        .args(["budget", "charge", "videos.list", "--count", "9000"])
        .run();
    let used = h.budget()["used"].as_u64().expect("used");
    assert!(used >= 9000, "{used}");
    used
}

/// Back on the right clock, `used` counts every real entry of `used_before`, and at
/// most the `wrong_clock_calls` made in between besides.
fn assert_whole(used: u64, used_before: u64, wrong_clock_calls: u64) {
    assert!(
        used >= used_before,
        "the window lost real entries: {used} used, {used_before} before the jump"
    );
    assert!(used <= used_before + wrong_clock_calls, "{used}");
}

/// The same day-ahead host on Redis: Redis counts by its own `TIME`, which the host's
/// clock does not move, so the runs on that host agree with the upstream, and the
/// window keeps every entry.
#[test]
fn a_host_clock_a_day_ahead_leaves_a_redis_window_whole() {
    let server = RedisServer::start();
    let h = Harness::new(Some(&server));
    let used_before = confirmed_then_mostly_spent(&h);
    let before = h.fake.received();
    h.cmd()
        .args(["run", "--json", "--concurrency", "1"])
        .faketime(&["-f", "+25h"])
        .run();
    let made = (h.fake.received() - before) as u64;
    let used = h.budget()["used"].as_u64().expect("used");
    assert_eq!(used, used_before + made, "every entry, and the run's calls");
}

/// A Redis whose own `TIME` jumps a day and two hours ahead: the runs on it stop after
/// one call each (the check above), but that call's charge, on a clock no answer has
/// confirmed, evicts the whole window. It may not lose it: Redis keeps every entry
/// the window would hold by the time the upstream last confirmed `TIME` (and the sets
/// outlive the jump), so back on the right time every real entry counts again.
#[test]
fn a_redis_clock_that_jumped_ahead_does_not_empty_the_window_for_good() {
    let server = RedisServer::start_at(real_now_us());
    let h = Harness::new(Some(&server));
    let used_before = confirmed_then_mostly_spent(&h);

    server.clock().advance_us(26 * 3600 * 1_000_000);
    for _ in 0..2 {
        h.cmd()
            .args(["run", "--json", "--concurrency", "1"])
            .expect_stderr("the Redis server's clock (TIME) is 26h ahead")
            .expect_ended("clock_skew")
            .status(75)
            .run();
    }
    let wrong_clock_calls = 2;

    server.clock().set_shift_us(0);
    // Read, the window is counted again from the set, since the keys beside it were
    // written on a clock a day ahead of this one. (The two calls made on the wrong
    // clock, dated a day ahead, count too: the safe side.)
    let used = used_after_redis_went_back(&h);
    assert_whole(used, used_before, wrong_clock_calls);
    // The next run finds the clocks agree, and charges on top of the whole window.
    let before = h.fake.received();
    h.cmd()
        .args(["run"])
        .expect_stderr("26h ahead of the upstream's when last compared")
        .expect_stderr("the Redis server's clock (TIME) went back")
        .run();
    let made = (h.fake.received() - before) as u64;
    assert!(made > 0, "the run made no call");
    assert_eq!(used_after_redis_went_back(&h), used + made);
}

/// The main bucket's units by `budget --json`, which warns that Redis `TIME` went
/// back past the window's newest entry.
fn used_after_redis_went_back(h: &Harness<'_>) -> u64 {
    let ran = h
        .bare()
        .args(["budget", "--json"])
        .expect_stderr("the Redis server's clock (TIME) went back")
        .run();
    ran.json()["used"].as_u64().expect("used")
}

/// A smaller jump, inside the window: Redis an hour ahead evicts the hour of entries
/// at the window's far end on its next charge. Back on the right time those entries
/// are in the window again, and both the read and the next charge count them,
/// though the keys beside the set still hold the total of the clock that ran ahead.
#[test]
fn a_redis_clock_set_back_counts_again_what_it_evicted_while_ahead() {
    // The entries are made 23 hours before the Redis clock's right time.
    let server = RedisServer::start_at(real_now_us() - 23 * 3600 * 1_000_000);
    let h = Harness::new(Some(&server));
    h.bare()
        .args(["budget", "charge", "videos.list", "--count", "9000"])
        .run();
    // The right time, then an hour ahead of it: the 9000 units leave the window.
    server.clock().set_shift_us(3600 * 1_000_000);
    h.bare().args(["budget", "charge", "videos.list"]).run();
    assert_eq!(h.budget()["used"].as_u64(), Some(1), "evicted while ahead");

    // Set right: the 9000 units were made 23 hours ago, inside the 24 hours.
    server.clock().set_shift_us(0);
    assert_eq!(used_after_redis_went_back(&h), 9001);
    h.bare().args(["budget", "charge", "videos.list"]).run();
    assert_eq!(used_after_redis_went_back(&h), 9002);
}
