//! Coverage as a table of records and times, with no server.

use super::*;
use crate::quota::slots::Holder;

/// 2026-11-28T14:00:00Z.
const T: i64 = 1_795_874_400;
const H: i64 = 3600;

fn us(s: i64) -> i64 {
    s * 1_000_000
}

fn fetched(start_s: i64, host: &str) -> SlotRecord {
    SlotRecord {
        start_s,
        state: SlotState::Fetched {
            by: Holder {
                host: host.into(),
                run_id: "r".into(),
                token: 1,
            },
            at_us: us(start_s + 60),
        },
    }
}

fn held(start_s: i64, until_s: i64) -> SlotRecord {
    SlotRecord {
        start_s,
        state: SlotState::Held {
            holder: Holder {
                host: "c".into(),
                run_id: "r".into(),
                token: 2,
            },
            until_us: us(until_s),
        },
    }
}

fn us_hourly() -> Schedule {
    Schedule {
        region: "US".into(),
        secs: 3600,
        offset_s: 0,
    }
}

#[test]
fn ended_slots_are_expected_each_fetched_or_missed_with_a_reason() {
    let missed = SlotRecord {
        start_s: T - 2 * H,
        state: SlotState::Missed {
            reason: "budget".into(),
            host: Some("b".into()),
            detail: Some("the region ended budget_exhausted".into()),
        },
    };
    let records = vec![
        fetched(T - 4 * H, "a"),
        fetched(T - 3 * H, "b"),
        missed,
        // T - 1 h: no record at all.
        held(T, T + 60),
    ];
    // Now: 14:00:30, within the current slot; since 10:00.
    let c = coverage(&[(us_hourly(), records)], T - 4 * H, us(T + 30));
    assert_eq!(c.since, "2026-11-28T10:00:00Z");
    assert_eq!(c.until, "2026-11-28T14:00:30Z");
    assert_eq!(c.missed, 2);
    let r = &c.regions[0];
    assert_eq!((r.expected, r.fetched, r.missed), (4, 2, 2));
    assert!(r.in_progress, "the current slot's lease is live");
    assert_eq!(r.hosts, BTreeMap::from([("a".into(), 1), ("b".into(), 1)]));
    assert_eq!(
        r.missed_slots,
        vec![
            MissedSlot {
                slot: "2026-11-28T12:00:00Z".into(),
                reason: "budget".into(),
                host: Some("b".into()),
                detail: Some("the region ended budget_exhausted".into()),
            },
            MissedSlot {
                slot: "2026-11-28T13:00:00Z".into(),
                reason: "no_host_ran".into(),
                host: None,
                detail: None,
            },
        ]
    );
}

#[test]
fn a_since_within_a_slot_starts_from_the_next_and_the_current_slot_is_not_expected() {
    let c = coverage(&[(us_hourly(), vec![])], T - 2 * H + 1, us(T + 3599));
    let r = &c.regions[0];
    // Only 13:00 began after 12:00:01 and has ended.
    assert_eq!((r.expected, r.missed), (1, 1));
    assert!(!r.in_progress);
}

#[test]
fn a_fetch_running_past_its_slots_end_is_in_progress_not_missed() {
    let c = coverage(
        &[(us_hourly(), vec![held(T - H, T + 100)])],
        T - H,
        us(T + 10),
    );
    let r = &c.regions[0];
    assert_eq!((r.expected, r.fetched, r.missed), (1, 0, 0));
    assert!(r.in_progress);
}

#[test]
fn each_region_at_its_own_offset_and_period() {
    let gb = Schedule {
        region: "GB".into(),
        secs: 900,
        offset_s: 5 * 60,
    };
    // Since 13:00 until 14:00:30: GB's quarter hours at :05 that ended are 13:05, 13:20
    // and 13:35 (13:50 runs to 14:05).
    let c = coverage(
        &[
            (us_hourly(), vec![fetched(T - H, "a")]),
            (gb, vec![fetched(T - H + 300, "b")]),
        ],
        T - H,
        us(T + 30),
    );
    assert_eq!(c.regions[0].expected, 1);
    assert_eq!(c.regions[0].missed, 0);
    assert_eq!((c.regions[1].expected, c.regions[1].fetched), (3, 1));
    assert_eq!(c.regions[1].slot_secs, 900);
    assert_eq!(c.missed, 2);
}
