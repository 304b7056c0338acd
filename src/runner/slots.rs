//! A run's claims on the fleet's slots (docs/commands.md, "Several hosts"): after the
//! local region lock, each region's slot is claimed on the limiter's clock; a slot
//! another host fetched makes the region `done_elsewhere`; a live lease of another run
//! is waited for, up to a bound the log names; the run's leases are renewed by one
//! task while it fetches; and each slot is finished with its region's status once the
//! region's phases are over, a lease lost by then making the region `done_elsewhere`.
//!
//! The slots are kept by the Redis limiter; the run sees them through [`SlotGate`], so
//! that these decisions are tested against a gate in the process. With no gate (the
//! embedded limiter) nothing here happens and a run is as it always was.

mod limiter_gate;
mod sink;

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::{JoinHandle, JoinSet};

use super::outcome::{RegionReport, Status};
use super::run::Run;
use crate::config::{Region, slot_schedule};
use crate::error::chain;
use crate::output::human;
use crate::quota::{Claim, Finish, Holder, LimiterError, SlotRef};
use crate::store::{LeasedSlot, SlotState};

/// One request to the slots' keeper under way.
pub type GateCall<'a, T> = Pin<Box<dyn Future<Output = Result<T, LimiterError>> + Send + 'a>>;

/// What keeps the fleet's slots: the Redis limiter (docs/commands.md, "Several
/// hosts"). Each method is one request, never retried here.
pub trait SlotGate: Send + Sync {
    /// The keeper's clock (Redis `TIME`), in microseconds: slots are named by it.
    fn now_us(&self) -> GateCall<'_, i64>;

    /// Claims `slot` for this host's run with a lease of `lease`; a new token is
    /// above `floor_token`, the largest this database has recorded.
    fn claim<'a>(
        &'a self,
        slot: &'a SlotRef,
        host: &'a str,
        run_id: &'a str,
        lease: Duration,
        floor_token: i64,
    ) -> GateCall<'a, Claim>;

    /// Extends the lease under `token`; false when it is no longer this run's.
    fn renew<'a>(&'a self, slot: &'a SlotRef, token: i64, lease: Duration) -> GateCall<'a, bool>;

    /// Records how the region's fetch of `slot` ended (a region status's word).
    fn finish<'a>(
        &'a self,
        slot: &'a SlotRef,
        token: i64,
        host: &'a str,
        run_id: &'a str,
        outcome: &'a str,
    ) -> GateCall<'a, Finish>;
}

/// How long a run waits between two looks at a slot another run holds: a sixth of
/// the lease, from a tenth of a second to five seconds.
pub(crate) fn slot_poll(lease: Duration) -> Duration {
    (lease / 6).clamp(Duration::from_millis(100), Duration::from_secs(5))
}

/// A slot this run holds.
#[derive(Debug, Clone)]
pub(super) struct Lease {
    pub(super) slot: SlotRef,
    pub(super) token: i64,
    /// A renewal found the lease another run's: the region makes no further calls.
    pub(super) lost: bool,
}

impl Lease {
    /// What the store keeps of it with each fetch of the slot.
    pub(super) fn leased(&self) -> LeasedSlot {
        LeasedSlot {
            slot_start: self.slot.start_s,
            slot_secs: self.slot.secs,
            token: self.token,
        }
    }
}

/// What claiming a region's slot came to.
#[derive(Debug)]
enum Claimed {
    /// The slot is this run's: fetch it.
    Leased(Lease),
    /// Another host fetched it, or holds it still: nothing to fetch; why, in words.
    Elsewhere {
        why: String,
        done_at_us: Option<i64>,
    },
    /// The keeper could not say: fetch without a lease, as while the limiter is down.
    Unleased(String),
    /// This host fetched it already, in an earlier run (a run started again by hand
    /// within the slot): fetch it again, as a single host always did, without a lease;
    /// the slot's record keeps the first fetch, and the sink the first object.
    Again(String),
}

/// No bucket or method: the run's stops of every call, which end a wait for a slot.
const EVERY_CALL: &str = "";

/// A slot's time, as the logs say it.
fn slot_time(slot: &SlotRef) -> String {
    human::timestamp(slot.start_s.saturating_mul(1_000_000))
}

/// Who holds or held a slot, as the logs say it.
fn who(h: &Holder) -> String {
    format!("host {} (run {}, token {})", h.host, h.run_id, h.token)
}

impl Run {
    /// The gate the run claims its slots through: the one a test gave, else the
    /// limiter's when it keeps slots (Redis), else none.
    pub(super) fn gate(&self) -> Option<&dyn SlotGate> {
        match &self.gate {
            Some(gate) => Some(gate.as_ref()),
            None => limiter_gate::of(self.meter.limiter()),
        }
    }

