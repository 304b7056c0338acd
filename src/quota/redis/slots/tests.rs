//! The slot math as a table, with no server: the period, the offset, instants before
//! 1970, and the ranges coverage reads.

use super::*;

/// 2026-11-28T14:00:00Z.
const T: i64 = 1_795_874_400;

#[test]
fn an_hourly_slot_starts_on_the_hour_at_offset_zero() {
    for (now, start) in [
        (T, T),
        (T + 1, T),
        (T + 3599, T),
        (T + 3600, T + 3600),
        (T - 1, T - 3600),
    ] {
        let s = SlotRef::at("US", now, 3600, 0);
        assert_eq!((s.start_s, s.end_s()), (start, start + 3600), "at {now}");
        assert_eq!(s.region, "US");
    }
}

#[test]
fn an_offset_moves_every_start_and_is_taken_modulo_the_period() {
    // Minute 7 of each hour.
    for (now, start) in [
        (T + 420, T + 420),
        (T + 419, T - 3600 + 420),
        (T + 4019, T + 420),
        (T + 4020, T + 4020),
    ] {
        assert_eq!(SlotRef::at("US", now, 3600, 420).start_s, start, "at {now}");
    }
    // An offset of a whole period or more is the same as its remainder.
    assert_eq!(
        SlotRef::at("US", T + 5, 3600, 3600 + 420),
        SlotRef::at("US", T + 5, 3600, 420)
    );
    assert_eq!(
        SlotRef::at("US", T + 5, 3600, 3600),
        SlotRef::at("US", T + 5, 3600, 0)
    );
}

#[test]
fn short_periods_and_offsets_larger_than_them() {
    // 4 s slots at offset 7 min: 420 % 4 = 0, so they start on multiples of 4.
    for now in T..T + 20 {
        let s = SlotRef::at("GB", now, 4, 420);
        assert_eq!(s.start_s % 4, 0);
        assert!(s.start_s <= now && now < s.end_s(), "{now} in {s:?}");
    }
    // 7 s slots at offset 10 s: starts at 3 mod 7.
    let s = SlotRef::at("GB", 100, 7, 10);
    assert_eq!((s.start_s, s.end_s()), (94, 101));
    assert_eq!(SlotRef::at("GB", 101, 7, 10).start_s, 101);
    // One-second slots: every second is its own.
    assert_eq!(SlotRef::at("GB", T + 3, 1, 0).start_s, T + 3);
    // A period of 0 is taken as a second rather than dividing by zero.
    assert_eq!(
        SlotRef::at("GB", T + 3, 0, 5),
        SlotRef::at("GB", T + 3, 1, 0)
    );
}

#[test]
fn a_day_long_slot_and_instants_before_1970_round_down() {
    assert_eq!(SlotRef::at("US", 86_399, 86_400, 0).start_s, 0);
    assert_eq!(SlotRef::at("US", -1, 86_400, 0).start_s, -86_400);
    assert_eq!(SlotRef::at("US", -1, 3600, 60).start_s, -3600 + 60);
}

#[test]
fn consecutive_slots_tile_time() {
    let mut s = SlotRef::at("US", T + 17, 900, 300);
    for _ in 0..10 {
        let n = s.next();
        assert_eq!(n.start_s, s.end_s());
        assert_eq!(SlotRef::at("US", n.start_s, 900, 300), n);
        assert_eq!(SlotRef::at("US", n.start_s - 1, 900, 300), s);
        s = n;
    }
}

#[test]
fn the_starts_coverage_reads_are_those_within_the_range() {
    // [T, T + 3 h) at offset 0: three slots.
    assert_eq!(
        slot_starts("US", 3600, 0, T, T + 3 * 3600),
        vec![T, T + 3600, T + 7200]
    );
    // A range starting mid-slot leaves out the slot it starts in.
    assert_eq!(
        slot_starts("US", 3600, 0, T + 1, T + 3 * 3600),
        vec![T + 3600, T + 7200]
    );
    // With an offset.
    assert_eq!(slot_starts("US", 3600, 600, T, T + 3600), vec![T + 600]);
    // An empty or inverted range.
    assert!(slot_starts("US", 3600, 0, T, T).is_empty());
    assert!(slot_starts("US", 3600, 0, T + 10, T).is_empty());
}

#[test]
fn every_region_status_that_is_not_complete_maps_to_a_reason() {
    use crate::region_status::RegionStatus;
    let want = |s: RegionStatus| match s {
        RegionStatus::BudgetExhausted => MissedReason::Budget,
        RegionStatus::UpstreamQuotaExhausted | RegionStatus::Failed | RegionStatus::ClockSkew => {
            MissedReason::Upstream
        }
        RegionStatus::LimiterDown => MissedReason::LimiterDown,
        _ => MissedReason::Interrupted,
    };
    for s in RegionStatus::ALL {
        assert_eq!(MissedReason::of_outcome(s.as_str()), want(s), "{s:?}");
    }
    let words: Vec<&str> = MissedReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        words,
        [
            "no_host_ran",
            "budget",
            "upstream",
            "limiter_down",
            "interrupted",
            "taken_over_late"
        ]
    );
}

#[test]
fn a_lease_found_lapsed_after_its_slot_reads_as_taken_over_late() {
    let held = |until_ms| Stored {
        state: "held".into(),
        token: Some(9),
        host: Some("a".into()),
        run: Some("r".into()),
        until_ms: Some(until_ms),
        at_ms: None,
        reason: None,
        detail: None,
        took_over_from: None,
    };
    let end_s = T + 3600;
    let end_us = end_s * 1_000_000;
    // Lapsed within the slot: still held (someone may take it over).
    assert!(matches!(
        held(T * 1000).state(end_s, end_us - 1),
        Some(SlotState::Held { .. })
    ));
    // Live past the end (a long fetch): held.
    assert!(matches!(
        held(end_s * 1000 + 5_000).state(end_s, end_us),
        Some(SlotState::Held { .. })
    ));
    // Lapsed, and the slot is over.
    assert_eq!(
        held(T * 1000).state(end_s, end_us),
        Some(SlotState::Missed {
            reason: "taken_over_late".into(),
            host: Some("a".into()),
            detail: None
        })
    );
}
