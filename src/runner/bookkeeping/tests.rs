use super::slot_start;

/// `floor((t - offset) / period) * period + offset`, the offset taken modulo the
/// period: a run a minute before its region's offset is still in the previous slot.
#[test]
fn a_slot_starts_at_the_regions_offset_in_its_period() {
    let hour: u32 = 3600;
    let h = i64::from(hour);
    // 2026-11-28T14:00:00Z
    let t = 1_795_874_400;
    assert_eq!(slot_start(t, hour, 0), t);
    assert_eq!(slot_start(t + 3599, hour, 0), t);
    assert_eq!(slot_start(t + 7 * 60, hour, 7 * 60), t + 7 * 60);
    assert_eq!(slot_start(t + 6 * 60, hour, 7 * 60), t + 7 * 60 - h);
    // An offset past the period is taken modulo it: minute 7 of 4-second slots is 0.
    assert_eq!(slot_start(t + 5, 4, 7 * 60), t + 4);
    // Before 1970 too: a floor, not a truncation.
    assert_eq!(slot_start(-1, hour, 0), -h);
    assert_eq!(slot_start(-1, 0, 0), -1, "a period of 0 is taken as 1 s");
}