    /// The lease this run holds on `region`'s slot, if any.
    pub(super) fn lease_of(&self, region: &str) -> Option<Lease> {
        self.leases.lock().ok()?.get(region).cloned()
    }

    /// Whether the run lost `region`'s lease to another run while fetching it.
    pub(super) fn lease_lost(&self, region: &str) -> bool {
        self.lease_of(region).is_some_and(|l| l.lost)
    }

    /// Claims the slot of every region still going, all at once (a wait for one does
    /// not hold up the others); a region whose slot is done elsewhere ends
    /// `done_elsewhere`. With no gate, the regions as they were.
    pub(super) async fn claim_slots(
        self: &Arc<Self>,
        reports: Vec<(Region, RegionReport)>,
    ) -> Vec<(Region, RegionReport)> {
        let Some(gate) = self.gate() else {
            return reports;
        };
        let now_us = match gate.now_us().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(
                    run_id = %self.settings.run_id,
                    "reading the limiter's clock to name the regions' slots: {}; fetching without leases, as while the limiter is down",
                    chain(&e)
                );
                return reports;
            }
        };
        let floor = self.record.largest_slot_token().await.unwrap_or_else(|e| {
            // The keeper's epoch alone keeps the tokens growing; the floor only guards
            // a keeper's clock set back.
            tracing::warn!(run_id = %self.settings.run_id, "{}; claiming with no floor", chain(&e));
            0
        });
        let now_s = now_us.div_euclid(1_000_000);
        let mut tasks = JoinSet::new();
        for (i, (region, report)) in reports.iter().enumerate() {
            if !report.going() {
                continue;
            }
            let (secs, offset_s) = slot_schedule(region);
            let slot = SlotRef::at(&region.code, now_s, secs, offset_s);
            let run = Arc::clone(self);
            tasks.spawn(async move {
                let claimed = run.claim_one(&slot, floor, now_us).await;
                (i, slot, claimed)
            });
        }
        let mut reports = reports;
        // The largest token given, noted once for all the claims (one commit).
        let mut largest: Option<i64> = None;
        while let Some(joined) = tasks.join_next().await {
            let Ok((i, slot, claimed)) = joined else {
                // A panic in a claim: the region is fetched as if the keeper were down.
                continue;
            };
            let Some((_, report)) = reports.get_mut(i) else {
                continue;
            };
            match claimed {
                Claimed::Leased(lease) => {
                    largest = largest.max(Some(lease.token));
                    if let Ok(mut leases) = self.leases.lock() {
                        leases.insert(report.code.clone(), lease);
                    }
                }
                Claimed::Elsewhere { why, done_at_us } => {
                    tracing::info!(region = %report.code, "{why}");
                    report.status = Status::DoneElsewhere;
                    report.note = Some(why);
                    if let Some(at_us) = done_at_us {
                        self.fetched_elsewhere(&report.code, at_us).await;
                    }
                }
                Claimed::Again(why) => tracing::info!(region = %report.code, "{why}"),
                Claimed::Unleased(reason) => {
                    tracing::warn!(
                        region = %report.code,
                        "claiming slot {} of region {}: {reason}; fetching it without a lease, as while the limiter is down",
                        slot_time(&slot),
                        report.code
                    );
                }
            }
        }
        // The floor of later claims, even should no page be stored under it.
        if let Some(token) = largest
            && let Err(e) = self.record.note_slot_token(token).await
        {
            tracing::warn!(run_id = %self.settings.run_id, "{}", chain(&e));
        }
        reports
    }

    /// Records that another host fetched `region`'s slot at `at_us`, so that the
    /// region counts as fresh here too (docs/commands.md, `status`).
    async fn fetched_elsewhere(&self, region: &str, at_us: i64) {
        if let Err(e) = self
            .record
            .done_elsewhere(region, at_us.div_euclid(1_000_000))
            .await
        {
            tracing::warn!(region = %region, "{}", chain(&e));
        }
    }

    /// Claims one slot, waiting while another run holds a live lease on it: at most
    /// 1.5 leases from `now_us`, and never past the slot's end.
    async fn claim_one(&self, slot: &SlotRef, floor: i64, now_us: i64) -> Claimed {
        let Some(gate) = self.gate() else {
            return Claimed::Unleased("no slot keeper".to_owned());
        };
        let (host, run_id, lease) = (
            &self.settings.host,
            &self.settings.run_id,
            self.settings.lease,
        );
        let wait = i64::try_from(lease.as_micros().saturating_mul(3) / 2).unwrap_or(i64::MAX);
        let bound_us = now_us
            .saturating_add(wait)
            .min(slot.end_s().saturating_mul(1_000_000));
        // The live holder last seen, while this run waits for it.
        let mut waited_for: Option<Holder> = None;
        loop {
            // A signal (or a fatal stop) ends the wait: the run makes no further call.
            if self.stops.stopped(EVERY_CALL) {
                return Claimed::Unleased("the run is stopping".to_owned());
            }
            let answer = match gate.claim(slot, host, run_id, lease, floor).await {
                Ok(a) => a,
                Err(e) => return Claimed::Unleased(chain(&e)),
            };
            match answer {
                Claim::Claimed { token, took_over } => {
                    if let Some(lapsed) = took_over {
                        tracing::warn!(
                            region = %slot.region,
                            "region {}: took slot {} over from {}, whose lease lapsed with no done mark",
                            slot.region,
                            slot_time(slot),
                            who(&lapsed)
                        );
                    }
                    return Claimed::Leased(Lease {
                        slot: slot.clone(),
                        token,
                        lost: false,
                    });
                }
                Claim::Done { by, at_us } if by.host == *host && by.run_id != *run_id => {
                    return Claimed::Again(format!(
                        "region {}: slot {} was fetched by this host, {}, at {}; fetching it again without a lease",
                        slot.region,
                        slot_time(slot),
                        who(&by),
                        human::timestamp(at_us)
                    ));
                }
                Claim::Done { by, at_us } => {
                    return Claimed::Elsewhere {
                        why: format!(
                            "region {}: slot {} was fetched by {} at {}; nothing to fetch here",
                            slot.region,
                            slot_time(slot),
                            who(&by),
                            human::timestamp(at_us)
                        ),
                        done_at_us: Some(at_us),
                    };
                }
                // The slot ended while its holder still held it: left to it.
                Claim::Ended if waited_for.is_some() => {
                    return Claimed::Elsewhere {
                        why: format!(
                            "region {}: slot {} was still held by {} at its end, {}; left to it",
                            slot.region,
                            slot_time(slot),
                            waited_for.as_ref().map_or_else(String::new, who),
                            human::timestamp(slot.end_s().saturating_mul(1_000_000))
                        ),
                        done_at_us: None,
                    };
                }
                Claim::Ended => {
                    return Claimed::Unleased(format!(
                        "the slot ended at {} on the limiter's clock",
                        human::timestamp(slot.end_s().saturating_mul(1_000_000))
                    ));
                }
                Claim::Held { holder, until_us } => {
                    if waited_for.is_none() {
                        tracing::info!(
                            region = %slot.region,
                            "region {}: slot {} is held by {} until {}; waiting for it to be done or to lapse, until {} at most (1.5 leases, within the slot)",
                            slot.region,
                            slot_time(slot),
                            who(&holder),
                            human::timestamp(until_us),
                            human::timestamp(bound_us)
                        );
                    }
                    waited_for = Some(holder.clone());
                    let now = match gate.now_us().await {
                        Ok(t) => t,
                        Err(e) => return Claimed::Unleased(chain(&e)),
                    };
                    if now >= bound_us {
                        return Claimed::Elsewhere {
                            why: format!(
                                "region {}: slot {} is still held by {} at {}, the end of this run's wait; left to it",
                                slot.region,
                                slot_time(slot),
                                who(&holder),
                                human::timestamp(bound_us)
                            ),
                            done_at_us: None,
                        };
                    }
                    tokio::select! {
                        () = tokio::time::sleep(self.settings.slot_poll) => {}
                        () = self.stops.woken(EVERY_CALL, EVERY_CALL) => {}
                    }
                }
            }
        }
    }

    /// Finishes every slot the run holds with its region's status, once the regions'
    /// phases are over. A slot whose lease was lost makes its region
    /// `done_elsewhere`, saying to whom; its fetches are not current. The finishes go
    /// all at once, as the claims do, and the fetches' states are written in one
    /// transaction: a run of 8 regions waits for about one round trip and one commit
    /// here, not 8 of each (BENCHMARKS.md, "The cost of the slot leases").
    pub(super) async fn finish_slots(
        self: &Arc<Self>,
        mut reports: Vec<(Region, RegionReport)>,
    ) -> Vec<(Region, RegionReport)> {
        if self.gate().is_none() {
            return reports;
        }
        let leases: BTreeMap<String, Lease> = match self.leases.lock() {
            Ok(leases) => leases.clone(),
            Err(_) => return reports,
        };
        let mut tasks = JoinSet::new();
        for (i, (_, report)) in reports.iter().enumerate() {
            let Some(lease) = leases.get(&report.code).cloned() else {
                continue;
            };
            // A region the run never reached is missed for the reason the run
            // stopped, which the slot's record names (docs/commands.md).
            let outcome = match report.status {
                Status::NotAttempted => self.stops.status().as_str(),
                status => status.as_str(),
            };
            let run = Arc::clone(self);
            tasks.spawn(async move {
                let finished = run
                    .gate()?
                    .finish(
                        &lease.slot,
                        lease.token,
                        &run.settings.host,
                        &run.settings.run_id,
                        outcome,
                    )
                    .await;
                Some((i, lease, outcome, finished))
            });
        }
        let mut finished = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            // A panic in a finish: the region's lease is left to lapse, and its pages,
            // still `fetching`, are not current.
            if let Ok(Some(one)) = joined {
                finished.push(one);
            }
        }
        // In the regions' order, as the run reports them.
        finished.sort_by_key(|(i, ..)| *i);
        let mut marks = Vec::new();
        for (i, lease, outcome, finished) in finished {
            let Some((_, report)) = reports.get_mut(i) else {
                continue;
            };
            let state = match finished {
                Ok(Finish::Recorded) => {
                    if report.status == Status::Complete {
                        self.queue_for_sink(&lease.slot, lease.token).await;
                    }
                    SlotState::Current
                }
                Ok(Finish::Fenced { by }) => {
                    let to = by.as_ref().map_or_else(
                        || {
                            "another run (the slot's record no longer names this run's token)"
                                .to_owned()
                        },
                        who,
                    );
                    let message = format!(
                        "the lease on slot {} (token {}) was lost to {to} before this run finished it; this run's pages of the slot are not current",
                        slot_time(&lease.slot),
                        lease.token
                    );
                    tracing::warn!(region = %report.code, "{message}");
                    report.status = Status::DoneElsewhere;
                    report.error = Some(message);
                    SlotState::Fenced
                }
                // The keeper did not answer: nobody else could claim the slot through
                // it either, so what this run fetched is the slot's (kept current
                // rather than lost), as a run while the limiter is down keeps its pages.
                Err(e) => {
                    tracing::warn!(
                        region = %report.code,
                        "finishing slot {} of region {} as {outcome}: {}; its pages are kept as current",
                        slot_time(&lease.slot),
                        report.code,
                        chain(&e)
                    );
                    SlotState::Current
                }
            };
            marks.push((report.code.clone(), state));
        }
        if let Err(e) = self.record.slot_states(marks).await {
            tracing::error!(run_id = %self.settings.run_id, "{}", chain(&e));
        }
        reports
    }

    /// Queues a slot finished complete for the sink, when the run has one. The sink's
    /// outbox (`Store::queue_for_sink`) is where this call lands.
    async fn queue_for_sink(&self, slot: &SlotRef, token: i64) {
        sink::queue_for_sink(self, slot, token).await;
    }
}

