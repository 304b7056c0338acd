//! The budget as the upstream bills it since June 2026 (docs/budget.md, "Buckets"): buckets of
//! their own, a block per bucket, and windows that are the upstream's own day.
//!
//! End to end, the binary runs against a fake upstream that bills like the real one
//! (a pool per bucket, each answering quotaExceeded on its own, all starting again at
//! a midnight the test chooses), under `quota-costs.granular.toml`, on both limiters.
//! The calendar day is tested on the limiters themselves: the embedded one on an
//! injected clock, Redis on a real server whose clock the test moves (an LD_PRELOAD
//! shim, `tests/common/clock_shift.c`), with no test branch in the product.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use trendsync::clock::{Clock, ManualClock, Micros, SystemClock};
use trendsync::quota::{
    Allowance, Budget, EmbeddedLimiter, Limiter, PolicyRef, RedisLimiter, Window, Zone,
};

use crate::common::harness::{Harness, REGIONS};
use crate::common::redis_server::unix_us;
use crate::common::upstream::{Billing, FakeUpstream};
use crate::common::{Bucket, Costs, Limit, RedisServer, Scratch, contains};
use crate::on_both_limiters;

/// The shipped granular cost file.
const GRANULAR: &str = include_str!("../quota-costs.granular.toml");

/// The 8 shipped regions, each with its two chart pages (all the fixtures hold) and
/// two searches.
fn regions_with_searches() -> String {
    let mut text = String::from("[defaults]\npages = 2\n");
    for (i, code) in REGIONS.iter().enumerate() {
        text.push_str(&format!(
            r#"
[[region]]
code = "{code}"
offset = {i}

[[region.search]]
name = "fresh"
order = "viewCount"
published_within = "24h"

[[region.search]]
name = "music"
q = "music"
order = "date"
"#
        ));
    }
    text
}

fn granular(fake: FakeUpstream, redis: Option<&RedisServer>) -> Harness<'_> {
    let mut h = Harness::with(fake, redis);
    h.costs(GRANULAR).regions(&regions_with_searches());
    h
}

/// Calls of `method` among `calls`.
fn count(calls: &[crate::common::upstream::Call], method: &str) -> usize {
    calls.iter().filter(|c| c.method == method).count()
}

/// Every region's two chart pages are among `calls`.
fn fetched_every_chart(calls: &[crate::common::upstream::Call]) -> bool {
    let shorts: Vec<String> = calls.iter().map(|c| c.short()).collect();
    REGIONS
        .iter()
        .all(|r| shorts.contains(&format!("{r} p1")) && shorts.contains(&format!("{r} p2")))
}

/// Each bucket of `budget --json`, by name.
fn buckets(budget: &Value) -> BTreeMap<String, Value> {
    budget["buckets"]
        .as_array()
        .expect("buckets is an array")
        .iter()
        .map(|b| (b["name"].as_str().expect("a name").to_owned(), b.clone()))
        .collect()
}

/// Each bucket's `used` is exactly what the fake billed in it today.
fn assert_used_is_billed(h: &Harness<'_>) {
    let budget = h.budget();
    let used: BTreeMap<String, u64> = buckets(&budget)
        .into_iter()
        .map(|(name, b)| (name, b["used"].as_u64().expect("used")))
        .collect();
    assert_eq!(
        used,
        h.fake.billed(),
        "each bucket's used (left) against what the upstream billed in it (right)"
    );
}

