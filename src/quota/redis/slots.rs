//! The fleet's slots in Redis, beside the budget (docs/budget.md, "A fleet: slot
//! leases"): which period of a region's schedule an instant falls in ([`SlotRef`]), and
//! the leases and records `slots.lua` keeps of each one: who holds a slot, who fetched
//! it, or why it was missed. Every decision is the script's, on Redis's clock, so that
//! hosts agree; this file sends the operations and reads the records back.

use std::sync::LazyLock;
use std::time::Duration;

use redis::{Script, ScriptInvocation};
use serde::Deserialize;

use super::RedisLimiter;
use crate::quota::{LimiterError, Reason};

const SLOTS_LUA: &str = include_str!("slots.lua");

/// One script for every operation: the first argument says which.
static SLOTS: LazyLock<Script> = LazyLock::new(|| Script::new(SLOTS_LUA));

/// How long a slot's record is kept after the slot's end: 36 days, so that coverage can
/// read 35 days back whatever the time of day (docs/budget.md).
pub const RECORD_KEPT: Duration = Duration::from_secs(36 * 86_400);

/// How many slots' records one read script call takes: a coverage of 35 days of
/// second-long slots is read in several calls, each well within what Lua's `unpack`
/// takes.
const READ_BATCH: usize = 1_000;

/// One period of a region's schedule at its offset: the unit that is leased, fetched
/// once, and counted by coverage. Its id is its start in Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SlotRef {
    pub region: String,
    /// The slot's start, seconds since the Unix epoch.
    pub start_s: i64,
    /// The slot's length (the region's `slot`), at least 1 s.
    pub secs: u32,
}

impl SlotRef {
    /// The slot of `region` that the instant `now_s` (seconds on the limiter's clock)
    /// falls in, for periods of `secs` seconds starting `offset_s` seconds into each
    /// (taken modulo the period): `start = floor((t - off) / period) * period + off`.
    /// A period of 0 is taken as 1 s.
    pub fn at(region: &str, now_s: i64, secs: u32, offset_s: u32) -> SlotRef {
        let secs = secs.max(1);
        let period = i64::from(secs);
        let off = i64::from(offset_s) % period;
        let start_s = now_s.saturating_sub(off).div_euclid(period) * period + off;
        SlotRef {
            region: region.to_owned(),
            start_s,
            secs,
        }
    }

    /// When the slot ends (and the next begins), seconds since the Unix epoch.
    pub fn end_s(&self) -> i64 {
        self.start_s.saturating_add(i64::from(self.secs))
    }

    /// The slot after this one.
    pub fn next(&self) -> SlotRef {
        SlotRef {
            region: self.region.clone(),
            start_s: self.end_s(),
            secs: self.secs,
        }
    }

    fn end_ms(&self) -> i64 {
        self.end_s().saturating_mul(1000)
    }
}

/// Who holds or held a slot: a run of a host, with its lease's fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub run_id: String,
    pub token: i64,
}

/// What claiming a slot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller holds the slot now, under `token`; `took_over` is the holder whose
    /// lease had lapsed with no done mark, if there was one.
    Claimed {
        token: i64,
        took_over: Option<Holder>,
    },
    /// Another run holds a live lease, until `until_us` (Redis's clock) unless renewed.
    Held { holder: Holder, until_us: i64 },
    /// The slot was fetched, by `by`, at `at_us`: the caller skips it (`done_elsewhere`).
    Done { by: Holder, at_us: i64 },
    /// Redis's clock is past the slot's end: it can no longer be fetched.
    Ended,
}

/// What finishing a slot did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finish {
    /// The slot's record says what the caller said.
    Recorded,
    /// The caller's token is no longer the slot's: its lease lapsed and `by` took the
    /// slot over (or the slot was marked missed after its end, `by` then `None`).
    /// Nothing of the caller's fetch is the slot's.
    Fenced { by: Option<Holder> },
}

/// A slot's record, as coverage reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRecord {
    pub start_s: i64,
    pub state: SlotState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotState {
    /// Fetched, by `by`, done at `at_us`.
    Fetched { by: Holder, at_us: i64 },
    /// Missed: `reason` is one of [`MissedReason`]'s words (or another build's).
    Missed {
        reason: String,
        host: Option<String>,
        detail: Option<String>,
    },
    /// Leased, not yet done, until `until_us`.
    Held { holder: Holder, until_us: i64 },
}

