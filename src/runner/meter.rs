//! Metering a run's calls: each charged to the budget right before it is made, or, while
//! the limiter cannot be reached, journalled and made unmetered when its method's
//! `[when_limiter_down]` policy allows (docs/budget.md, "When the limiter is down"). The
//! meter says what a charge came to; the run applies it (its stops, its regions' numbers).

use crate::sqlite::Db;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::OnceCell;

use super::error::RunError;
use super::outcome::Stop;
use super::stops::Scope;
use crate::clock::{Clock, Micros};
use crate::error::chain;
use crate::quota::drift;
use crate::quota::skew::{self, LimiterClock, Skew};
use crate::quota::{
    Allowance, BucketFigures, Budget, Charge, DownPolicy, Journal, Limiter, LimiterError,
};

/// What charging one call came to.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Metered {
    /// The limiter granted `units`, `at` this time on its clock; the run has now been
    /// granted `run_units` in all.
    Granted {
        at: Micros,
        units: u64,
        run_units: u64,
    },
    /// The limiter is down and the method allowed: the call is journalled, to be
    /// counted in the window once the limiter answers again.
    Unmetered { units: u64 },
    /// No call: the calls `Scope` names stop, for the reason given.
    Stopped(Scope, Stop),
}

/// A run's budget: the limiter it charges, what it has charged, and whether the
/// limiter has been found down.
pub(super) struct Meter {
    limiter: Limiter,
    budget: Budget,
    allowance: Allowance,
    /// Names the charges (`{run_id}-{seq}`) and the run's log lines.
    run_id: String,
    /// The database the journal lives in, beside the store: the command's connection.
    db: Db,
    clock: Arc<dyn Clock>,
    seq: AtomicU64,
    /// Units the limiter granted.
    units: AtomicU64,
    /// Units of calls made unmetered while the limiter was down, and journalled.
    units_unmetered: AtomicU64,
    /// Calls made, metered or not.
    calls: AtomicU64,
    /// Why the limiter was found unreachable. Once set, it stays down for the rest of
    /// the run: asking again would cost every call a connect timeout, and the calls
    /// journalled meanwhile reach the window at the next command's replay anyway.
    limiter_down: OnceLock<String>,
    /// Opened at the first journalled call: most runs never need it.
    journal: OnceCell<Arc<Journal>>,
}

/// The budget's window at a run's end, and whether the limiter answered
/// (`trendsync_limiter_up`): it may answer without a window to give.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct WindowRead {
    /// Every bucket's figures, the main one first; `None` when the limiter gave none.
    pub window: Option<Vec<BucketFigures>>,
    pub up: bool,
}

/// What a run has charged, for its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Totals {
    pub units: u64,
    pub units_unmetered: u64,
    pub calls: u64,
}

impl Meter {
    pub(super) fn new(
        limiter: Limiter,
        budget: Budget,
        allowance: Allowance,
        run_id: String,
        db: Db,
        clock: Arc<dyn Clock>,
    ) -> Meter {
        Meter {
            limiter,
            budget,
            allowance,
            run_id,
            db,
            clock,
            seq: AtomicU64::new(0),
            units: AtomicU64::new(0),
            units_unmetered: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            limiter_down: OnceLock::new(),
            journal: OnceCell::new(),
        }
    }

    /// The limiter the run charges.
    pub(super) fn limiter(&self) -> &Limiter {
        &self.limiter
    }

    /// The bucket `method` is charged to (the main one for a method without a cost,
    /// which the charge refuses anyway).
    pub(super) fn bucket_of(&self, method: &str) -> &str {
        self.budget
            .bucket_of(method)
            .map_or(crate::quota::BUDGET_POLICY, |b| b.name.as_str())
    }

    /// The methods of `bucket`, in order: those a block of it stops.
    pub(super) fn methods_of(&self, bucket: &str) -> Vec<String> {
        self.budget
            .bucket(bucket)
            .map_or_else(Vec::new, |b| b.methods())
    }