/// Seven runs of 8 regions with two searches each against an upstream that grants 100
/// searches a day: every run fetches every chart; searches stop at the search bucket's
/// ceiling of 95 without a single 403; each bucket holds what the upstream billed; the
/// runs the search bucket cut short exit 75 naming it.
fn searches_stop_at_their_own_ceiling_and_trending_goes_on(redis: Option<&RedisServer>) {
    let h = granular(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        redis,
    );
    h.allow_stderr("stopped: budget exhausted")
        .allow_stderr(&crate::common::ended("budget_exhausted"));
    let mut searched = 0;
    for run in 1..=7 {
        let (ran, calls) = h
            .status(if run <= 5 { 0 } else { 75 })
            .run(&["run", "--json"]);
        let report = ran.json();
        assert!(
            fetched_every_chart(&calls),
            "run {run} missed a chart: {:?}",
            calls.iter().map(|c| c.short()).collect::<Vec<_>>()
        );
        searched += count(&calls, "search.list");
        // 16 searches a run: five runs fit whole in the ceiling of 95, the sixth
        // stops at its 16th search, the seventh makes none.
        let expected = [16, 32, 48, 64, 80, 95, 95][run - 1];
        assert_eq!(searched, expected, "searches after run {run}: {report}");
        if run <= 5 {
            assert_eq!(report["status"], "complete", "{report}");
        } else {
            assert_eq!(report["status"], "budget_exhausted", "{report}");
            assert_eq!(report["denied_by"], "search", "{report}");
            assert_eq!(report["bucket"], "search", "{report}");
            assert_eq!(report["remaining_by_bucket"]["search"], 0, "{report}");
            // Each region's trending pages were stored even so.
            for region in report["regions"].as_array().expect("regions") {
                assert_eq!(region["pages"], 2, "{region}");
            }
        }
    }
    assert_eq!(
        h.fake.denied().values().sum::<u64>(),
        0,
        "the upstream never had to say no"
    );
    assert_used_is_billed(&h);
    let budget = h.budget();
    let search = &buckets(&budget)["search"];
    assert_eq!(search["used"], 95, "{budget}");
    assert_eq!(search["remaining"], 0, "{budget}");
    assert_eq!(search["window"], "day@America/Los_Angeles", "{budget}");
    // Trending's bucket holds the pages, the category names and the search details.
    assert_eq!(
        budget["used"],
        buckets(&budget)["budget"]["used"],
        "{budget}"
    );
}

/// The next local midnight in Los Angeles after `now_us`.
fn next_pacific_midnight(now_us: i64) -> i64 {
    Zone::get("America/Los_Angeles")
        .expect("a known zone")
        .midnight(now_us, 1)
}

/// Another consumer of the key spent the search bucket: the run's first search gets
/// the one 403, which blocks the search bucket alone until a Pacific midnight; the
/// next run fetches every chart and calls no search; `budget unblock search` lifts it.
fn a_search_bucket_spent_elsewhere_blocks_only_searches(redis: Option<&RedisServer>) {
    let h = granular(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        redis,
    );
    h.fake.spend("search", 100);
    // One region at a time: a second region's first search would otherwise be in
    // flight before the first 403 came back.
    // The upstream refused a bucket this budget had counted 1 search of: the
    // refusal measured it, and a warning says so (docs/budget.md, "When the upstream refuses").
    h.expect_stderr("quota is spent")
        .expect_stderr("had counted 1 units of its quota 100")
        .expect_ended("upstream_quota_exhausted");
    let (ran, calls) = h
        .status(75)
        // The log names the bucket.
        .stderr(contains("\"search\" bucket is spent"))
        .run(&["run", "--json", "--concurrency", "1"]);
    let report = ran.json();
    assert_eq!(report["status"], "upstream_quota_exhausted", "{report}");
    assert!(fetched_every_chart(&calls), "{report}");
    assert_eq!(count(&calls, "search.list"), 1, "{report}");
    assert_eq!(h.fake.denied()["search"], 1);
    assert_eq!(h.fake.denied().values().sum::<u64>(), 1);

    let budget = h.budget();
    let by_name = buckets(&budget);
    assert_eq!(by_name["budget"]["blocked_until"], Value::Null, "{budget}");
    assert_eq!(budget["blocked_until"], Value::Null, "{budget}");
    let until = by_name["search"]["blocked_until"]
        .as_str()
        .unwrap_or_else(|| panic!("the search bucket is blocked: {budget}"));
    let until_us = unix_us(until);
    let now = SystemClock.now().as_i64();
    assert_eq!(
        until_us,
        next_pacific_midnight(now),
        "blocked until the next midnight in Los Angeles: {budget}"
    );

    // The next run fetches every chart and calls no search at all.
    h.expect_stderr("the upstream said earlier that the key's quota is spent")
        .expect_ended("upstream_quota_exhausted");
    let (ran, calls) = h.status(75).run(&["run", "--json"]);
    assert_eq!(ran.json()["status"], "upstream_quota_exhausted");
    assert!(fetched_every_chart(&calls));
    assert_eq!(count(&calls, "search.list"), 0, "{:?}", calls);
    assert_eq!(h.fake.denied().values().sum::<u64>(), 1);

    // The upstream's day turns; the operator lifts the search bucket's block.
    h.fake.midnight();
    let ran = h
        .bare()
        .args(["budget", "unblock", "search", "--json"])
        .expect_stderr("lifted the upstream block of bucket \"search\"")
        .run();
    let lifted = ran.json();
    assert_eq!(lifted["unblocked"], true, "{lifted}");
    assert_eq!(lifted["buckets"][0]["name"], "search", "{lifted}");
    assert_eq!(buckets(&h.budget())["search"]["blocked_until"], Value::Null);
    let (_, calls) = h.run(&["run", "--json"]);
    assert_eq!(count(&calls, "search.list"), 16);
}

