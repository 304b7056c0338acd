//! Which limiter keeps the fleet's slots: the Redis one, through its `redis_now_us`,
//! `claim_slot`, `renew_slot` and `finish_slot` (docs/commands.md, "Several hosts");
//! the embedded one keeps none, so a run on it claims nothing, and neither does a run
//! whose limiter is down from its start.

use std::time::Duration;

use super::{GateCall, SlotGate};
use crate::quota::{Claim, Finish, Limiter, RedisLimiter, SlotRef};

/// The limiter's slot keeper, when it has one.
pub(super) fn of(limiter: &Limiter) -> Option<&dyn SlotGate> {
    match limiter {
        Limiter::Redis(redis) => Some(redis),
        Limiter::Embedded(_) | Limiter::Down { .. } => None,
    }
}

impl SlotGate for RedisLimiter {
    fn now_us(&self) -> GateCall<'_, i64> {
        Box::pin(self.redis_now_us())
    }

    fn claim<'a>(
        &'a self,
        slot: &'a SlotRef,
        host: &'a str,
        run_id: &'a str,
        lease: Duration,
        floor_token: i64,
    ) -> GateCall<'a, Claim> {
        Box::pin(self.claim_slot(slot, host, run_id, lease, floor_token))
    }

    fn renew<'a>(&'a self, slot: &'a SlotRef, token: i64, lease: Duration) -> GateCall<'a, bool> {
        Box::pin(self.renew_slot(slot, token, lease))
    }

    fn finish<'a>(
        &'a self,
        slot: &'a SlotRef,
        token: i64,
        host: &'a str,
        run_id: &'a str,
        outcome: &'a str,
    ) -> GateCall<'a, Finish> {
        Box::pin(self.finish_slot(slot, token, host, run_id, outcome))
    }
}
