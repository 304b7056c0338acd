//! Where a run stands on stopping, shared by its region tasks: one stop per bucket,
//! which ends every task's calls of that bucket as soon as it (or the upstream, for
//! it) says no (DESIGN.md 3.9), and one that ends every call (a fatal error, a
//! signal). The first stop of all is the one the run reports.

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
    /// The first stop of any kind: the one the run reports.
    first: Option<Stop>,
    /// A stop of every call: a fatal error or a signal.
    all: Option<Stop>,
    /// Per bucket, the stop of the calls charged to it (spent, blocked by the
    /// upstream, or the limiter down and the method denied).
    buckets: BTreeMap<String, Stop>,
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
    /// (DESIGN.md: one line), so the moment itself is only a debug event.
    pub(super) fn halt(&self, stop: Stop) {
        self.record(Scope::Every, stop);
    }

    /// Stops the calls charged to `bucket`; the others go on (DESIGN.md 3.9).
    pub(super) fn halt_bucket(&self, bucket: &str, stop: Stop) {
        self.record(Scope::Bucket(bucket.to_owned()), stop);
    }

    /// Records a stop of the calls `scope` names; the first of each scope wins, and
    /// the first of all is what the run reports.
    pub(super) fn record(&self, scope: Scope, stop: Stop) {
        let Ok(mut met) = self.met.lock() else {
            return;
        };
        let fresh = match &scope {
            Scope::Every => met.all.is_none(),
            Scope::Bucket(b) => !met.buckets.contains_key(b),
        };
        if !fresh {
            return;
        }
        let why = stop.describe(self.clock.now_us());
        match scope {
            Scope::Every => {
                tracing::debug!(run_id = %self.run_id, "stopping: {why}; no further calls");
                met.all = Some(stop.clone());
            }
            Scope::Bucket(b) => {
                tracing::debug!(run_id = %self.run_id, "stopping the calls of bucket {b}: {why}");
                met.buckets.insert(b, stop.clone());
            }
        }
        met.first.get_or_insert(stop);
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

    /// Resolves once the calls of `bucket` have stopped, at once when they already
    /// have (checked after subscribing, so no stop slips between).
    pub(super) async fn woken(&self, bucket: &str) {
        let mut rx = self.abandon.subscribe();
        // Another bucket's stop wakes every waiter; only one of `bucket`'s ends the wait.
        while !self.stopped(bucket) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The first stop, the one the run reports.
    pub(super) fn first(&self) -> Option<Stop> {
        self.met.lock().ok().and_then(|m| m.first.clone())
    }

    /// The status a region cut short by the run's stop ends with.
    pub(super) fn status(&self) -> Status {
        self.met
            .lock()
            .ok()
            .and_then(|m| m.first.as_ref().map(Stop::status))
            .unwrap_or(Status::BudgetExhausted)
    }

    /// A signal arrived: no new calls from now on. Calls already sent may finish,
    /// until [`Stops::abandon_in_flight`].
    pub(super) fn interrupt(&self, signal: &'static str) {
        self.halt(Stop::Interrupted { signal });
        // A region waiting out a retry's backoff wakes up to see the stop.
        self.abandon.send_replace(false);
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::quota::BUDGET_POLICY;

    fn stops() -> Stops {
        Stops::new(
            "r1".into(),
            Arc::new(crate::clock::ManualClock::starting_at(0)),
        )
    }

    fn fatal(message: &str) -> Stop {
        Stop::Fatal {
            message: message.into(),
        }
    }

    fn budget(method: &'static str) -> Stop {
        Stop::Budget {
            method,
            units: 1,
            denied_by: BUDGET_POLICY.into(),
            retry_after: None,
            remaining: 0,
        }
    }

    fn spent(bucket: &str) -> Stop {
        Stop::UpstreamQuota {
            until_us: 0,
            reason: "quotaExceeded".into(),
            bucket: bucket.into(),
        }
    }

    fn bucket(name: &str) -> Scope {
        Scope::Bucket(name.into())
    }

    /// Stops met, in order, and what they come to.
    struct Case {
        name: &'static str,
        met: Vec<(Scope, Stop)>,
        /// Whether the calls of the main bucket and of `search` have stopped.
        stopped: [bool; 2],
        /// The stop the run reports.
        first: Option<Stop>,
        /// The status of a region the run's stop cut short.
        status: Status,
    }

    #[test]
    fn which_calls_a_stop_ends_and_which_stop_is_reported() {
        let interrupted = Stop::Interrupted { signal: "SIGTERM" };
        let cases = [
            Case {
                name: "no stop: every call goes on",
                met: vec![],
                stopped: [false, false],
                first: None,
                status: Status::BudgetExhausted,
            },
            Case {
                name: "a spent bucket stops only its own calls",
                met: vec![(bucket("search"), spent("search"))],
                stopped: [false, true],
                first: Some(spent("search")),
                status: Status::UpstreamQuotaExhausted,
            },
            Case {
                name: "a stop of every call stops every bucket",
                met: vec![(Scope::Every, fatal("bad key"))],
                stopped: [true, true],
                first: Some(fatal("bad key")),
                status: Status::Failed,
            },
            Case {
                name: "the first stop of a bucket stays its stop",
                met: vec![
                    (bucket("search"), budget("search.list")),
                    (bucket("search"), spent("search")),
                ],
                stopped: [false, true],
                first: Some(budget("search.list")),
                status: Status::BudgetExhausted,
            },
            Case {
                name: "a bucket's stop before a stop of all is the one reported",
                met: vec![
                    (bucket("search"), spent("search")),
                    (Scope::Every, fatal("bad key")),
                ],
                stopped: [true, true],
                first: Some(spent("search")),
                status: Status::UpstreamQuotaExhausted,
            },
            Case {
                name: "the first stop of all wins over a later one",
                met: vec![
                    (Scope::Every, interrupted.clone()),
                    (Scope::Every, fatal("bad key")),
                ],
                stopped: [true, true],
                first: Some(interrupted),
                status: Status::Interrupted,
            },
        ];
        for c in cases {
            let stops = stops();
            for (scope, stop) in c.met {
                stops.record(scope, stop);
            }
            let got = [stops.stopped(BUDGET_POLICY), stops.stopped("search")];
            assert_eq!(got, c.stopped, "{}: [budget, search] stopped", c.name);
            assert_eq!(stops.first(), c.first, "{}: the stop reported", c.name);
            assert_eq!(stops.status(), c.status, "{}: a cut-short region", c.name);
        }
    }

    /// A stop of the bucket waited on, or of every call, ends the wait; another
    /// bucket's does not.
    #[tokio::test]
    async fn only_a_stop_of_its_calls_wakes_a_waiter() {
        let cases = [
            ("its bucket", bucket("search"), true),
            ("every call", Scope::Every, true),
            ("another bucket", bucket(BUDGET_POLICY), false),
        ];
        for (name, scope, wakes) in cases {
            let stops = Arc::new(stops());
            let waiting = tokio::spawn({
                let stops = Arc::clone(&stops);
                async move { stops.woken("search").await }
            });
            tokio::task::yield_now().await;
            stops.record(scope, fatal("a stop"));
            let woke = tokio::time::timeout(Duration::from_millis(200), waiting)
                .await
                .is_ok();
            assert_eq!(woke, wakes, "a stop of {name}");
        }
    }

    /// An interrupt stops every call but lets those in flight finish; giving them up
    /// is a second step.
    #[tokio::test]
    async fn an_interrupt_stops_new_calls_before_it_gives_up_those_in_flight() {
        let stops = stops();
        stops.interrupt("SIGINT");
        assert!(stops.stopped(BUDGET_POLICY));
        assert_eq!(stops.status(), Status::Interrupted);
        let still_waiting = tokio::time::timeout(Duration::from_millis(50), stops.abandoned())
            .await
            .is_err();
        assert!(still_waiting, "calls in flight are not given up yet");
        stops.abandon_in_flight();
        tokio::time::timeout(Duration::from_secs(2), stops.abandoned())
            .await
            .expect("given up");
    }
}