/// The dry run walks the same plan as the run and stops the same bucket: with 90 of
/// the 95 searches spent, it plans every chart and 5 searches, exits 75 naming the
/// search bucket, and the real run then makes exactly the calls that fitted.
fn the_dry_run_stops_only_the_spent_bucket(redis: Option<&RedisServer>) {
    let h = granular(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        redis,
    );
    let ran = h
        .bare()
        .args(["budget", "charge", "search.list", "--count", "90", "--json"])
        .run();
    assert_eq!(ran.json()["policy"], "search", "{}", ran.stdout);
    assert_eq!(
        ran.json()["parts"],
        serde_json::json!([{"name": "search", "kind": "bucket", "used": 90, "remaining": 5}]),
        "{}",
        ran.stdout
    );

    let dry = h
        .bare()
        .args(["run", "--dry-run", "--json"])
        .status(75)
        .run();
    let plan = dry.json();
    assert_eq!(plan["denied_by"], "search", "{plan}");
    assert_eq!(plan["bucket"], "search", "{plan}");
    let fits = |method: &str| {
        plan["plan"]
            .as_array()
            .expect("a plan")
            .iter()
            .filter(|c| c["method"] == method && c["fits"] == true)
            .count()
    };
    assert_eq!(fits("search.list"), 5, "{plan}");
    // Every chart page, every region's category names, and 5 searches' details.
    assert_eq!(fits("videos.list"), 16 + 5, "{plan}");
    assert_eq!(plan["remaining_by_bucket"]["search"], 0, "{plan}");
    let searched: Vec<&Value> = plan["plan"]
        .as_array()
        .expect("a plan")
        .iter()
        .filter(|c| c["method"] == "search.list")
        .collect();
    assert!(searched.iter().all(|c| c["bucket"] == "search"), "{plan}");

    h.bare()
        .args(["run", "--dry-run"])
        .status(75)
        .stdout(contains("bucket"))
        .stdout(contains("search   5 units planned, 0 left"))
        .run();

    h.expect_stderr("stopped: budget exhausted")
        .expect_ended("budget_exhausted");
    let (_, calls) = h.status(75).run(&["run", "--json"]);
    assert_eq!(count(&calls, "search.list"), 5);
    assert_eq!(count(&calls, "videos.list"), 16 + 5);
    assert!(fetched_every_chart(&calls));
}

