use std::collections::BTreeMap;
use std::time::Duration;

use super::*;

fn at(rfc3339: &str) -> Micros {
    let ts: jiff::Timestamp = rfc3339.parse().expect("an RFC 3339 time");
    Micros::new(ts.as_microsecond())
}

fn day(bucket: &str, midnight: &str, units: u64) -> SpentDay {
    SpentDay {
        bucket: bucket.to_owned(),
        day_us: at(midnight).as_i64(),
        units,
    }
}

/// Midnights in Los Angeles (PST, UTC-8) around 2026-11-25.
const NOV_23: &str = "2026-11-23T08:00:00Z";
const NOV_24: &str = "2026-11-24T08:00:00Z";
const NOV_25: &str = "2026-11-25T08:00:00Z";
/// The afternoon of 2026-11-25 in Los Angeles.
const NOW: &str = "2026-11-25T23:00:00Z";

fn search_costs() -> BTreeMap<String, u64> {
    BTreeMap::from([("search.list".to_owned(), 1)])
}

fn bucket<'a>(window: &'a Window, costs: &'a BTreeMap<String, u64>) -> BucketRef<'a> {
    BucketRef {
        name: "search",
        quota: 100,
        ceiling: 95,
        window,
        costs,
    }
}

#[test]
fn todays_figure_is_the_one_of_the_upstream_day_holding_now() {
    let days = [day("search", NOV_24, 40), day("budget", NOV_25, 7)];
    assert_eq!(spent_today(&days, "search", at(NOW)), None);
    assert_eq!(spent_today(&days, "budget", at(NOW)), Some(7));
    // 07:59 UTC on the 25th is still the 24th in Los Angeles.
    assert_eq!(
        spent_today(&days, "search", at("2026-11-25T07:59:59Z")),
        Some(40)
    );
}

#[test]
fn two_days_in_a_row_suggest_the_lower_figure_and_the_same_share_as_ceiling() {
    let window = upstream_day().expect("the bundled zone");
    let costs = search_costs();
    let b = bucket(&window, &costs);
    let days = [day("search", NOV_24, 62), day("search", NOV_25, 60)];
    let s = suggest(&days, &b, at(NOW)).expect("a suggestion");
    assert_eq!((s.quota, s.ceiling), (60, 57));
    assert_eq!(s.days, days);
    // Seen the next day, before that day was spent early: still the last two days.
    let tomorrow = at("2026-11-26T20:00:00Z");
    assert_eq!(suggest(&days, &b, tomorrow).map(|s| s.quota), Some(60));
    // Two days later, the pattern is old news.
    assert_eq!(suggest(&days, &b, at("2026-11-27T20:00:00Z")), None);
}

#[test]
fn no_suggestion_without_two_days_in_a_row() {
    let window = upstream_day().expect("the bundled zone");
    let costs = search_costs();
    let b = bucket(&window, &costs);
    assert_eq!(suggest(&[day("search", NOV_25, 60)], &b, at(NOW)), None);
    // A day between them.
    let gap = [day("search", NOV_23, 60), day("search", NOV_25, 60)];
    assert_eq!(suggest(&gap, &b, at(NOW)), None);
    // Another bucket's days.
    let other = [day("stats", NOV_24, 60), day("search", NOV_25, 60)];
    assert_eq!(suggest(&other, &b, at(NOW)), None);
}

#[test]
fn a_bucket_over_another_window_gets_its_figure_and_no_suggestion() {
    let costs = search_costs();
    let days = [day("search", NOV_24, 62), day("search", NOV_25, 60)];
    for window in [
        Window::Sliding(Duration::from_secs(86_400)),
        Window::Day(Zone::get("Europe/Paris").expect("a zone")),
    ] {
        let b = bucket(&window, &costs);
        assert_eq!(suggest(&days, &b, at(NOW)), None, "{window}");
        assert_eq!(spent_today(&days, "search", at(NOW)), Some(60));
    }
}

#[test]
fn across_the_change_to_standard_time_the_days_still_follow_each_other() {
    let window = upstream_day().expect("the bundled zone");
    let costs = search_costs();
    let b = bucket(&window, &costs);
    // 2026-11-01 is 25 hours long in Los Angeles: midnight PDT, then midnight PST.
    let days = [
        day("search", "2026-11-01T07:00:00Z", 70),
        day("search", "2026-11-02T08:00:00Z", 80),
    ];
    let s = suggest(&days, &b, at("2026-11-02T20:00:00Z")).expect("a suggestion");
    assert_eq!((s.quota, s.ceiling), (70, 66));
}
