//! Unit tests of `quota/slots.rs`.

use super::*;

#[test]
fn a_slot_starts_at_the_last_multiple_of_its_period_past_the_offset() {
    // (now, secs, offset) -> start
    let cases: &[(i64, u32, u32, i64)] = &[
        (7200, 3600, 0, 7200),
        (7199, 3600, 0, 3600),
        (7200 + 419, 3600, 420, 3600 + 420),
        (7200 + 420, 3600, 420, 7200 + 420),
        // The offset is taken modulo the period: 7 minutes on 4 s slots is 0 past.
        (10, 4, 420, 8),
        // 7 minutes on 5-minute slots is 2 minutes past.
        (600, 300, 420, 420),
        (419, 300, 420, 120),
        // Before the epoch, still the floor.
        (-1, 3600, 0, -3600),
        (0, 1, 0, 0),
    ];
    for &(now, secs, offset, start) in cases {
        let slot = SlotRef::at("US", now, secs, offset);
        assert_eq!(
            slot.start_s, start,
            "now {now}, slot {secs}, offset {offset}"
        );
        assert!(
            slot.start_s <= now && now < slot.end_s(),
            "{slot:?} holds {now}"
        );
        assert_eq!(slot.end_s() - slot.start_s, i64::from(secs));
    }
}

#[test]
fn every_instant_of_a_slot_names_the_same_slot() {
    let first = SlotRef::at("GB", 1_764_316_800 + 7 * 60, 3600, 7 * 60);
    for t in first.start_s..first.end_s() {
        assert_eq!(SlotRef::at("GB", t, 3600, 7 * 60), first);
    }
    assert_ne!(SlotRef::at("GB", first.end_s(), 3600, 7 * 60), first);
}