/// `budget` and `status` show every bucket, and the metrics file each bucket's numbers
/// with its ceiling and quota.
fn every_place_that_shows_the_budget_shows_every_bucket(redis: Option<&RedisServer>) {
    let h = granular(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        redis,
    );
    let metrics = h.scratch.file("trendsync.prom");
    h.cmd()
        .args(["--metrics-file"])
        .arg(&metrics)
        .args(["run", "--region", "US"])
        .run();

    let text = h.bare().args(["budget"]).run();
    for needle in [
        "bucket budget",
        "bucket search",
        "bucket stats",
        "today (day@America/Los_Angeles",
    ] {
        assert!(
            text.stdout.contains(needle),
            "{needle:?} in {}",
            text.stdout
        );
    }
    let budget = h.budget();
    let by_name = buckets(&budget);
    assert_eq!(
        by_name.keys().collect::<Vec<_>>(),
        ["budget", "search", "stats"]
    );
    assert_eq!(by_name["search"]["used"], 2, "{budget}");
    assert_eq!(by_name["search"]["by_method"]["search.list"], 2, "{budget}");
    assert_eq!(by_name["stats"]["used"], 0, "{budget}");
    let window_s = by_name["search"]["window_s"].as_f64().expect("window_s");
    assert!(
        [82_800.0, 86_400.0, 90_000.0].contains(&window_s),
        "a day's length: {budget}"
    );

    let status = h.bare().args(["status", "--json"]).run();
    let status = status.json();
    let names: Vec<&str> = status["budget"]["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["budget", "search", "stats"], "{status}");
    let text = h.bare().args(["status"]).run().stdout;
    // The limiter and the costs file the figures came from are named once, in the
    // budget's first line, not again on each bucket's.
    assert_eq!(text.matches("costs from").count(), 1, "{text}");
    assert!(
        text.contains("budget \"key1\" (on ") && text.contains(", costs from "),
        "{text}"
    );
    assert!(
        text.contains("\n  bucket \"search\": 2 used of ceiling 95, 93 remaining; not blocked\n"),
        "{text}"
    );
    assert!(text.contains("\n  bucket \"budget\": "), "{text}");

    let exposition = std::fs::read_to_string(&metrics).expect("the metrics file");
    let checked = crate::common::promtool::check_metrics(exposition.as_bytes());
    assert_eq!(checked.code, 0, "promtool: {}", checked.output);
    for line in [
        "trendsync_bucket_used_units{budget=\"key1\",bucket=\"search\"} 2\n",
        "trendsync_bucket_ceiling_units{budget=\"key1\",bucket=\"search\"} 95\n",
        "trendsync_bucket_quota_units{budget=\"key1\",bucket=\"stats\"} 10000\n",
        "trendsync_bucket_remaining_units{budget=\"key1\",bucket=\"search\",to=\"quota\"} 98\n",
        "trendsync_bucket_blocked_until_timestamp_seconds{budget=\"key1\",bucket=\"budget\"} 0\n",
    ] {
        assert!(exposition.contains(line), "{line:?} in\n{exposition}");
    }
}

on_both_limiters!(
    searches_stop_at_their_own_ceiling_and_trending_goes_on,
    a_search_bucket_spent_elsewhere_blocks_only_searches,
    the_dry_run_stops_only_the_spent_bucket,
    every_place_that_shows_the_budget_shows_every_bucket,
);

// The calendar day on the limiters themselves.

const S: i64 = 1_000_000;

/// A budget of two buckets over the Pacific day: `budget` (ceiling 5) and `search`
/// (ceiling 3), with a per-call limit on searches over a sliding minute.
fn day_budget() -> Budget {
    let text = Costs::new()
        .key("day")
        .quota(6)
        .ceiling(5)
        .window("day@America/Los_Angeles")
        .cost("videos.list", 1)
        .bucket(
            Bucket::new("search")
                .quota(4)
                .ceiling(3)
                .window("day@America/Los_Angeles")
                .cost("search.list", 1),
        )
        .limit(
            Limit::new("per-minute", 100, "1m")
                .method("search.list")
                .per("call"),
        )
        .to_toml();
    trendsync::config::parse_costs(&trendsync::config::SourceText {
        name: "costs.toml".into(),
        text: &text,
    })
    .expect("a valid costs file")
}

/// A limiter and a way to set its clock.
struct Clocked {
    limiter: Limiter,
    /// Sets the limiter's clock (and this host's) to a time.
    set: Box<dyn Fn(i64)>,
    _keep: Box<dyn std::any::Any>,
}

fn embedded_at(start_us: i64) -> Clocked {
    let scratch = Scratch::new();
    let clock = Arc::new(ManualClock::starting_at(Micros::new(start_us)));
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open(&scratch.file("t.db"), "day", clock.clone(), None).expect("opening"),
    );
    let setter = clock.clone();
    Clocked {
        limiter,
        set: Box::new(move |us| setter.set(Micros::new(us))),
        _keep: Box::new(scratch),
    }
}

