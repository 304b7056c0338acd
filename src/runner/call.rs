//! One upstream call of a run: charged before every attempt, its answer's clock
//! checked, transient failures tried again after a backoff, and every other answer
//! turned into what it decides (docs/upstream.md): a spent bucket stops that
//! bucket's calls, a fatal answer every call, a failed region only that region.

use std::future::Future;
use std::time::Instant;

use super::backoff::backoff;
use super::clock_check::TooFar;
use super::error::RunError;
use super::meter::Metered;
use super::outcome::{CallOutcome, RegionReport, Status, Stop};
use super::run::Run;
use crate::clock::Micros;
use crate::error::chain;
use crate::quota::skew::Reading;
use crate::youtube::{ErrorClass, Reply};

/// At most this many attempts per call, each charged (docs/upstream.md).
pub const MAX_ATTEMPTS: u32 = 3;

/// Why a call did not produce a result.
#[derive(Debug)]
pub(super) enum Failed {
    /// The run is stopping; the region ends with the run's stop status.
    Stopped,
    /// The run had already stopped before this call was asked for: a region that got
    /// no further than this was never reached (`not_attempted`).
    NotReached,
    /// This region failed; the others go on.
    Region(String),
    /// The upstream has no such chart (`videoChartNotFound`): a category's chart
    /// fails alone; for the overall chart, the region fails.
    ChartNotFound(String),
}

impl From<RunError> for Failed {
    fn from(e: RunError) -> Failed {
        Failed::Region(chain(&e))
    }
}

impl From<TooFar> for Failed {
    fn from(_: TooFar) -> Failed {
        Failed::Stopped
    }
}

impl Run {
    /// Whether the calls of `method` have stopped: every call, or its bucket's.
    pub(super) fn stopped_for(&self, method: &str) -> bool {
        self.stops
            .stopped_method(self.meter.bucket_of(method), method)
    }

    /// Resolves once the calls of `method` have stopped, at once when they already
    /// have.
    pub(super) async fn woken(&self, method: &str) {
        self.stops.woken(self.meter.bucket_of(method), method).await;
    }

    /// Charges one call of `method` to the budget before it is made, counting it in
    /// the region's `report`. Says the limiter's clock when it granted the charge;
    /// `None` for a call made unmetered.
    async fn charge(
        &self,
        method: &'static str,
        report: &mut RegionReport,
    ) -> Result<Option<Micros>, Failed> {
        if self.stopped_for(method) {
            return Err(Failed::NotReached);
        }
        match self.meter.charge(method).await {
            Metered::Granted {
                at,
                units,
                run_units,
            } => {
                report.units += units;
                // Before the call: a process killed from here on leaves rows that show
                // the units it spent, not 0.
                if let Err(e) = self
                    .record
                    .units(&report.code, report.units, run_units)
                    .await
                {
                    tracing::debug!(region = %report.code, "{}", chain(&e));
                }
                Ok(Some(at))
            }
            Metered::Unmetered { units } => {
                report.units_unmetered += units;
                Ok(None)
            }
            Metered::Stopped(scope, stop) => {
                self.stops.record(scope, stop);
                Err(Failed::Stopped)
            }
        }
    }

    /// Counts one attempt at `method` that ended as `outcome`.
    fn count_attempt(&self, method: &'static str, outcome: CallOutcome) {
        if let Ok(mut attempts) = self.attempts.lock() {
            *attempts.entry((method, outcome)).or_insert(0) += 1;
        }
    }

