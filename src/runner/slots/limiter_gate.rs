//! Which limiter keeps the fleet's slots: the Redis one, through its `redis_now_us`,
//! `claim_slot`, `renew_slot` and `finish_slot` (docs/commands.md, "Several hosts");
//! the embedded one keeps none, so a run on it claims nothing.
//!
//! The Redis limiter's side is `impl SlotGate for RedisLimiter` in this file, each
//! method boxing the limiter's own call (`Box::pin(self.claim_slot(slot, host,
//! run_id, lease, floor_token))`, and so on), and `Limiter::Redis(redis) =>
//! Some(redis)` in [`of`]. This build's limiters have no slot calls, so none keeps
//! slots yet and every run is as before.

use super::SlotGate;
use crate::quota::Limiter;

/// The limiter's slot keeper, when it has one.
pub(super) fn of(limiter: &Limiter) -> Option<&dyn SlotGate> {
    match limiter {
        Limiter::Redis(_) | Limiter::Embedded(_) | Limiter::Down { .. } => None,
    }
}