async fn redis_at(start_us: i64) -> Clocked {
    let server = RedisServer::start_at(start_us);
    let host = Arc::new(ManualClock::starting_at(Micros::new(start_us)));
    let limiter = Limiter::Redis(
        RedisLimiter::connect(&server.url(), "day", host.clone(), None)
            .await
            .expect("connecting"),
    );
    let clock = server.clock();
    Clocked {
        limiter,
        set: Box::new(move |us| {
            clock.set_now_us(us);
            host.set(Micros::new(us));
        }),
        _keep: Box::new(server),
    }
}

async fn charge(
    l: &Limiter,
    budget: &Budget,
    id: &str,
    method: &str,
) -> trendsync::quota::Decision {
    let c = budget
        .charge(id, method, 1, Allowance::Ceiling)
        .expect("a charge");
    l.charge(&c).await.expect("the limiter answers")
}

async fn used(l: &Limiter, budget: &Budget) -> (i64, BTreeMap<String, u64>) {
    let st = l.status(&budget.policies(), &[]).await.expect("status");
    let used = st
        .policies
        .iter()
        .map(|p| (p.name.clone(), p.used))
        .collect();
    (st.now.as_i64(), used)
}

/// Charges in the last seconds of a Pacific day and after its midnight fall in two
/// days; a denial before midnight waits exactly until it; spending one bucket leaves
/// the other whole.
async fn the_upstream_day_turns_at_pacific_midnight(c: Clocked) {
    let budget = day_budget();
    let midnight = unix_us("2026-11-24T08:00:00Z");
    (c.set)(midnight - 5 * S);
    for i in 0..3 {
        assert!(
            charge(&c.limiter, &budget, &format!("s{i}"), "search.list")
                .await
                .granted
        );
    }
    let denied = charge(&c.limiter, &budget, "s3", "search.list").await;
    assert!(!denied.granted);
    assert_eq!(denied.denied_by.as_deref(), Some("search"));
    let wait = denied.retry_after.expect("a retry-after");
    let (now, before) = used(&c.limiter, &budget).await;
    // Exactly to midnight on the embedded limiter; on Redis, its clock moved on by
    // the time the status was read.
    assert!(
        wait.as_micros() as i64 >= midnight - now && wait <= Duration::from_secs(5),
        "retry after {wait:?} at {now}, midnight at {midnight}"
    );
    assert_eq!(before["search"], 3);
    assert_eq!(before["budget"], 0, "the other bucket lost nothing");
    assert!(
        charge(&c.limiter, &budget, "v0", "videos.list")
            .await
            .granted
    );

    (c.set)(midnight + S);
    let (_, after) = used(&c.limiter, &budget).await;
    assert_eq!(after["search"], 0, "a new day: {after:?}");
    assert_eq!(after["budget"], 0, "a new day: {after:?}");
    assert!(
        charge(&c.limiter, &budget, "s4", "search.list")
            .await
            .granted
    );
    let (_, after) = used(&c.limiter, &budget).await;
    assert_eq!(after["search"], 1);
    // The sliding per-call limit still counts the calls of the last minute.
    assert_eq!(after["per-minute"], 4);
}

/// The days of the daylight-saving changes are 23 and 25 hours long, as the
/// limiter's own clock finds them.
async fn a_day_is_23_or_25_hours_across_daylight_saving(c: Clocked) {
    let day = Window::Day(Zone::get("America/Los_Angeles").expect("a zone"));
    let refs = [PolicyRef {
        kind: trendsync::quota::Kind::Bucket,
        methods: Vec::new(),
        name: "search".into(),
        window: day.clone(),
    }];
    for (at, length) in [
        ("2026-03-08T20:00:00Z", 82_800),
        ("2026-11-01T20:00:00Z", 90_000),
        ("2026-11-23T20:00:00Z", 86_400),
    ] {
        (c.set)(unix_us(at));
        let st = c.limiter.status(&refs, &[]).await.expect("status");
        assert_eq!(
            day.length_at(st.now.as_i64()),
            Duration::from_secs(length),
            "{at}"
        );
    }
}

