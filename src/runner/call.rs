//! One upstream call of a run: charged before every attempt, its answer's clock
//! checked, transient failures tried again after a backoff, and every other answer
//! turned into what it decides (DESIGN.md section 5): a spent bucket stops that
//! bucket's calls, a fatal answer every call, a failed region only that region.

use std::future::Future;
use std::time::Instant;

use super::backoff::backoff;
use super::clock_check::TooFar;
use super::error::RunError;
use super::meter::Metered;
use super::outcome::{CallOutcome, RegionReport, Stop};
use super::run::Run;
use super::upstream::Answer;
use crate::error::chain;
use crate::quota::skew::Reading;
use crate::youtube::ErrorClass;

/// At most this many attempts per call, each charged (DESIGN.md section 5).
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
        self.stops.stopped(self.meter.bucket_of(method))
    }

    /// Resolves once the calls of `method` have stopped, at once when they already
    /// have.
    pub(super) async fn woken(&self, method: &str) {
        self.stops.woken(self.meter.bucket_of(method)).await;
    }

    /// Charges one call of `method` to the budget before it is made, counting it in
    /// the region's `report`. Says the limiter's clock when it granted the charge;
    /// `None` for a call made unmetered.
    async fn charge(
        &self,
        method: &'static str,
        report: &mut RegionReport,
    ) -> Result<Option<i64>, Failed> {
        if self.stopped_for(method) {
            return Err(Failed::NotReached);
        }
        match self.meter.charge(method).await {
            Metered::Granted {
                at_us,
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
                Ok(Some(at_us))
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
        Fut: Future<Output = Answer<T>>,
    {
        for n in 1..=MAX_ATTEMPTS {
            let one_at_a_time = self.clock_check.gate().await;
            let charging = Instant::now();
            let charged_at = self.charge(method, report).await?;
            let Answer {
                result: answered,
                date_s,
            } = tokio::select! {
                answered = attempt() => answered,
                () = self.stops.abandoned() => {
                    tracing::warn!(region = %report.code, "{method}: the call was given up, the run is stopping");
                    return Err(Failed::Stopped);
                }
            };
            let clock = match (self.meter.limiter_clock(), charged_at, date_s) {
                (Some(clock), Some(limiter_at_us), Some(date_s)) => {
                    let reading = Reading {
                        limiter_at_us,
                        elapsed: charging.elapsed(),
                        date_s,
                    };
                    self.clock_check.check(clock, reading, &self.stops).await
                }
                _ => Ok(()),
            };
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
            // terminal control (DESIGN.md section 5).
            let err = self.upstream.scrub(&err.to_string());
            match class {
                ErrorClass::Transient if n < MAX_ATTEMPTS => {
                    let wait = backoff(n, self.jitter);
                    tracing::warn!(region = %report.code, "{err}; attempt {n} of {MAX_ATTEMPTS}, trying again in {}", crate::human::duration(wait));
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
                    // Only the bucket of the method called is spent (DESIGN.md 3.5).
                    let bucket = self.meter.bucket_of(method).to_owned();
                    let until_us = crate::youtube::quota_reset_after(self.clock.now_us());
                    // This bucket stops whether or not the limiter could be told.
                    if let Err(e) = self.meter.block_until(&bucket, until_us).await {
                        tracing::error!(
                            region = %report.code,
                            "could not block bucket \"{bucket}\" until the upstream's reset: {e}"
                        );
                    }
                    let stop = Stop::UpstreamQuota {
                        until_us,
                        reason: err,
                        bucket: bucket.clone(),
                    };
                    self.stops.halt_bucket(&bucket, stop);
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
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::config::{Follow, Region};
    use crate::runner::execute::execute;
    use crate::runner::outcome::Status;
    use crate::runner::test_support::{AT_2026_US, FakeUpstream, Reply, Scratch, region};
    use crate::youtube::{SEARCH_LIST, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS, VIDEOS_LIST};

    const V: &str = VIDEOS_LIST;
    const C: &str = VIDEO_CATEGORIES_LIST;
    const S: &str = SEARCH_LIST;
    const F: &str = VIDEOS_BATCH_GET_STATS;

    const SERVER_ERROR: Reply = Reply::Error(503, "backendError");
    const QUOTA_EXCEEDED: Reply = Reply::Error(403, "quotaExceeded");
    const KEY_INVALID: Reply = Reply::Error(400, "keyInvalid");
    const CHART_NOT_FOUND: Reply = Reply::Error(404, "videoChartNotFound");

    /// One pool with room for three calls.
    const THREE_CALLS: &str = r#"
[budget]
key = "key1"
quota = 10
ceiling = 3
window = "24h"

[costs]
"videos.list" = 1
"videoCategories.list" = 1
"#;

    /// Searches and follow-ups in buckets of their own, as the upstream bills them.
    const BUCKETS: &str = r#"
[budget]
key = "key1"
quota = 100
ceiling = 90
window = "24h"

[costs]
"videos.list" = 1
"videoCategories.list" = 1

[[bucket]]
name = "search"
quota = 100
ceiling = 90
window = "24h"
costs = { "search.list" = 1 }

[[bucket]]
name = "stats"
quota = 100
ceiling = 90
window = "24h"
costs = { "videos.batchGetStats" = 1 }
"#;

    /// A run through the fake upstream, and what it must come to.
    struct Case {
        name: &'static str,
        costs: &'static str,
        limiter_down: bool,
        follow: bool,
        /// Every answer's `Date`, this far from the limiter's clock.
        dated_off_s: Option<i64>,
        script: Vec<(&'static str, Vec<Reply>)>,
        regions: Vec<Region>,
        /// The methods called, in order (one region at a time).
        calls: Vec<&'static str>,
        status: Status,
        /// Each region's status, in the order given.
        ends: Vec<Status>,
        /// The follow-ups' status, when they are configured.
        follow_ends: Option<Status>,
        /// Units granted, and units of calls made unmetered.
        units: (u64, u64),
        /// The buckets the limiter shows blocked after the run.
        blocked: Vec<&'static str>,
    }

    fn case(name: &'static str) -> Case {
        Case {
            name,
            costs: crate::config::BUILTIN_COSTS,
            limiter_down: false,
            follow: false,
            dated_off_s: None,
            script: Vec::new(),
            regions: vec![region("US", &[])],
            calls: vec![V, C],
            status: Status::Complete,
            ends: vec![Status::Complete],
            follow_ends: None,
            units: (2, 0),
            blocked: Vec::new(),
        }
    }

    fn cases() -> Vec<Case> {
        vec![
            case("every call answered: the run completes"),
            Case {
                script: vec![(V, vec![SERVER_ERROR])],
                calls: vec![V, V, C],
                units: (3, 0),
                ..case("a 5xx is tried again, each attempt charged")
            },
            Case {
                // The fourth is the next region's first answer, which it tries again.
                script: vec![(V, vec![SERVER_ERROR; 4])],
                regions: vec![region("US", &[]), region("GB", &[])],
                calls: vec![V, V, V, V, V, C],
                status: Status::Failed,
                ends: vec![Status::Failed, Status::Complete],
                units: (6, 0),
                ..case("three 5xx give the region up, the others go on")
            },
            Case {
                script: vec![(V, vec![Reply::Error(429, "rateLimitExceeded")])],
                calls: vec![V, V, C],
                units: (3, 0),
                ..case("throttling is tried again")
            },
            Case {
                costs: THREE_CALLS,
                regions: vec![region("US", &[]), region("GB", &[]), region("DE", &[])],
                calls: vec![V, C, V],
                status: Status::BudgetExhausted,
                ends: vec![
                    Status::Complete,
                    Status::BudgetExhausted,
                    Status::NotAttempted,
                ],
                units: (3, 0),
                ..case("a budget denial stops the run; a region it never reached says so")
            },
            Case {
                script: vec![(V, vec![KEY_INVALID])],
                regions: vec![region("US", &[]), region("GB", &[])],
                calls: vec![V],
                status: Status::Failed,
                ends: vec![Status::Failed, Status::NotAttempted],
                units: (1, 0),
                ..case("a fatal answer stops every call, not tried again")
            },
            Case {
                script: vec![(V, vec![CHART_NOT_FOUND])],
                regions: vec![region("US", &[]), region("GB", &[])],
                calls: vec![V, V, C],
                status: Status::Failed,
                ends: vec![Status::Failed, Status::Complete],
                units: (3, 0),
                ..case("a missing overall chart fails only its region")
            },
            Case {
                costs: BUCKETS,
                follow: true,
                script: vec![(S, vec![QUOTA_EXCEEDED])],
                regions: vec![region("US", &["a", "b"]), region("GB", &["c"])],
                calls: vec![V, C, V, C, S, F],
                status: Status::UpstreamQuotaExhausted,
                ends: vec![
                    Status::UpstreamQuotaExhausted,
                    Status::UpstreamQuotaExhausted,
                ],
                follow_ends: Some(Status::Complete),
                units: (6, 0),
                blocked: vec!["search"],
                ..case("a quotaExceeded on search stops only the search bucket")
            },
            Case {
                follow: true,
                script: vec![(S, vec![QUOTA_EXCEEDED])],
                regions: vec![region("US", &["a"])],
                calls: vec![V, C, S],
                status: Status::UpstreamQuotaExhausted,
                ends: vec![Status::UpstreamQuotaExhausted],
                follow_ends: Some(Status::NotAttempted),
                units: (102, 0),
                blocked: vec!["budget"],
                ..case("in one pool, a quotaExceeded on search stops every call")
            },
            Case {
                costs: BUCKETS,
                follow: true,
                script: vec![(F, vec![QUOTA_EXCEEDED])],
                regions: vec![region("US", &["a"])],
                calls: vec![V, C, S, V, F],
                status: Status::UpstreamQuotaExhausted,
                ends: vec![Status::Complete],
                follow_ends: Some(Status::UpstreamQuotaExhausted),
                units: (5, 0),
                blocked: vec!["stats"],
                ..case("a quotaExceeded on the follow-ups stops only them")
            },
            Case {
                limiter_down: true,
                regions: vec![region("US", &["a"])],
                calls: vec![V, C],
                status: Status::BudgetExhausted,
                ends: vec![Status::BudgetExhausted],
                units: (0, 2),
                ..case("the limiter down: allowed calls made unmetered, a denied one stops")
            },
            Case {
                dated_off_s: Some(0),
                ..case("an answer whose clock agrees: the run goes on")
            },
            Case {
                dated_off_s: Some(3_600),
                regions: vec![region("US", &[]), region("GB", &[])],
                calls: vec![V],
                status: Status::BudgetExhausted,
                ends: vec![Status::BudgetExhausted, Status::NotAttempted],
                units: (1, 0),
                ..case("an answer an hour off the limiter's clock stops the run")
            },
        ]
    }

    /// Stop, bucket and retry decisions, through an upstream in the process.
    #[tokio::test]
    async fn what_each_answer_decides() {
        for c in cases() {
            let name = c.name;
            let mut upstream = FakeUpstream::new();
            for (method, replies) in &c.script {
                upstream = upstream.answering(method, replies);
            }
            if let Some(off) = c.dated_off_s {
                upstream = upstream.dated(AT_2026_US / 1_000_000 + off);
            }
            let upstream = Arc::new(upstream);
            let dir = tempfile::tempdir().expect("temp dir");
            let run = Scratch {
                costs: c.costs.to_owned(),
                limiter_down: c.limiter_down,
                follow: c.follow.then_some(Follow {
                    days: 1,
                    every: Duration::ZERO,
                }),
                ..Scratch::default()
            }
            .run(dir.path(), Arc::clone(&upstream) as _);
            let report = execute(run, c.regions).await;

            assert_eq!(upstream.calls(), c.calls, "{name}: the calls made");
            assert_eq!(report.status, c.status, "{name}: {:?}", report.regions);
            let ends: Vec<Status> = report.regions.iter().map(|r| r.status).collect();
            assert_eq!(ends, c.ends, "{name}: {:?}", report.regions);
            let follow = report.follow.as_ref().map(|f| f.status);
            assert_eq!(follow, c.follow_ends, "{name}: {:?}", report.follow);
            assert_eq!(
                (report.units_charged, report.units_unmetered),
                c.units,
                "{name}: units granted, unmetered"
            );
            assert_eq!(
                report.calls,
                c.calls.len() as u64,
                "{name}: every call counted"
            );
            let blocked: Vec<&str> = report
                .budget
                .iter()
                .flat_map(|b| &b.buckets)
                .filter(|b| b.blocked_until_us.is_some())
                .map(|b| b.name.as_str())
                .collect();
            assert_eq!(blocked, c.blocked, "{name}: blocked buckets");
        }
    }

    /// Every attempt is counted as it ended, the retried ones too.
    #[tokio::test]
    async fn every_attempt_is_counted_by_how_it_ended() {
        let upstream = Arc::new(FakeUpstream::new().answering(V, &[SERVER_ERROR, SERVER_ERROR]));
        let dir = tempfile::tempdir().expect("temp dir");
        let run = Scratch::default().run(dir.path(), Arc::clone(&upstream) as _);
        let report = execute(run, vec![region("US", &[])]).await;
        let attempts: Vec<((&str, CallOutcome), u64)> = report.attempts.into_iter().collect();
        assert_eq!(
            attempts,
            [
                ((C, CallOutcome::Ok), 1),
                ((V, CallOutcome::Ok), 1),
                ((V, CallOutcome::Transient), 2),
            ]
        );
    }

    /// A fatal answer's message is the region's error, in `--json` too.
    #[tokio::test]
    async fn a_fatal_answer_says_why_in_its_region() {
        let upstream = Arc::new(FakeUpstream::new().answering(V, &[KEY_INVALID]));
        let dir = tempfile::tempdir().expect("temp dir");
        let run = Scratch::default().run(dir.path(), Arc::clone(&upstream) as _);
        let report = execute(run, vec![region("US", &[])]).await;
        let error = report.regions[0].error.as_deref().unwrap_or_default();
        assert!(
            error.contains("keyInvalid") && error.contains("check the key"),
            "{error}"
        );
        assert_eq!(report.stop_reason.as_deref(), Some(error));
    }

    /// A stop of any kind wakes a region waiting out a retry's backoff, and one that
    /// came before the wait began ends it at once.
    #[tokio::test]
    async fn a_budget_stop_cuts_a_backoff_short() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = Scratch::default().run(dir.path(), Arc::new(FakeUpstream::new()));
        let waiting = tokio::spawn({
            let run = Arc::clone(&run);
            async move { run.woken(VIDEOS_LIST).await }
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        run.stops.halt_bucket(
            crate::quota::BUDGET_POLICY,
            Stop::Fatal {
                message: "stands in for the budget".into(),
            },
        );
        tokio::time::timeout(Duration::from_secs(2), waiting)
            .await
            .expect("woken by the stop")
            .expect("no panic");
        tokio::time::timeout(Duration::from_millis(100), run.woken(VIDEOS_LIST))
            .await
            .expect("already stopped: no wait at all");
    }
}