    /// One upstream call, charged before every attempt; transient failures are tried
    /// again after a backoff, at most [`MAX_ATTEMPTS`] attempts in all.
    pub(super) async fn call<T, F, Fut>(
        &self,
        method: &'static str,
        report: &mut RegionReport,
        mut attempt: F,
    ) -> Result<T, Failed>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Reply<T>>,
    {
        for n in 1..=MAX_ATTEMPTS {
            let one_at_a_time = self.clock_check.gate().await;
            let charging = Instant::now();
            let charged_at = self.charge(method, report).await?;
            let Reply {
                result: answered,
                date,
            } = tokio::select! {
                answered = attempt() => answered,
                () = self.stops.abandoned() => {
                    tracing::warn!(region = %report.code, "{method}: the call was given up, the run is stopping");
                    return Err(Failed::Stopped);
                }
            };
            let came = answered
                .as_ref()
                .map_or_else(|e| e.status().is_some(), |_| true);
            let clock = self
                .compare_clocks(method, &report.code, charged_at, charging, date, came)
                .await;
            drop(one_at_a_time);
            if let Err(too_far) = clock {
                // The call was made: counted as it ended, though nothing of it is kept.
                let outcome = answered
                    .as_ref()
                    .map_or_else(|e| outcome_of(e.class()), |_| CallOutcome::Ok);
                self.count_attempt(method, outcome);
                return Err(too_far.into());
            }
            let err = match answered {
                Ok(v) => {
                    self.count_attempt(method, CallOutcome::Ok);
                    return Ok(v);
                }
                Err(e) => e,
            };
            let class = err.class();
            let chart_not_found = err.is_chart_not_found();
            self.count_attempt(method, outcome_of(class));
            // Every message quotes what the upstream sent: never the key, never a raw
            // terminal control (docs/upstream.md).
            let err = self.upstream.scrub(&err.to_string());
            match class {
                ErrorClass::Transient if n < MAX_ATTEMPTS => {
                    let wait = backoff(n, self.jitter);
                    tracing::warn!(region = %report.code, "{err}; attempt {n} of {MAX_ATTEMPTS}, trying again in {}", crate::output::human::duration(wait));
                    // A stop (a signal) cuts the wait short; the next charge sees it
                    // and makes no call.
                    if !self.stopped_for(method) {
                        tokio::select! {
                            () = tokio::time::sleep(wait) => {}
                            () = self.woken(method) => {}
                        }
                    }
                }
                ErrorClass::Transient => {
                    return Err(Failed::Region(format!(
                        "{err} (gave up after {MAX_ATTEMPTS} attempts)"
                    )));
                }
                ErrorClass::QuotaExhausted => {
                    self.upstream_refused(method, &report.code, charged_at, err)
                        .await;
                    return Err(Failed::Stopped);
                }
                ErrorClass::Fatal => {
                    let message = err;
                    // The region whose call was refused says why in `--json` too.
                    report.error = Some(message.clone());
                    self.stops.halt(Stop::Fatal { message });
                    return Err(Failed::Stopped);
                }
                ErrorClass::RegionFailed if chart_not_found => {
                    return Err(Failed::ChartNotFound(err));
                }
                ErrorClass::RegionFailed => return Err(Failed::Region(err)),
            }
        }
        Err(Failed::Region(format!("{method}: no attempt left")))
    }

    /// Compares the limiter's clock, read when the call was charged (`charged_at`,
    /// `charging` ago), with the upstream's `date` of its answer; with no date, says so
    /// once when an answer `came`. A clock too far from the upstream's stops the run.
    async fn compare_clocks(
        &self,
        method: &'static str,
        region: &str,
        charged_at: Option<Micros>,
        charging: Instant,
        date: Option<crate::clock::Secs>,
        came: bool,
    ) -> Result<(), TooFar> {
        match (self.meter.limiter_clock(), charged_at, date) {
            (Some(clock), Some(limiter_at), Some(date)) => {
                let reading = Reading {
                    limiter_at,
                    elapsed: charging.elapsed(),
                    date,
                };
                self.clock_check.check(clock, reading, &self.stops).await
            }
            // Charged on the limiter's clock, and nothing to compare it with.
            (Some(clock), Some(_), None) => {
                if came {
                    self.clock_check.undated(clock, method, region);
                }
                self.clock_check.unconfirmed(clock, &self.stops)
            }
            _ => Ok(()),
        }
    }