/// Redis TIME, not this host's clock, decides which day a charge falls in: with Redis
/// an hour before a Pacific midnight and the host an hour after it, or the other way
/// round, three searches fill Redis's day and the fourth waits until Redis's next
/// midnight. (The script is sent the host's own day first, and reads the day before
/// or after only in these cases.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_time_decides_the_day_when_the_host_is_in_the_next_or_the_last() {
    let midnight = unix_us("2026-11-24T08:00:00Z");
    let hour = 3600 * S;
    let budget = day_budget();
    for (redis_at, host_at, next_midnight) in [
        (midnight - hour, midnight + hour, midnight),
        (midnight + hour, midnight - hour, midnight + 24 * hour),
    ] {
        let server = RedisServer::start_at(redis_at);
        let host = Arc::new(ManualClock::starting_at(Micros::new(host_at)));
        let limiter = Limiter::Redis(
            RedisLimiter::connect(&server.url(), "day", host, None)
                .await
                .expect("connecting"),
        );
        let case = format!("Redis at {redis_at}, the host at {host_at}");
        for i in 0..3 {
            let id = format!("s{i}");
            assert!(
                charge(&limiter, &budget, &id, "search.list").await.granted,
                "{case}: search {i}"
            );
        }
        let denied = charge(&limiter, &budget, "s3", "search.list").await;
        assert!(!denied.granted, "{case}: the fourth search");
        assert_eq!(denied.denied_by.as_deref(), Some("search"), "{case}");
        let (now, used) = used(&limiter, &budget).await;
        assert_eq!(used["search"], 3, "{case}: {used:?}");
        let wait = i64::try_from(denied.retry_after.expect("a retry-after").as_micros())
            .expect("a wait in range");
        assert!(
            (next_midnight - now..=next_midnight - redis_at).contains(&wait),
            "{case}: retry after {wait} µs, status read at {now}, next midnight {next_midnight}"
        );
    }
}

macro_rules! on_both_clocks {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn embedded() {
                super::$scenario(super::embedded_at(0)).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                let start = crate::common::redis_server::unix_us("2026-11-23T20:00:00Z");
                super::$scenario(super::redis_at(start).await).await;
            }
        }
    )*};
}

on_both_clocks!(
    the_upstream_day_turns_at_pacific_midnight,
    a_day_is_23_or_25_hours_across_daylight_saving,
);

// The calendar day through the binary: its clock moved with faketime (Debian's
// libfaketime), a Redis's with the shim, each set to the same instant.

/// Through the binary: 95 searches at 23:59:50 Pacific fill the search bucket, the
/// 96th waits exactly until midnight, and after midnight the day starts empty; the
/// days of the daylight-saving changes are 23 and 25 hours.
fn the_upstream_day_through_the_binary(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::empty(), redis);
    h.costs(GRANULAR);
    let before = "2026-11-24T07:59:50Z";
    h.at_time(before)
        .args(["budget", "charge", "search.list", "--count", "95", "--json"])
        .run();
    let ran = h
        .at_time(before)
        .args(["budget", "charge", "search.list", "--json"])
        .status(75)
        .run();
    let denied = ran.json();
    assert_eq!(denied["denied_by"], "search", "{denied}");
    let wait = denied["retry_after_s"].as_f64().expect("a retry-after");
    assert!(wait > 8.0 && wait <= 10.0, "the time to midnight: {denied}");
    // The main bucket lost nothing to it.
    h.at_time(before)
        .args(["budget", "charge", "videos.list", "--json"])
        .run();

    let ran = h
        .at_time("2026-11-24T08:00:02Z")
        .args(["budget", "--json"])
        .run();
    let after = buckets(&ran.json());
    assert_eq!(after["search"]["used"], 0, "a new day: {after:?}");
    assert_eq!(after["budget"]["used"], 0, "a new day: {after:?}");

    // Earlier days, on a Redis whose clock is moved back: the entries of 2026-11-24
    // are still kept (25 hours, to be counted again under another costs file), and
    // the status rightly says they come from its future.
    h.allow_stderr("clock (TIME) went back");
    for (at, length) in [
        ("2026-03-08T20:00:00Z", 82_800.0),
        ("2026-11-01T20:00:00Z", 90_000.0),
    ] {
        let ran = h.at_time(at).args(["budget", "--json"]).run();
        let budget = ran.json();
        assert_eq!(budget["window_s"], length, "{at}: {budget}");
        assert_eq!(buckets(&budget)["search"]["window_s"], length, "{at}");
    }
}

