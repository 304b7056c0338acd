//! Which records count as misses for the metrics, as a table.

use super::*;
use crate::quota::slots::{Holder, SlotState};

/// 2026-11-28T14:00:00Z.
const T: i64 = 1_795_874_400;
const H: i64 = 3600;

fn current() -> SlotRef {
    SlotRef::at("US", T + 30, 3600, 0)
}

fn fetched(start_s: i64) -> SlotRecord {
    SlotRecord {
        start_s,
        state: SlotState::Fetched {
            by: Holder {
                host: "a".into(),
                run_id: "r".into(),
                token: 1,
            },
            at_us: 0,
        },
    }
}

fn missed(start_s: i64, reason: &str) -> SlotRecord {
    SlotRecord {
        start_s,
        state: SlotState::Missed {
            reason: reason.into(),
            host: None,
            detail: None,
        },
    }
}

fn starts(misses: &[SlotMiss]) -> Vec<(i64, &str)> {
    misses
        .iter()
        .map(|m| ((m.slot_start - T) / H, m.reason.as_str()))
        .collect()
}

#[test]
fn missed_records_and_gaps_after_the_first_record_are_misses() {
    let records = [
        fetched(T - 6 * H),
        missed(T - 4 * H, "budget"),
        fetched(T - 3 * H),
        // T - 5 h, T - 2 h and T - 1 h: nobody left a record.
    ];
    let got = missed_among(&current(), T - 48 * H, &records, (T + 30) * 1_000_000);
    assert_eq!(
        starts(&got),
        [
            (-5, "no_host_ran"),
            (-4, "budget"),
            (-2, "no_host_ran"),
            (-1, "no_host_ran")
        ]
    );
    assert!(got.iter().all(|m| m.region == "US"));
}

#[test]
fn a_new_fleet_with_no_record_yet_has_missed_nothing() {
    assert!(missed_among(&current(), T - 48 * H, &[], (T + 30) * 1_000_000).is_empty());
}

#[test]
fn a_lease_live_past_its_slot_is_not_missed_yet_and_a_lapsed_one_is() {
    let held = |until_s: i64| SlotRecord {
        start_s: T - H,
        state: SlotState::Held {
            holder: Holder {
                host: "a".into(),
                run_id: "r".into(),
                token: 1,
            },
            until_us: until_s * 1_000_000,
        },
    };
    let now_us = (T + 30) * 1_000_000;
    assert!(missed_among(&current(), T - 48 * H, &[held(T + 60)], now_us).is_empty());
    assert_eq!(
        starts(&missed_among(
            &current(),
            T - 48 * H,
            &[held(T + 10)],
            now_us
        )),
        [(-1, "taken_over_late")]
    );
}
