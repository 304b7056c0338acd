//! Each region's slots (docs/commands.md, "Several hosts"): the period of its schedule
//! and the offset into each period its slots start at.

use super::Region;

/// `region`'s slot length and offset, in seconds: the length is its `slot`, the
/// offset its crontab minute (taken modulo the period where slots are used).
pub(crate) fn slot_schedule(region: &Region) -> (u32, u32) {
    (region.slot_secs, region.offset * 60)
}