on_both_limiters!(the_upstream_day_through_the_binary @ "2026-11-24T07:59:50Z");

/// Redis restarted without persistence loses every bucket's window; the host's next
/// run replays its ledger into each of them, so each bucket again holds what the
/// upstream billed in it.
#[test]
fn a_lost_window_is_restored_in_every_bucket() {
    let mut server = RedisServer::start();
    let h = granular(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    let run = |server: &RedisServer| {
        let ran = h
            .cmd()
            .redis(server)
            .args(["run", "--region", "US", "--region", "GB"])
            .allow_stderr("the window is not the one this host charged into")
            .run();
        ran.stderr
    };
    let used = |server: &RedisServer| -> BTreeMap<String, u64> {
        let ran = h.bare().redis(server).args(["budget", "--json"]).run();
        buckets(&ran.json())
            .into_iter()
            .map(|(name, b)| (name, b["used"].as_u64().expect("used")))
            .collect()
    };
    run(&server);
    assert_eq!(h.fake.billed()["search"], 4);
    assert_eq!(used(&server), h.fake.billed());

    server.restart();
    let log = run(&server);
    assert!(log.contains("Redis lost it"), "{log}");
    assert_eq!(
        used(&server),
        h.fake.billed(),
        "every bucket holds what the upstream billed in it again"
    );
}

/// Scheduled runs stop at each bucket's ceiling; `--reserve` may go on to its quota.
fn each_bucket_has_its_own_ceiling_and_reserve(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::empty(), redis);
    h.costs(GRANULAR);
    let charge = |args: &[&str], status: i32| {
        h.bare()
            .args(["budget", "charge", "search.list", "--json"])
            .args(args)
            .status(status)
            .run()
            .json()
    };
    charge(&["--count", "95"], 0);
    let denied = charge(&[], 75);
    assert_eq!(denied["policy"], Value::from("search"), "{denied}");
    charge(&["--count", "5", "--reserve"], 0);
    let denied = charge(&["--reserve"], 75);
    assert_eq!(denied["used"], 100, "{denied}");
    // The main bucket's ceiling is untouched by all of it.
    let budget = h.budget();
    assert_eq!(budget["used"], 0, "{budget}");
    assert_eq!(budget["remaining"], 9500, "{budget}");
}

on_both_limiters!(each_bucket_has_its_own_ceiling_and_reserve);

/// docs/metrics.md: the cron heartbeat of a run of 8 regions over three buckets in use
/// says what is left of each, by name after the main bucket's, as `run --json`'s
/// `remaining_by_bucket` has them (no figure adds two buckets together), within 160
/// characters.
#[test]
fn the_heartbeat_names_what_is_left_of_each_bucket() {
    let h = granular(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.bare()
        .args(["budget", "charge", "videos.batchGetStats", "--count", "3"])
        .run();
    let (ran, calls) = h.run(&["run", "--json"]);
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    assert!(count(&calls, "search.list") > 0 && count(&calls, "videos.list") > 0);
    let left = &report["remaining_by_bucket"];
    assert_eq!(left["stats"], 9497, "{report}");
    assert_eq!(report["remaining"], left["budget"], "{report}");
    let said = format!(
        "{} left, search {}, stats 9497",
        left["budget"], left["search"]
    );
    let summary = ran
        .stderr
        .lines()
        .find(|l| l.contains(" complete in "))
        .unwrap_or_else(|| panic!("no summary line: {}", ran.stderr));
    let message = summary.split_once(" INFO ").map_or(summary, |(_, m)| m);
    assert!(message.contains(&said), "{message}");
    assert!(message.chars().count() <= 160, "{message}");
}
