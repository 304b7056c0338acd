//! The upstream's `quotaExceeded` as a measurement (docs/budget.md, "When the upstream refuses").
//!
//! The upstream offers no call that reads what is left of a key's quota. When it
//! refuses a bucket's call while this budget has charged that bucket less than its
//! `quota` since the upstream's last midnight (America/Los_Angeles), the allowance was
//! spent beyond what this budget counted: another consumer of the key, or a quota
//! lower than configured. The limiter keeps, per bucket and upstream day, the units
//! charged to the bucket since that midnight at the first such answer
//! (`upstream_spent_at`), so that every host sees it; this module reads those records:
//! today's figure, and the quota and ceiling to configure once two days in a row were
//! spent early. The recording itself is each limiter's (`embedded.rs`,
//! `redis/upstream_spent.lua`), one atomic step beside its window.

use std::time::Duration;

use super::{Bucket, Window, Zone};
use crate::clock::Micros;

/// The zone whose midnight resets every bucket of the upstream (docs/budget.md, "Buckets").
pub(crate) const UPSTREAM_ZONE: &str = "America/Los_Angeles";

/// How long a day's record is kept after the day starts: the suggestion needs the
/// last two days; a few more cost nothing and show a pattern to whoever reads them.
pub const KEEP: Duration = Duration::from_secs(4 * 86_400);

/// The upstream's own day as a window: the calendar day of [`UPSTREAM_ZONE`]. `None`
/// only without a time-zone database, which the build bundles.
pub(crate) fn upstream_day() -> Option<Window> {
    Zone::get(UPSTREAM_ZONE).ok().map(Window::Day)
}

/// The units this budget had charged to `bucket` in one upstream day when the
/// upstream first refused that bucket's call that day, while the budget still counted
/// room below the bucket's quota.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpentDay {
    pub(crate) bucket: String,
    /// The upstream day's start: its midnight in [`UPSTREAM_ZONE`], microseconds since
    /// the Unix epoch.
    pub(crate) day_us: i64,
    pub(crate) units: u64,
}

/// The midnight that starts the upstream day holding `at`.
fn day_of(at: Micros) -> Option<i64> {
    Zone::get(UPSTREAM_ZONE)
        .ok()
        .map(|z| z.midnight(at.as_i64(), 0))
}

/// `bucket`'s figure for the upstream day holding `now` (the limiter's clock), if the
/// upstream refused it early that day.
pub(crate) fn spent_today(days: &[SpentDay], bucket: &str, now: Micros) -> Option<u64> {
    let today = day_of(now)?;
    days.iter()
        .find(|d| d.bucket == bucket && d.day_us == today)
        .map(|d| d.units)
}

/// What `budget` suggests configuring for a bucket the upstream spent early on two
/// days in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Suggestion {
    pub(crate) quota: u64,
    pub(crate) ceiling: u64,
    /// The two days, the earlier first, whose lower figure is the quota.
    pub(crate) days: [SpentDay; 2],
}

/// The quota and ceiling to configure for `bucket`, when the upstream spent it early on
/// the last two upstream days in a row that end today or yesterday (by `now`, the
/// limiter's clock): the quota is the lower of the two figures, the ceiling keeps the
/// bucket's configured share of its quota. Only for a bucket over the upstream's own
/// day: a bucket with another window (a sliding 24 h) may hold methods of several of
/// the upstream's pools, and its figure says how much of all of them together was
/// counted, not what any one pool allows.
pub(crate) fn suggest(days: &[SpentDay], bucket: &Bucket, now: Micros) -> Option<Suggestion> {
    let zone = bucket.window.zone().filter(|z| z.name() == UPSTREAM_ZONE)?;
    let mut own: Vec<&SpentDay> = days.iter().filter(|d| d.bucket == bucket.name).collect();
    own.sort_by_key(|d| d.day_us);
    let [.., earlier, later] = own.as_slice() else {
        return None;
    };
    let yesterday = zone.midnight(now.as_i64(), -1);
    if later.day_us < yesterday || zone.midnight(later.day_us, -1) != earlier.day_us {
        return None;
    }
    let quota = earlier.units.min(later.units);
    if quota >= bucket.quota {
        return None;
    }
    // The configured share of the quota, rounded down: never a ceiling above it.
    let ceiling = u64::try_from(
        u128::from(quota) * u128::from(bucket.ceiling) / u128::from(bucket.quota.max(1)),
    )
    .unwrap_or(quota)
    .min(quota);
    Some(Suggestion {
        quota,
        ceiling,
        days: [(*earlier).clone(), (*later).clone()],
    })
}

#[cfg(test)]
mod tests;
