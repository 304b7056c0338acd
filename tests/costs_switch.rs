//! Switching the costs file (docs/budget.md, "When the costs file changes"): the window
//! keeps every entry with its method and calls, and counts them again as if the new file
//! had been in force all along, on both limiters: a method that moves to another bucket
//! takes its entries with it, a cost that changes counts them at the new cost, a window
//! that becomes the upstream's day counts only that day's, a `[[limit]]` and a `[[bucket]]`
//! of one name never share state, and an upstream block stays with the methods it stopped.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::harness::{Harness, REGIONS};
use crate::common::upstream::{Billing, Call, FakeUpstream};
use crate::common::{Costs, Ran, RedisServer, contains, lacks};
use crate::on_both_limiters;

/// The shipped cost files.
const DEFAULT: &str = include_str!("../quota-costs.toml");
const GRANULAR: &str = include_str!("../quota-costs.granular.toml");

/// What the warning of a switch names: the fingerprint of the file the window was
/// charged under.
fn fingerprint(text: &str) -> String {
    trendsync::config::parse_costs(&trendsync::config::SourceText {
        name: "costs.toml".into(),
        text,
    })
    .expect("a valid costs file")
    .fingerprint()
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

/// The `[[limit]]` `name` of `budget --json`.
fn limit<'a>(budget: &'a Value, name: &str) -> &'a Value {
    budget["limits"]
        .as_array()
        .expect("limits is an array")
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no limit {name}: {budget}"))
}

fn charge(h: &Harness<'_>, method: &str) -> Value {
    h.bare()
        .args(["budget", "charge", method, "--json"])
        .run()
        .json()
}

/// Three searches under the default file; the granular file counts them in its own
/// `search` bucket, 1 each, and none in the main bucket, and grants a fourth; back
/// under the default file, within the limit's 10 minutes, the main bucket and the
/// `search` limit count 100 each, 400 in all.
fn searches_follow_their_method_across_a_switch_and_back(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::empty(), redis);
    h.costs(DEFAULT);
    for _ in 0..3 {
        charge(&h, "search.list");
    }
    let before = h.budget();
    assert_eq!(before["used"], 300, "{before}");
    assert_eq!(limit(&before, "search")["used"], 300, "{before}");

    h.costs(GRANULAR);
    // The first command under the other file names both files' fingerprints.
    let warned = format!(
        "fingerprint {}, and this host's costs have fingerprint {}",
        fingerprint(DEFAULT),
        fingerprint(GRANULAR)
    );
    h.allow_stderr("were counted again at this host's costs");
    let budget = h
        .stderr(contains(warned.as_str()))
        .bare()
        .args(["budget", "--json"])
        .run()
        .json();
    let by_name = buckets(&budget);
    assert_eq!(by_name["search"]["used"], 3, "{budget}");
    assert_eq!(by_name["budget"]["used"], 0, "{budget}");
    assert_eq!(
        by_name["budget"]["by_method"].get("search.list"),
        None,
        "{budget}"
    );
    assert_eq!(by_name["search"]["by_method"]["search.list"], 3, "{budget}");
    let granted = charge(&h, "search.list");
    assert_eq!(granted["granted"], true, "{granted}");
    assert_eq!(buckets(&h.budget())["search"]["used"], 4);

    h.costs(DEFAULT);
    let back = h.budget();
    assert_eq!(back["used"], 400, "{back}");
    assert_eq!(back["by_method"]["search.list"], 400, "{back}");
    assert_eq!(limit(&back, "search")["used"], 400, "{back}");
}

/// The `[[limit]]` `search` of the default file and the `[[bucket]]` `search` of a
/// file that has both shapes at once keep apart: each counts by its own rules.
fn a_limit_and_a_bucket_of_one_name_keep_apart(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::empty(), redis);
    h.costs(DEFAULT);
    charge(&h, "search.list");
    charge(&h, "search.list");
    h.costs(GRANULAR);
    h.allow_stderr("were counted again at this host's costs");
    charge(&h, "search.list");
    h.costs(DEFAULT);
    let budget = h.budget();
    // Three searches at 100, in the limit and in the main bucket alike: the
    // granular bucket's 1-unit entries were not read as the limit's.
    assert_eq!(limit(&budget, "search")["used"], 300, "{budget}");
    assert_eq!(budget["used"], 300, "{budget}");
    if let Some(server) = redis {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("trendsync:{key1}:*search*")
            .query(&mut server.connection())
            .expect("KEYS");
        assert!(
            keys.iter()
                .any(|k| k.starts_with("trendsync:{key1}:limit:search")),
            "the limit's keys say it is a limit: {keys:?}"
        );
    }
}

fn fetched_every_chart(calls: &[Call]) -> bool {
    let shorts: Vec<String> = calls.iter().map(|c| c.short()).collect();
    REGIONS
        .iter()
        .all(|r| shorts.contains(&format!("{r} p1")) && shorts.contains(&format!("{r} p2")))
}

fn count(calls: &[Call], method: &str) -> usize {
    calls.iter().filter(|c| c.method == method).count()
}

/// The 8 shipped regions, each with its two chart pages and a search.
fn regions_with_a_search() -> String {
    let mut text = String::from("[defaults]\npages = 2\n");
    for (i, code) in REGIONS.iter().enumerate() {
        text.push_str(&format!(
            "\n[[region]]\ncode = \"{code}\"\noffset = {i}\n\n[[region.search]]\nname = \"fresh\"\norder = \"viewCount\"\npublished_within = \"24h\"\n"
        ));
    }
    text
}

