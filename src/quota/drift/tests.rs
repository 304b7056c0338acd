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

fn bucket(window: &Window, costs: &BTreeMap<String, u64>) -> Bucket {
    Bucket {
        name: "search".to_owned(),
        quota: 100,
        ceiling: 95,
        window: window.clone(),
        costs: costs.clone(),
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

/// The embedded limiter records the first early refusal of a bucket and upstream day,
/// from the entries since that day's midnight whatever the bucket's window, and only
/// below the quota; a later refusal that day records nothing; a record goes a few
/// days after its day.
#[tokio::test]
async fn the_embedded_limiter_records_the_first_early_refusal_of_a_day() {
    use std::sync::Arc;

    use crate::clock::{Clock, ManualClock};
    use crate::quota::{Allowance, BUDGET_POLICY, Budget, EmbeddedLimiter, Limiter};

    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock::starting_at(at("2026-11-25T07:00:00Z")));
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open(&dir.path().join("t.db"), "key1", clock.clone(), None)
            .expect("the limiter"),
    );
    let main = Bucket {
        name: BUDGET_POLICY.to_owned(),
        quota: 10,
        ceiling: 10,
        window: Window::Sliding(Duration::from_secs(86_400)),
        costs: BTreeMap::from([("videos.list".to_owned(), 1)]),
    };
    let budget = Budget::new("key1", main, Vec::new());
    let charge = |id: &str, n: u64| {
        budget
            .charge(id, "videos.list", n, Allowance::Quota)
            .expect("a charge")
    };
    // 3 units the day before (23:00 Pacific), 4 after midnight (08:00 UTC).
    limiter.charge(&charge("a", 3)).await.expect("charged");
    clock.set(at("2026-11-25T09:00:00Z"));
    limiter.charge(&charge("b", 4)).await.expect("charged");
    let noted = limiter
        .note_upstream_refusal("budget", 10, clock.now())
        .await
        .expect("noted");
    assert_eq!(noted, Some(day("budget", NOV_25, 4)));
    // Later that day: already said.
    limiter.charge(&charge("c", 1)).await.expect("charged");
    let again = limiter
        .note_upstream_refusal("budget", 10, clock.now())
        .await
        .expect("noted");
    assert_eq!(again, None);
    assert_eq!(
        limiter.upstream_spent().await.expect("read"),
        [day("budget", NOV_25, 4)]
    );
    // The next day, at the quota: the upstream agrees with the count, nothing to say.
    clock.set(at("2026-11-26T09:00:00Z"));
    limiter.charge(&charge("d", 10)).await.expect("charged");
    let at_quota = limiter
        .note_upstream_refusal("budget", 10, clock.now())
        .await
        .expect("noted");
    assert_eq!(at_quota, None);
    // Five days on, the old record is gone once a new one is written.
    clock.set(at("2026-11-30T09:00:00Z"));
    let late = limiter
        .note_upstream_refusal("budget", 10, clock.now())
        .await
        .expect("noted");
    assert_eq!(late, Some(day("budget", "2026-11-30T08:00:00Z", 0)));
    assert_eq!(
        limiter.upstream_spent().await.expect("read"),
        [day("budget", "2026-11-30T08:00:00Z", 0)]
    );
}
