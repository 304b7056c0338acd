//! Each region's slots (docs/budget.md, "A fleet: slot leases"): the period of its
//! schedule and the offset into each period its slots start at.

use super::Region;

/// The slot length of every region until regions.toml says it.
// FLEET MERGE: the runner's half of the fleet brings `slot` to regions.toml
// (`[defaults]` and per region); this constant is the one place that stands in for it
// until then, and `slot_schedule` reads the region's own setting from then on.
pub(crate) const DEFAULT_SLOT_SECS: u32 = 3600;

/// `region`'s slot length and offset, in seconds: the offset is its crontab minute
/// (taken modulo the period where slots are used).
pub(crate) fn slot_schedule(region: &Region) -> (u32, u32) {
    (DEFAULT_SLOT_SECS, region.offset * 60)
}
