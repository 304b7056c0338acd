//! Which limiter keeps the fleet's slots: the Redis one (its `claim_slot`,
//! `renew_slot`, `finish_slot` and `redis_now_us`), once it implements [`SlotGate`]
//! here; the embedded one keeps none, so a run on it claims nothing.

use super::SlotGate;
use crate::quota::Limiter;

/// The limiter's slot keeper, when it has one. This build's limiters keep no slots;
/// the Redis limiter's `impl SlotGate for RedisLimiter` belongs in this file, and
/// `Limiter::Redis(redis) => Some(redis)` here.
pub(super) fn of(limiter: &Limiter) -> Option<&dyn SlotGate> {
    match limiter {
        Limiter::Redis(_) | Limiter::Embedded(_) | Limiter::Down { .. } => None,
    }
}