/// Renews every lease the run holds, as it holds them, every third of a lease until
/// the handle is aborted; a lease another run took is marked lost, and its region
/// makes no further calls. None with no gate.
pub(super) fn renew_leases(run: &Arc<Run>) -> Option<JoinHandle<()>> {
    run.gate()?;
    let run = Arc::clone(run);
    let every = (run.settings.lease / 3).max(Duration::from_millis(10));
    Some(tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            run.renew_once().await;
        }
    }))
}

impl Run {
    /// One round of renewals: every lease not yet lost.
    pub(super) async fn renew_once(&self) {
        let Some(gate) = self.gate() else {
            return;
        };
        let held: Vec<Lease> = match self.leases.lock() {
            Ok(l) => l.values().filter(|l| !l.lost).cloned().collect(),
            Err(_) => return,
        };
        for lease in held {
            match gate
                .renew(&lease.slot, lease.token, self.settings.lease)
                .await
            {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(
                        region = %lease.slot.region,
                        "region {}: the lease on slot {} (token {}) is no longer this run's; no further calls for it",
                        lease.slot.region,
                        slot_time(&lease.slot),
                        lease.token
                    );
                    if let Ok(mut leases) = self.leases.lock()
                        && let Some(l) = leases.get_mut(&lease.slot.region)
                    {
                        l.lost = true;
                    }
                }
                // Tried again at the next round; a lease that lapses meanwhile is
                // found at the finish.
                Err(e) => tracing::warn!(
                    region = %lease.slot.region,
                    "renewing the lease on slot {} of region {}: {}",
                    slot_time(&lease.slot),
                    lease.slot.region,
                    chain(&e)
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests;