/// What a slot's record says of it at `now_us` (Redis's clock), once the slot has
/// ended: the one reading that `status --coverage` and the missed-slot count share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict<'a> {
    Fetched(&'a Holder),
    /// Missed, for `reason`; a lease that lapsed with no done mark is
    /// [`MissedReason::TakenOverLate`], its holder the host.
    Missed {
        reason: &'a str,
        host: Option<&'a str>,
        detail: Option<&'a str>,
    },
    /// A lease still live: the fetch goes on, not (yet) a miss.
    Live,
}

impl SlotState {
    pub fn verdict(&self, now_us: i64) -> Verdict<'_> {
        match self {
            SlotState::Fetched { by, .. } => Verdict::Fetched(by),
            SlotState::Missed {
                reason,
                host,
                detail,
            } => Verdict::Missed {
                reason,
                host: host.as_deref(),
                detail: detail.as_deref(),
            },
            SlotState::Held { until_us, .. } if *until_us >= now_us => Verdict::Live,
            SlotState::Held { holder, .. } => Verdict::Missed {
                reason: MissedReason::TakenOverLate.as_str(),
                host: Some(&holder.host),
                detail: None,
            },
        }
    }
}

/// Why a slot was missed, as the records, the JSON and the metrics' labels say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MissedReason {
    /// No host left a record of the slot before it ended.
    NoHostRan,
    Budget,
    Upstream,
    LimiterDown,
    Interrupted,
    /// A lease lapsed with no done mark and nobody took the slot over before its end.
    TakenOverLate,
}

impl MissedReason {
    pub const ALL: [MissedReason; 6] = [
        MissedReason::NoHostRan,
        MissedReason::Budget,
        MissedReason::Upstream,
        MissedReason::LimiterDown,
        MissedReason::Interrupted,
        MissedReason::TakenOverLate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            MissedReason::NoHostRan => "no_host_ran",
            MissedReason::Budget => "budget",
            MissedReason::Upstream => "upstream",
            MissedReason::LimiterDown => "limiter_down",
            MissedReason::Interrupted => "interrupted",
            MissedReason::TakenOverLate => "taken_over_late",
        }
    }

    /// The reason a region's status (its word, docs/commands.md) gives a slot that
    /// was not fetched: a budget stop is `budget`; the upstream's refusal, a failure or
    /// a clock it contradicted is `upstream`; a run stopped early, or any status that
    /// says the region's fetch did not get to its end, is `interrupted`.
    pub fn of_outcome(outcome: &str) -> MissedReason {
        match outcome {
            "budget_exhausted" => MissedReason::Budget,
            "upstream_quota_exhausted" | "failed" | "clock_skew" => MissedReason::Upstream,
            "limiter_down" => MissedReason::LimiterDown,
            _ => MissedReason::Interrupted,
        }
    }
}

/// The outcome `finish_slot` takes for a fetched slot.
pub const COMPLETE: &str = "complete";

/// A record as `slots.lua` writes it (its header lists the forms).
#[derive(Debug, Deserialize)]
struct Stored {
    state: String,
    token: Option<i64>,
    host: Option<String>,
    run: Option<String>,
    until_ms: Option<i64>,
    at_ms: Option<i64>,
    reason: Option<String>,
    detail: Option<String>,
    took_over_from: Option<StoredHolder>,
}

#[derive(Debug, Deserialize)]
struct StoredHolder {
    host: String,
    run: String,
    token: i64,
}

impl From<StoredHolder> for Holder {
    fn from(h: StoredHolder) -> Holder {
        Holder {
            host: h.host,
            run_id: h.run,
            token: h.token,
        }
    }
}

impl Stored {
    fn holder(&self) -> Option<Holder> {
        Some(Holder {
            host: self.host.clone().unwrap_or_default(),
            run_id: self.run.clone().unwrap_or_default(),
            token: self.token?,
        })
    }

    /// The record as coverage reads it at `now_us`: a lease that lapsed after its
    /// slot's end is missed (`taken_over_late`), as the next claim would record it.
    fn state(self, slot_end_s: i64, now_us: i64) -> Option<SlotState> {
        let until_us = self.until_ms.map(|ms| ms.saturating_mul(1000));
        Some(match self.state.as_str() {
            "done" => SlotState::Fetched {
                by: self.holder()?,
                at_us: self.at_ms?.saturating_mul(1000),
            },
            "held" => {
                let until_us = until_us?;
                if until_us < now_us && now_us >= slot_end_s.saturating_mul(1_000_000) {
                    SlotState::Missed {
                        reason: MissedReason::TakenOverLate.as_str().to_owned(),
                        host: self.host,
                        detail: None,
                    }
                } else {
                    SlotState::Held {
                        holder: self.holder()?,
                        until_us,
                    }
                }
            }
            "missed" => SlotState::Missed {
                reason: self.reason?,
                host: self.host,
                detail: self.detail,
            },
            _ => return None,
        })
    }
}

