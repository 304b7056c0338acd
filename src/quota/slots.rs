//! The fleet's slots (docs/commands.md, "Several hosts"): one period of a region's
//! schedule at its offset, named by its start in Unix seconds on the limiter's clock,
//! and the answers a claim on one, and its finish, can get. What keeps the records is
//! the Redis limiter's; this is the arithmetic and the words every side shares.

use serde::Serialize;

/// One slot of one region: `[start_s, start_s + secs)` on the limiter's clock.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SlotRef {
    pub region: String,
    /// The slot's id: its start, in Unix seconds.
    pub start_s: i64,
    /// The slot's length: the region's `slot` in seconds.
    pub secs: u32,
}

impl SlotRef {
    /// The slot of `region` that holds the instant `now_s`, for slots of `secs`
    /// seconds starting `offset_s` past each multiple of `secs` (the region's crontab
    /// minute in seconds; taken modulo the period, so an offset of 7 minutes on a slot
    /// of 4 seconds is 0 past). A period of 0 is taken as 1 second.
    pub fn at(region: &str, now_s: i64, secs: u32, offset_s: u32) -> SlotRef {
        let period = i64::from(secs.max(1));
        let off = i64::from(offset_s) % period;
        let start_s = (now_s - off).div_euclid(period) * period + off;
        SlotRef {
            region: region.to_owned(),
            start_s,
            secs: secs.max(1),
        }
    }

    /// The first second past the slot.
    pub fn end_s(&self) -> i64 {
        self.start_s.saturating_add(i64::from(self.secs))
    }
}

/// Who holds, or held, a slot: the host's name, its run, and the fencing token its
/// claim was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Holder {
    pub host: String,
    pub run_id: String,
    pub token: i64,
}

/// What a claim on a slot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The slot is this run's, under `token`; `took_over` is the holder whose lease
    /// lapsed with no done mark, when there was one.
    Claimed {
        token: i64,
        took_over: Option<Holder>,
    },
    /// Another run holds a live lease on it until `until_us` (the limiter's clock).
    Held { holder: Holder, until_us: i64 },
    /// Another run fetched it: the region is `done_elsewhere`.
    Done { by: Holder, at_us: i64 },
    /// The limiter's clock is past the slot's end: it can no longer be claimed.
    Ended,
}

/// What finishing a slot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The outcome is the slot's record.
    Recorded,
    /// The token is no longer the slot's: the lease was lost, to `by` when known.
    Fenced { by: Option<Holder> },
}

#[cfg(test)]
mod tests;