    /// Charges one call of `method` to the budget before it is made.
    pub(super) async fn charge(&self, method: &'static str) -> Metered {
        let id = format!(
            "{}-{}",
            self.run_id,
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let charge = match self.budget.charge(&id, method, 1, self.allowance) {
            Ok(c) => c,
            Err(e) => {
                return Metered::Stopped(
                    Scope::Every,
                    Stop::Fatal {
                        message: e.to_string(),
                    },
                );
            }
        };
        if let Some(reason) = self.limiter_down.get() {
            return self.unmetered(method, &charge, reason).await;
        }
        match self.limiter.charge_timed(&charge).await {
            Ok((d, at)) if d.granted => {
                let run_units =
                    self.units.fetch_add(charge.units, Ordering::Relaxed) + charge.units;
                self.calls.fetch_add(1, Ordering::Relaxed);
                Metered::Granted {
                    at,
                    units: charge.units,
                    run_units,
                }
            }
            Ok((d, _)) => {
                // The upstream's block is the method's (it may have been set on
                // another bucket under another costs file); a spent window is the
                // bucket's.
                let blocked = d.denied_by.as_deref() == Some(crate::quota::UPSTREAM_POLICY);
                let methods = if blocked {
                    self.blocked_methods(&charge.bucket).await
                } else {
                    Vec::new()
                };
                let stop = Stop::denied(method, &charge.bucket, &d, self.clock.now(), &methods);
                let scope = if blocked {
                    Scope::Method(method.to_owned())
                } else {
                    Scope::Bucket(charge.bucket)
                };
                Metered::Stopped(scope, stop)
            }
            Err(e) if e.is_unavailable() => {
                let reason = self.limiter_is_down(&e);
                self.unmetered(method, &charge, reason).await
            }
            // A clock to fix, not a failure: every call stops, as on a skew the
            // upstream's answers show (docs/alerts.md).
            Err(LimiterError::ClocksApart { apart, .. }) => {
                let advice = apart.advice(&self.recorded_skews().await);
                Metered::Stopped(Scope::Every, Stop::ClocksApart { apart, advice })
            }
            Err(e) => Metered::Stopped(
                Scope::Every,
                Stop::Fatal {
                    message: format!("charging {method}: {}", chain(&e)),
                },
            ),
        }
    }

    /// The methods of `bucket` the upstream's blocks stop now, for the stop's words;
    /// none when the limiter cannot say (the stop then names the refused method).
    async fn blocked_methods(&self, bucket: &str) -> Vec<String> {
        let Some(b) = self.budget.bucket(bucket) else {
            return Vec::new();
        };
        match self.limiter.status(&[b.policy()], &[]).await {
            Ok(st) => st.blocked_methods.into_keys().collect(),
            Err(e) => {
                tracing::debug!(
                    "which methods of bucket \"{bucket}\" are blocked: {}",
                    chain(&e)
                );
                Vec::new()
            }
        }
    }

    /// Marks the limiter down for the rest of the run, saying so once.
    fn limiter_is_down(&self, e: &LimiterError) -> &str {
        self.limiter_down.get_or_init(|| {
            let reason = chain(e);
            tracing::warn!(
                run_id = %self.run_id,
                "{reason}; going on without it for the rest of this run: calls [when_limiter_down] allows are made unmetered and journalled in {}, to be counted in the window once it answers again; the others stop the run",
                self.db.path().display()
            );
            reason
        })
    }

    /// A call while the limiter is down: journalled and made when its method is
    /// allowed, a stop of its bucket when it is not.
    async fn unmetered(&self, method: &'static str, charge: &Charge, reason: &str) -> Metered {
        if self.budget.when_down(method) == DownPolicy::Deny {
            return Metered::Stopped(
                Scope::Bucket(charge.bucket.clone()),
                Stop::LimiterDown {
                    method,
                    reason: reason.to_owned(),
                },
            );
        }
        // The row is written before the call is made, as a charge would be: a call
        // the journal does not hold must not happen.
        if let Err(e) = self.write_journal(charge).await {
            return Metered::Stopped(
                Scope::Every,
                Stop::Fatal {
                    message: format!(
                        "the limiter is down ({reason}) and {method} could not be journalled: {}",
                        chain(&e)
                    ),
                },
            );
        }
        self.units_unmetered
            .fetch_add(charge.units, Ordering::Relaxed);
        self.calls.fetch_add(1, Ordering::Relaxed);
        Metered::Unmetered {
            units: charge.units,
        }
    }

    /// Appends `charge` to the journal, opening it the first time.
    async fn write_journal(&self, charge: &Charge) -> Result<(), RunError> {
        let task = |source| RunError::Task {
            doing: "journalling a call made while the limiter is down".into(),
            source,
        };
        let (db, clock) = (self.db.clone(), Arc::clone(&self.clock));
        let journal = self
            .journal
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || Journal::with(&db, clock))
                    .await
                    .map_err(task)?
                    .map(Arc::new)
                    .map_err(|source| RunError::Journal { source })
            })
            .await?;
        let (journal, key, charge) = (Arc::clone(journal), self.budget.key.clone(), charge.clone());
        tokio::task::spawn_blocking(move || journal.record(&key, &charge))
            .await
            .map_err(task)?
            .map_err(|source| RunError::Journal { source })
    }

    /// Denies every charge to `bucket` until `until`, for every process sharing the
    /// limiter. A limiter already found down is not asked again (its timeout would be
    /// paid once more).
    pub(super) async fn block_until(&self, bucket: &str, until: Micros) -> Result<(), String> {
        let Some(bucket) = self.budget.bucket(bucket) else {
            return Err(format!("the budget has no bucket \"{bucket}\""));
        };
        match self.limiter_down.get() {
            Some(reason) => Err(format!("the limiter is down: {reason}")),
            None => self
                .limiter
                .block_until(&bucket.methods(), until)
                .await
                .map_err(|e| chain(&e)),
        }
    }

    /// The upstream refused a call of `bucket` (docs/budget.md, "When the upstream
    /// refuses"): records in the limiter what this budget had charged the bucket since the
    /// upstream's midnight, when it was below the bucket's quota, and says so once per
    /// bucket and upstream day, from whichever process saw the first such refusal. `at` is
    /// the refused call's charge on the limiter's clock.
    pub(super) async fn note_upstream_refusal(&self, bucket: &str, at: Micros) {
        let Some(b) = self.budget.bucket(bucket) else {
            return;
        };
        if self.limiter_down.get().is_some() {
            return;
        }
        match self
            .limiter
            .note_upstream_refusal(bucket, b.quota, at)
            .await
        {
            Ok(Some(day)) => tracing::warn!(
                budget = %self.budget.key,
                bucket,
                units = day.units,
                quota = b.quota,
                "the upstream said the quota of {} is spent when this budget had counted {} units of its quota {} since midnight {} ({}): another consumer of the key spends from the same quota, or the key's quota is lower than configured (an upstream audit can lower it); compare with the key's quota page in the Cloud console, and set quota and ceiling in the costs file to what the upstream grants",
                bucket_words(&self.budget.key, bucket),
                day.units,
                b.quota,
                drift::UPSTREAM_ZONE,
                crate::output::human::timestamp(day.day_us),
            ),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                "could not record what the upstream's refusal of bucket \"{bucket}\" measured: {}",
                chain(&e)
            ),
        }
    }

    /// What the upstream's early refusals measured, for the report; none when the
    /// limiter could not say.
    async fn upstream_spent(&self) -> Vec<drift::SpentDay> {
        self.limiter.upstream_spent().await.unwrap_or_else(|e| {
            tracing::debug!("what the upstream's refusals measured: {}", chain(&e));
            Vec::new()
        })
    }

    /// The last skews recorded on each clock, to tell which of two clocks too far
    /// apart is likely the wrong one; none when they cannot be read.
    async fn recorded_skews(&self) -> Vec<Skew> {
        let db = self.db.clone();
        match tokio::task::spawn_blocking(move || skew::recorded(Some(&db))).await {
            Ok(Ok(skews)) => skews,
            Ok(Err(e)) => {
                tracing::debug!("{e}");
                Vec::new()
            }
            Err(e) => {
                tracing::debug!("reading the clock skews: {e}");
                Vec::new()
            }
        }
    }

    /// The Redis limiter, unless the run found it down: where a fleet's slot records
    /// are kept.
    pub(super) fn redis(&self) -> Option<&crate::quota::RedisLimiter> {
        match &self.limiter {
            Limiter::Redis(redis) if self.limiter_down.get().is_none() => Some(redis),
            _ => None,
        }
    }

    /// Whose clock the limiter decides by; `None` while it is down.
    pub(super) fn limiter_clock(&self) -> Option<LimiterClock> {
        self.limiter.clock()
    }

    /// Now on the limiter's clock (Redis `TIME` on Redis), read without charging.
    pub(super) async fn limiter_now(&self) -> Result<Micros, String> {
        if let Some(reason) = self.limiter_down.get() {
            return Err(format!("the limiter is down: {reason}"));
        }
        self.limiter
            .status(&[], &[])
            .await
            .map(|st| st.now)
            .map_err(|e| chain(&e))
    }

    /// The budget's own window as it stands, read once for the report and the
    /// metrics. Once found down, the limiter is not asked again in this run, not even
    /// for this: its timeout would be paid once more.
    pub(super) async fn window(&self) -> WindowRead {
        let unread = |up| WindowRead { window: None, up };
        if self.limiter_down.get().is_some() {
            return unread(false);
        }
        let buckets: Vec<_> = self.budget.buckets().iter().map(|b| b.policy()).collect();
        match self.limiter.status(&buckets, &[]).await {
            Ok(st) => {
                let spent = self.upstream_spent().await;
                let window = Some(self.budget.figures(&st, &spent));
                WindowRead { window, up: true }
            }
            Err(e) => {
                tracing::debug!("the budget's window after the run: {}", chain(&e));
                // A limiter that refuses to count by clocks too far apart answered.
                unread(e.clocks_apart().is_some())
            }
        }
    }

    /// What the run may still spend of each bucket, given its `window`, the main
    /// one first.
    pub(super) fn remaining_by_bucket(
        &self,
        window: Option<&[BucketFigures]>,
    ) -> Option<Vec<(String, u64)>> {
        let left = window?
            .iter()
            .map(|b| (b.name.clone(), b.remaining(self.allowance)))
            .collect();
        Some(left)
    }

    pub(super) fn totals(&self) -> Totals {
        Totals {
            units: self.units.load(Ordering::Relaxed),
            units_unmetered: self.units_unmetered.load(Ordering::Relaxed),
            calls: self.calls.load(Ordering::Relaxed),
        }
    }
}

/// `budget "key1"` for the main bucket, `bucket "search" of budget "key1"` for another.
fn bucket_words(key: &str, bucket: &str) -> String {
    if bucket == crate::quota::BUDGET_POLICY {
        format!("budget \"{key}\"")
    } else {
        format!("bucket \"{bucket}\" of budget \"{key}\"")
    }
}

#[cfg(test)]
mod tests;
