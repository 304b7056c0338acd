//! Where a run stands on stopping, shared by its region tasks: one stop per bucket,
//! which ends every task's calls of that bucket as soon as it (or the upstream, for
//! it) says no (docs/budget.md, "Buckets"), and one that ends every call (a fatal error, a
//! signal). The run reports the most serious stop it met (docs/commands.md's
//! order), the first of equals.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::outcome::{Status, Stop};
use crate::clock::Clock;

/// Which calls a stop ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Scope {
    /// Every call of the run.
    Every,
    /// The calls charged to this bucket; the others go on.
    Bucket(String),
    /// The calls of this method: the upstream's block of a bucket stays with its methods
    /// when a later costs file puts them in another bucket (docs/budget.md, "When the costs
    /// file changes").
    Method(String),
}

/// The stops a run has met, and the signal that wakes whoever waits on one.
#[derive(Debug)]
pub(super) struct Stops {
    met: Mutex<Met>,
    /// Changed at every new stop, so that a region waiting out a retry's backoff
    /// wakes to look; `true` once the calls in flight are to be given up.
    abandon: watch::Sender<bool>,
    /// For the debug line each stop leaves.
    run_id: String,
    clock: Arc<dyn Clock>,
}

#[derive(Debug, Default)]
struct Met {
    /// The stop the run reports: the first of all, unless a more serious clean stop
    /// came after a clean stop ([`outranks`]).
    reported: Option<Stop>,
    /// A stop of every call: a fatal error or a signal.
    all: Option<Stop>,
    /// Per bucket, the stop of the calls charged to it (spent, blocked by the
    /// upstream, or the limiter down and the method denied).
    buckets: BTreeMap<String, Stop>,
    /// The first bucket whose calls stopped, or whose block stopped a method's
    /// (`bucket` in `run --json`).
    first_bucket: Option<String>,
    /// Per method, the stop of its calls alone (a block of the methods of a bucket
    /// charged under another costs file).
    methods: BTreeMap<String, Stop>,
}

impl Stops {
    pub(super) fn new(run_id: String, clock: Arc<dyn Clock>) -> Stops {
        Stops {
            met: Mutex::new(Met::default()),
            abandon: watch::Sender::new(false),
            run_id,
            clock,
        }
    }

    /// Stops every call. The final summary line says why the run stopped
    /// (docs/commands.md: one line), so the moment itself is only a debug event.
    pub(super) fn halt(&self, stop: Stop) {
        self.record(Scope::Every, stop);
    }

    /// Stops the calls charged to `bucket`; the others go on (docs/budget.md, "Buckets").
    pub(super) fn halt_bucket(&self, bucket: &str, stop: Stop) {
        self.record(Scope::Bucket(bucket.to_owned()), stop);
    }

    /// Records a stop of the calls `scope` names; the first of each scope wins, and
    /// the first of all is what the run reports, unless this one [`outranks`] it.
    pub(super) fn record(&self, scope: Scope, stop: Stop) {
        let Ok(mut met) = self.met.lock() else {
            return;
        };
        let fresh = match &scope {
            Scope::Every => met.all.is_none(),
            Scope::Bucket(b) => !met.buckets.contains_key(b),
            Scope::Method(m) => !met.methods.contains_key(m),
        };
        if !fresh {
            return;
        }
        let why = stop.describe(self.clock.now());
        match scope {
            Scope::Every => {
                tracing::debug!(run_id = %self.run_id, "stopping: {why}; no further calls");
                met.all = Some(stop.clone());
            }
            Scope::Bucket(b) => {
                tracing::debug!(run_id = %self.run_id, "stopping the calls of bucket {b}: {why}");
                met.first_bucket.get_or_insert_with(|| b.clone());
                met.buckets.insert(b, stop.clone());
            }
            Scope::Method(m) => {
                tracing::debug!(run_id = %self.run_id, "stopping the calls of {m}: {why}");
                // A block met at a charge stops only its method, but it is the
                // refused charge's bucket that `run --json` names.
                if let Some(b) = stop.bucket() {
                    met.first_bucket.get_or_insert_with(|| b.to_owned());
                }
                met.methods.insert(m, stop.clone());
            }
        }
        if met.reported.as_ref().is_none_or(|r| outranks(&stop, r)) {
            met.reported = Some(stop);
        }
        drop(met);
        // Wakes the regions waiting out a retry's backoff (`woken`): a budget stop
        // cuts the wait short as a signal does.
        self.abandon.send_modify(|_| {});
    }

    /// Whether the calls charged to `bucket` have stopped: every call, or its
    /// bucket's.
    pub(super) fn stopped(&self, bucket: &str) -> bool {
        self.met
            .lock()
            .map_or(true, |m| m.all.is_some() || m.buckets.contains_key(bucket))
    }

    /// Whether the calls of `method`, charged to `bucket`, have stopped: every
    /// call, its bucket's, or its own.
    pub(super) fn stopped_method(&self, bucket: &str, method: &str) -> bool {
        self.stopped(bucket)
            || self
                .met
                .lock()
                .map_or(true, |m| m.methods.contains_key(method))
    }

    /// Resolves once the calls of `method`, charged to `bucket`, have stopped, at
    /// once when they already have (checked after subscribing, so no stop slips
    /// between).
    pub(super) async fn woken(&self, bucket: &str, method: &str) {
        let mut rx = self.abandon.subscribe();
        // Another bucket's stop wakes every waiter; only one of `bucket`'s ends the wait.
        while !self.stopped_method(bucket, method) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The stop the run reports.
    pub(super) fn reported(&self) -> Option<Stop> {
        self.met.lock().ok().and_then(|m| m.reported.clone())
    }

    /// The first bucket whose calls stopped, whatever the run reports.
    pub(super) fn first_bucket(&self) -> Option<String> {
        self.met.lock().ok().and_then(|m| m.first_bucket.clone())
    }

    /// The status a region cut short by the run's stop ends with.
    pub(super) fn status(&self) -> Status {
        self.reported()
            .as_ref()
            .map_or(Status::BudgetExhausted, Stop::status)
    }

    /// A signal arrived: no new calls from now on. Calls already sent may finish,
    /// until [`Stops::abandon_in_flight`].
    pub(super) fn interrupt(&self, signal: &'static str) {
        // Recording the stop wakes a region waiting out a retry's backoff.
        self.halt(Stop::Interrupted { signal });
    }

    /// Gives up the calls still waiting for an answer.
    pub(super) fn abandon_in_flight(&self) {
        self.abandon.send_replace(true);
    }

    /// Resolves once the calls in flight are to be given up.
    pub(super) async fn abandoned(&self) {
        let mut rx = self.abandon.subscribe();
        // The sender lives as long as the run, so the error (it was dropped) never comes.
        let _ = rx.wait_for(|gone| *gone).await;
    }
}

/// Whether `stop`, met after `reported`, is the one to report instead: a more
/// serious one (docs/commands.md's order: `failed`, `interrupted`, `clock_skew`,
/// `limiter_down`, `upstream_quota_exhausted`, `budget_exhausted`). A clock stop
/// after a budget's is what to fix first, since the budget's numbers were counted on
/// that clock; a limiter that stopped answering is what an operator must look at,
/// not a budget that may be far from spent. Between equals, the first still stands.
fn outranks(stop: &Stop, reported: &Stop) -> bool {
    stop.status().seriousness() > reported.status().seriousness()
}

#[cfg(test)]
mod tests;
