//! What the limiter bench charges, and how much: the calls measured per phase, what a
//! saturated day is, and the budget every charge goes to (the deployment forms charge
//! it too).

use std::collections::BTreeMap;
use std::time::Duration;

use trendsync::quota::{BUDGET_POLICY, Bucket, Budget};

/// Measured calls per phase (the saturated-day phases excepted), in `BLOCKS` blocks,
/// after `WARM_UP` calls per phase that are not measured.
pub(crate) const ITERATIONS: usize = 20_000;
pub(crate) const BLOCKS: usize = 100;
pub(crate) const WARM_UP: usize = 2_000;

/// A saturated day as the limiter sees it: 500 one-unit and 90 hundred-unit calls.
pub(crate) const DAY_SMALL_CALLS: usize = 500;
pub(crate) const DAY_LARGE_CALLS: usize = 90;
/// Each block of a saturated-day phase starts from a fresh day and measures this many
/// charges on top of it, so every sample sees 590 to 690 entries.
pub(crate) const DAY_SAMPLES: usize = 100;

/// The budget the memory of a saturated day is measured in.
pub(crate) const BUDGET_KEY: &str = "bench";
pub(crate) const SMALL: &str = "videos.list";
pub(crate) const LARGE: &str = "search.list";
/// Large enough that no phase is ever denied: the bench measures granted charges.
pub(crate) const HUGE: u64 = 1_000_000_000_000;
pub(crate) const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The budget every product phase charges: no narrower limits, so a charge touches
/// the budget's own window only (one sorted set and its total). Which Redis keys it
/// lands in is the limiter's choice (`RedisLimiter::connect`'s budget key).
pub(crate) fn bench_budget() -> Budget {
    let main = Bucket {
        name: BUDGET_POLICY.to_owned(),
        quota: HUGE,
        ceiling: HUGE,
        window: DAY.into(),
        costs: BTreeMap::from([(SMALL.to_owned(), 1), (LARGE.to_owned(), 100)]),
    };
    Budget::new(BUDGET_KEY, main, Vec::new())
}

/// The method of the `i`th call of a saturated day: 90 hundred-unit calls spread
/// evenly among 500 one-unit calls.
pub(crate) fn day_method(i: usize) -> &'static str {
    let total = DAY_SMALL_CALLS + DAY_LARGE_CALLS;
    let large_before = |n: usize| n * DAY_LARGE_CALLS / total;
    if large_before(i + 1) > large_before(i) {
        LARGE
    } else {
        SMALL
    }
}