    /// The upstream refused `method` for its quota (`reason`, scrubbed): the method's
    /// bucket is blocked until the upstream's reset and stops. Only that bucket is spent
    /// (docs/budget.md, "When the upstream refuses").
    async fn upstream_refused(
        &self,
        method: &'static str,
        region: &str,
        charged_at: Option<Micros>,
        reason: String,
    ) {
        let bucket = self.meter.bucket_of(method).to_owned();
        // The next Pacific midnight by the limiter's clock, which the block is held
        // against: its time at this call's charge (Redis `TIME` on Redis), never this
        // host's, which no answer has checked there. A call made unmetered (the limiter
        // down) has only the host's, and its block cannot be recorded anyway.
        let at = charged_at.unwrap_or_else(|| self.clock.now());
        let until = crate::youtube::quota_reset_after(at);
        // This bucket stops whether or not the limiter could be told.
        if let Err(e) = self.meter.block_until(&bucket, until).await {
            tracing::error!(
                region,
                "could not block bucket \"{bucket}\" until the upstream's reset: {e}"
            );
        }
        // The answer is also a measurement of what the upstream counted; a call made
        // unmetered has no time on the limiter's clock, and the limiter is down anyway.
        if let Some(at) = charged_at {
            self.meter.note_upstream_refusal(&bucket, at).await;
        }
        let stop = Stop::UpstreamQuota {
            until,
            reason,
            methods: self.meter.methods_of(&bucket),
            bucket: bucket.clone(),
        };
        self.stops.halt_bucket(&bucket, stop);
    }
}

impl Run {
    /// A run that began with its limiter's clock distrusted (a skew too far recorded)
    /// and made no call, because the budget or an upstream block denied every charge,
    /// had no answer to check the clock by: the record, and the refusal of `budget
    /// charge` with it, would outlive a fixed clock until the budget frees. So it asks
    /// the upstream once with a request that carries no key, which bills no project
    /// (the README's "Clocks"), and compares that answer's `Date` as any other's:
    /// agreeing clears the record, disagreeing (or no readable `Date`) stops the run
    /// on the clock. Nothing is charged and no call is counted: nothing is billed.
    pub(super) async fn confirm_clock_without_key(&self) {
        let denied = self.stops.reported().is_some_and(|stop| {
            matches!(
                stop.status(),
                Status::BudgetExhausted | Status::UpstreamQuotaExhausted
            )
        });
        if !denied || !self.clock_check.awaits_confirmation() || self.meter.totals().calls > 0 {
            return;
        }
        let Some(clock) = self.meter.limiter_clock() else {
            return;
        };
        let asking = Instant::now();
        let limiter_at = match self.meter.limiter_now().await {
            Ok(at) => at,
            Err(e) => {
                tracing::warn!(
                    run_id = %self.settings.run_id,
                    "reading the limiter's clock to check it against the upstream's: {e}; the clock stays unconfirmed until a run gets an answer"
                );
                return;
            }
        };
        tracing::debug!(
            run_id = %self.settings.run_id,
            "no call was allowed: checking {} with a request that carries no key",
            clock.name()
        );
        let Reply { result, date } = tokio::select! {
            answered = self.upstream.without_key() => answered,
            () = self.stops.abandoned() => return,
        };
        match &result {
            // The upstream refuses a request without a key; a success means something
            // on the way added a credential, and the call was billed to its project.
            Ok(status) if (200..300).contains(status) => tracing::warn!(
                run_id = %self.settings.run_id,
                "a request sent without the API key, to check the clocks, was answered HTTP {status}: something between this host and the upstream adds a key, so it was billed (one videoCategories.list call), outside this budget"
            ),
            Ok(status) => tracing::debug!(
                run_id = %self.settings.run_id,
                "the request without the key was answered HTTP {status}"
            ),
            Err(e) => tracing::warn!(
                run_id = %self.settings.run_id,
                "checking the clocks with a request without the key: {}",
                self.upstream.scrub(&e.to_string())
            ),
        }
        // Stops the run on the clock when it disagrees; nothing else is left to stop.
        let _ = match date {
            Some(date) => {
                let reading = Reading {
                    limiter_at,
                    elapsed: asking.elapsed(),
                    date,
                };
                self.clock_check
                    .check_without_key(clock, reading, &self.stops)
                    .await
            }
            None => self.clock_check.unconfirmed(clock, &self.stops),
        };
    }
}

fn outcome_of(class: ErrorClass) -> CallOutcome {
    match class {
        ErrorClass::Transient => CallOutcome::Transient,
        ErrorClass::QuotaExhausted => CallOutcome::QuotaExhausted,
        ErrorClass::Fatal => CallOutcome::Fatal,
        ErrorClass::RegionFailed => CallOutcome::RegionFailed,
    }
}

#[cfg(test)]
mod tests;