/// The upstream refuses a search under the granular file, which blocks the `search`
/// bucket; under the default file, where search.list is in the main bucket, a run
/// still makes no search and fetches every chart: the block stays with search.list,
/// and only with it.
fn a_block_stays_with_its_methods_across_a_switch(redis: Option<&RedisServer>) {
    let mut h = Harness::with(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        redis,
    );
    h.costs(GRANULAR).regions(&regions_with_a_search());
    h.fake.spend("search", 100);
    // The upstream refused the bucket before this budget counted its quota: measured.
    h.expect_stderr("quota is spent")
        .expect_stderr("when this budget had counted 1 units of its quota 100")
        .expect_ended("upstream_quota_exhausted");
    let (ran, first) = h.status(75).run(&["run", "--json", "--concurrency", "1"]);
    assert_eq!(count(&first, "search.list"), 1, "{}", ran.stdout);
    assert!(fetched_every_chart(&first));

    h.costs(DEFAULT);
    h.allow_stderr("were counted again at this host's costs");
    // The stop names what the block covers, search.list, not the whole main bucket,
    // and `bucket` the bucket of the refused charge.
    h.expect_stderr("the upstream said earlier that the key's quota is spent")
        .expect_ended("upstream_quota_exhausted")
        .stderr(contains("search.list is blocked until"))
        .stderr(lacks("the budget is blocked"));
    let (ran, calls) = h.status(75).run(&["run", "--json"]);
    let report = ran.json();
    assert_eq!(report["status"], "upstream_quota_exhausted", "{report}");
    assert_eq!(report["bucket"], "budget", "{report}");
    assert_eq!(count(&calls, "search.list"), 0, "{calls:?}");
    assert!(fetched_every_chart(&calls), "{calls:?}");
    // The main bucket counts every chart page of both runs, and the one search at
    // today's cost.
    let budget = h.budget();
    let pages = count(&first, "videos.list") + count(&calls, "videos.list");
    assert_eq!(budget["by_method"]["videos.list"], pages, "{budget}");
    assert_eq!(budget["by_method"]["search.list"], 100, "{budget}");
}

on_both_limiters!(
    searches_follow_their_method_across_a_switch_and_back,
    a_limit_and_a_bucket_of_one_name_keep_apart,
    a_block_stays_with_its_methods_across_a_switch,
);

/// `budget charge videos.list --count COUNT --json` at time `at`.
fn charge_at(h: &Harness<'_>, at: &str, count: &str) -> Ran {
    h.at_time(at)
        .args([
            "budget",
            "charge",
            "videos.list",
            "--count",
            count,
            "--json",
        ])
        .run()
}

/// The main bucket's window changes from a sliding 24 h to the upstream's day with
/// entries on both sides of midnight in Los Angeles: the day counts its own, and the
/// sliding window, back again, all of them.
fn a_window_that_becomes_the_upstreams_day(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::empty(), redis);
    let sliding = Costs::new().cost("videos.list", 1).window("24h");
    let day = Costs::new()
        .cost("videos.list", 1)
        .window("day@America/Los_Angeles");
    h.costs(sliding.to_toml());
    // 23:59 and 00:00:30 Pacific (PST, UTC-8).
    charge_at(&h, "2026-11-24T07:59:00Z", "2");
    charge_at(&h, "2026-11-24T08:00:30Z", "3");
    h.allow_stderr("were counted again at this host's costs");

    h.costs(day.to_toml());
    let budget = h
        .at_time("2026-11-24T08:01:00Z")
        .args(["budget", "--json"])
        .run()
        .json();
    assert_eq!(budget["used"], 3, "only the new day's: {budget}");
    charge_at(&h, "2026-11-24T08:01:30Z", "1");

    h.costs(sliding.to_toml());
    let budget = h
        .at_time("2026-11-24T08:02:00Z")
        .args(["budget", "--json"])
        .run()
        .json();
    assert_eq!(budget["used"], 6, "every entry of the last 24 h: {budget}");
}

on_both_limiters!(a_window_that_becomes_the_upstreams_day @ "2026-11-24T07:59:00Z");

/// A window longer than the 25 hours every entry is kept at least: its entries are kept
/// while it holds them, so a switch 30 hours after a charge counts that charge again,
/// after a charge in between that dropped what was no longer kept.
fn a_window_longer_than_a_day_keeps_its_entries_through_a_switch(redis: Option<&RedisServer>) {
    let mut h = Harness::with(FakeUpstream::empty(), redis);
    let before = Costs::new().cost("videos.list", 1).window("48h");
    let after = Costs::new().cost("videos.list", 2).window("48h");
    h.costs(before.to_toml());
    charge_at(&h, "2026-11-20T00:00:00Z", "5");
    let later = charge_at(&h, "2026-11-21T06:00:00Z", "1").json();
    assert_eq!(later["used"], 6, "the window holds both charges: {later}");
    h.allow_stderr("were counted again at this host's costs");

    h.costs(after.to_toml());
    let budget = h
        .at_time("2026-11-21T06:01:00Z")
        .args(["budget", "--json"])
        .run()
        .json();
    assert_eq!(
        budget["used"], 12,
        "6 calls at 2 units, the 30-hour-old ones too: {budget}"
    );
}

on_both_limiters!(a_window_longer_than_a_day_keeps_its_entries_through_a_switch @ "2026-11-20T00:00:00Z");