/// One operation's reply: its code, Redis's clock, a token, and the record written
/// or found ('' for none).
type Reply = (String, i64, i64, String);

impl RedisLimiter {
    fn slot_bad(&self, doing: &'static str, what: String) -> LimiterError {
        LimiterError::Failed {
            endpoint: self.endpoint.clone(),
            doing,
            source: Reason(what).into(),
        }
    }

    /// The record in a reply, read; `None` for none.
    fn slot_record(&self, doing: &'static str, json: &str) -> Result<Option<Stored>, LimiterError> {
        if json.is_empty() {
            return Ok(None);
        }
        serde_json::from_str(json).map(Some).map_err(|e| {
            self.slot_bad(
                doing,
                format!("the slot record {json:?} is unreadable: {e}"),
            )
        })
    }

    /// The script's call for `op` on `slot`: its record's key, the slot's end and how
    /// long the record is kept after it.
    fn slot_op(&self, slot: &SlotRef, op: &str) -> ScriptInvocation<'static> {
        let mut inv = SLOTS.prepare_invoke();
        inv.key(self.keys.slot(&slot.region, slot.start_s))
            .key(self.keys.fence())
            .key(self.keys.epoch())
            .arg(op)
            .arg(slot.end_ms())
            .arg(millis(RECORD_KEPT));
        inv
    }

    async fn send_slot_op(
        &self,
        doing: &'static str,
        inv: ScriptInvocation<'static>,
    ) -> Result<Reply, LimiterError> {
        let inv = &inv;
        self.through_failover(doing, |mut conn| async move {
            inv.invoke_async(&mut conn).await
        })
        .await
    }

    /// Redis's clock (`TIME` on the node that holds the budget's keys, which the slot
    /// operations decide by), microseconds since the Unix epoch.
    pub async fn redis_now_us(&self) -> Result<i64, LimiterError> {
        let mut inv = SLOTS.prepare_invoke();
        inv.key(self.keys.fence()).arg("time");
        let inv = &inv;
        let (now_us,): (i64,) = self
            .through_failover("reading the limiter's clock", |mut conn| async move {
                inv.invoke_async(&mut conn).await
            })
            .await?;
        Ok(now_us)
    }

    /// Claims `slot` for this run of `host` with a lease of `lease` (docs/budget.md, "A
    /// fleet: slot leases"): when it has no record, a lapsed lease, or a missed record
    /// (a retry within the slot), under a new fencing token larger than every token
    /// before it and than `floor_token` (the largest this host ever recorded). A claim
    /// sent again by the same run gets back its own lease.
    pub async fn claim_slot(
        &self,
        slot: &SlotRef,
        host: &str,
        run_id: &str,
        lease: Duration,
        floor_token: i64,
    ) -> Result<Claim, LimiterError> {
        const DOING: &str = "claiming a slot";
        let mut inv = self.slot_op(slot, "claim");
        inv.arg(host)
            .arg(run_id)
            .arg(millis(lease).max(1))
            .arg(floor_token.max(0));
        let (code, _now_us, token, json) = self.send_slot_op(DOING, inv).await?;
        let record = self.slot_record(DOING, &json)?;
        let bad = || self.slot_bad(DOING, format!("unexpected reply {code:?} {json:?}"));
        Ok(match (code.as_str(), record) {
            ("claimed", Some(r)) => Claim::Claimed {
                token,
                took_over: r.took_over_from.map(Holder::from),
            },
            ("held", Some(r)) => Claim::Held {
                holder: r.holder().ok_or_else(bad)?,
                until_us: r.until_ms.ok_or_else(bad)?.saturating_mul(1000),
            },
            ("done", Some(r)) => Claim::Done {
                by: r.holder().ok_or_else(bad)?,
                at_us: r.at_ms.ok_or_else(bad)?.saturating_mul(1000),
            },
            ("ended", _) => Claim::Ended,
            _ => return Err(bad()),
        })
    }

    /// Renews this holder's lease on `slot` for `lease` from now; `false` when the
    /// slot is no longer its (the token is another's, or the slot is done or
    /// missed). A record Redis lost is written again for the token: nobody claimed the
    /// slot since.
    pub async fn renew_slot(
        &self,
        slot: &SlotRef,
        token: i64,
        lease: Duration,
    ) -> Result<bool, LimiterError> {
        const DOING: &str = "renewing a slot's lease";
        let mut inv = self.slot_op(slot, "renew");
        inv.arg(token).arg(millis(lease).max(1));
        let (code, ..) = self.send_slot_op(DOING, inv).await?;
        match code.as_str() {
            "renewed" => Ok(true),
            "lost" => Ok(false),
            _ => Err(self.slot_bad(DOING, format!("unexpected reply {code:?}"))),
        }
    }

    /// Records how this holder's fetch of `slot` ended: `outcome` [`COMPLETE`] marks it
    /// done (fetched by `host`, `run_id`); any other region status marks it missed with
    /// the reason [`MissedReason::of_outcome`] gives. Only while `token` is the slot's
    /// (or Redis lost the record and nobody claimed it since); otherwise the fetch is
    /// fenced off, and the answer names who holds the slot now.
    pub async fn finish_slot(
        &self,
        slot: &SlotRef,
        token: i64,
        host: &str,
        run_id: &str,
        outcome: &str,
    ) -> Result<Finish, LimiterError> {
        const DOING: &str = "recording a slot's outcome";
        let mut inv = self.slot_op(slot, "finish");
        inv.arg(token)
            .arg(host)
            .arg(run_id)
            .arg(outcome)
            .arg(MissedReason::of_outcome(outcome).as_str())
            .arg(format!("the region ended {outcome}"));
        let (code, _now_us, _token, json) = self.send_slot_op(DOING, inv).await?;
        match code.as_str() {
            "recorded" => Ok(Finish::Recorded),
            "fenced" => {
                let record = self.slot_record(DOING, &json)?;
                let by = record.and_then(|r| match r.state.as_str() {
                    "held" | "done" => r.holder(),
                    _ => None,
                });
                Ok(Finish::Fenced { by })
            }
            _ => Err(self.slot_bad(DOING, format!("unexpected reply {code:?} {json:?}"))),
        }
    }

    /// Records `slot` as missed for `reason` (one of [`MissedReason`]'s words) by
    /// `host`, unless it has a lease or a done mark: a miss never overwrites either.
    pub async fn miss_slot(
        &self,
        slot: &SlotRef,
        reason: &str,
        host: &str,
        detail: Option<&str>,
    ) -> Result<(), LimiterError> {
        const DOING: &str = "recording a missed slot";
        let mut inv = self.slot_op(slot, "miss");
        inv.arg(reason).arg(host).arg(detail.unwrap_or(""));
        let (code, ..) = self.send_slot_op(DOING, inv).await?;
        match code.as_str() {
            "missed" | "kept" => Ok(()),
            _ => Err(self.slot_bad(DOING, format!("unexpected reply {code:?}"))),
        }
    }

    /// The records of `region`'s slots (of `secs` seconds at `offset_s`) that start in
    /// `[from_s, to_s)`, in order; a slot with no record is left out. A lease that
    /// lapsed after its slot's end reads as missed, `taken_over_late`.
    pub async fn slot_records(
        &self,
        region: &str,
        secs: u32,
        offset_s: u32,
        from_s: i64,
        to_s: i64,
    ) -> Result<Vec<SlotRecord>, LimiterError> {
        const DOING: &str = "reading slot records";
        let starts = slot_starts(region, secs, offset_s, from_s, to_s);
        let secs = secs.max(1);
        let mut records = Vec::new();
        for batch in starts.chunks(READ_BATCH) {
            let mut inv = SLOTS.prepare_invoke();
            for &start in batch {
                inv.key(self.keys.slot(region, start));
            }
            inv.arg("read");
            let inv = &inv;
            let (now_us, values): (i64, Vec<Option<String>>) = self
                .through_failover(DOING, |mut conn| async move {
                    inv.invoke_async(&mut conn).await
                })
                .await?;
            for (&start_s, value) in batch.iter().zip(values) {
                let Some(json) = value else { continue };
                let Some(stored) = self.slot_record(DOING, &json)? else {
                    continue;
                };
                let end_s = start_s.saturating_add(i64::from(secs));
                if let Some(state) = stored.state(end_s, now_us) {
                    records.push(SlotRecord { start_s, state });
                }
            }
        }
        Ok(records)
    }
}

/// The starts of `region`'s slots that fall in `[from_s, to_s)`.
pub fn slot_starts(region: &str, secs: u32, offset_s: u32, from_s: i64, to_s: i64) -> Vec<i64> {
    let mut slot = SlotRef::at(region, from_s, secs, offset_s);
    if slot.start_s < from_s {
        slot = slot.next();
    }
    let mut starts = Vec::new();
    while slot.start_s < to_s {
        starts.push(slot.start_s);
        slot = slot.next();
    }
    starts
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests;
