//! Making a run's calls: each charged to the budget right before it is made, regions
//! in parallel with their pages in order, and shared stops: one per bucket, that ends
//! every task's calls of that bucket as soon as it (or the upstream, for it) says no
//! (DESIGN.md 3.9), and one that ends every call (a fatal error, a signal).

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{OnceCell, Semaphore, watch};
use tokio::task::JoinSet;

use super::error::RunError;
use super::lock::{self, RegionLock};
use super::outcome::{
    Attempts, BucketWindow, BudgetWindow, CallOutcome, FollowReport, RegionReport, RunReport,
    Status, Stop, overall,
};
use super::plan::{self, Freshness, Step};
use crate::config::{Follow, Region};
use crate::error::chain;
use crate::progress::RegionBar;
use crate::quota::skew::{self, Reading, Skew};
use crate::quota::{Allowance, Budget, Charge, DownPolicy, Journal, Limiter, LimiterError, micros};
use crate::store::{
    CallCount, FollowCounts, RegionOutcome, RunKind, RunOutcome, Store, StoreError,
};
use crate::youtube::{
    CallError, Client, ErrorClass, MAX_RESULTS, SEARCH_LIST, SearchRequest, VIDEO_CATEGORIES_LIST,
    VIDEOS_BATCH_GET_STATS, VIDEOS_LIST, VideoRecord, dated,
};

/// The upstream methods a run calls.
pub const METHODS: [&str; 3] = [VIDEOS_LIST, VIDEO_CATEGORIES_LIST, SEARCH_LIST];

/// At most this many attempts per call, each charged (DESIGN.md section 5).
pub const MAX_ATTEMPTS: u32 = 3;
const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_CAP: Duration = Duration::from_secs(8);

/// Full-jitter exponential backoff: a uniformly random wait up to base × 2^(n-1),
/// capped, so that many clients retrying after the same hiccup spread out.
pub fn backoff(attempt: u32) -> Duration {
    let ceiling = BACKOFF_BASE
        .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(BACKOFF_CAP);
    ceiling.mul_f64(rand::random::<f64>())
}

use crate::clock::Clock;

/// What a run was asked to do: fixed before it starts, read by every region task.
pub struct RunSettings {
    pub run_id: String,
    pub kind: RunKind,
    pub budget: Budget,
    pub allowance: Allowance,
    /// How many regions are fetched at once; at least one.
    pub concurrency: usize,
    /// The follow-ups after every region's calls, when configured.
    pub follow: Option<Follow>,
}

/// What a run works through: the budget's limiter, the upstream, and the database
/// (`db` is its path, for the region locks and the journal beside it).
pub struct RunDeps {
    pub limiter: Limiter,
    pub client: Client,
    pub store: Store,
    pub db: PathBuf,
    /// The clock the run decides by (the one its limiter was given): when a stop
    /// frees, what a page is stamped with, how old a search may be. Durations the
    /// run measures (its own length, a call's latency) are `Instant`s: they measure,
    /// they decide nothing.
    pub clock: Arc<dyn Clock>,
}

/// What a run learns as it goes, shared by its region tasks: only the run itself
/// reads or changes it, and its report is what the outside sees of it.
struct RunState {
    seq: AtomicU64,
    units: AtomicU64,
    /// Units of calls made unmetered while the limiter was down, and journalled.
    units_unmetered: AtomicU64,
    calls: AtomicU64,
    attempts: Mutex<Attempts>,
    stop: Mutex<Stops>,
    /// Why the limiter was found unreachable. Once set, it stays down for the rest of
    /// the run: asking again would cost every call a connect timeout, and the calls
    /// journalled meanwhile reach the window at the next command's replay anyway.
    limiter_down: OnceLock<String>,
    /// Opened at the first journalled call: most runs never need it.
    journal: OnceCell<Arc<Journal>>,
    /// Set when the calls in flight are to be given up (a signal's grace is over).
    abandon: watch::Sender<bool>,
    /// The limiter's clock against the upstream's (DESIGN.md 6).
    clock: ClockCheck,
}

/// What a run knows of the limiter's clock: each answer's `Date` is compared with the
/// time of the charge before it.
#[derive(Default)]
struct ClockCheck {
    /// The last skew recorded was too far: until an answer agrees, one call at a time,
    /// so that at most one is made on a wrong clock.
    distrusted: AtomicBool,
    /// Held from a charge until its answer is checked while the clock is distrusted.
    one_at_a_time: tokio::sync::Mutex<()>,
    /// The run has recorded a reading (one a run is enough to show the skew).
    recorded: AtomicBool,
    /// The run stopped on a skew: said and recorded once.
    stopped: AtomicBool,
}

impl RunState {
    fn new() -> RunState {
        RunState {
            seq: AtomicU64::new(0),
            units: AtomicU64::new(0),
            units_unmetered: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            attempts: Mutex::new(Attempts::new()),
            stop: Mutex::new(Stops::default()),
            limiter_down: OnceLock::new(),
            journal: OnceCell::new(),
            abandon: watch::Sender::new(false),
            clock: ClockCheck::default(),
        }
    }
}

/// Where a run stands on stopping.
#[derive(Debug, Default)]
struct Stops {
    /// The first stop of any kind: the one the run reports.
    first: Option<Stop>,
    /// A stop of every call: a fatal error or a signal.
    all: Option<Stop>,
    /// Per bucket, the stop of the calls charged to it (spent, blocked by the
    /// upstream, or the limiter down and the method denied).
    buckets: BTreeMap<String, Stop>,
}

/// Everything a run needs, shared by its region tasks: its settings, its
/// dependencies (held here, the store behind a lock the tasks share), and its state.
pub struct Run {
    settings: RunSettings,
    limiter: Limiter,
    client: Client,
    store: Arc<Mutex<Store>>,
    db: PathBuf,
    clock: Arc<dyn Clock>,
    state: RunState,
}

/// The deepest chart position stored: the chart holds 200 videos (DESIGN.md 5).
const MAX_RANK: usize = 200;

/// Why a call did not produce a result.
enum Failed {
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

impl Run {
    pub fn new(settings: RunSettings, deps: RunDeps) -> Run {
        let RunDeps {
            limiter,
            client,
            store,
            db,
            clock,
        } = deps;
        Run {
            settings: RunSettings {
                concurrency: settings.concurrency.max(1),
                ..settings
            },
            limiter,
            client,
            store: Arc::new(Mutex::new(store)),
            db,
            clock,
            state: RunState::new(),
        }
    }

    /// The run's id, as its log lines and its row name it.
    pub fn id(&self) -> &str {
        &self.settings.run_id
    }

    /// A signal arrived: no new calls from now on. Calls already sent may finish and
    /// their pages are stored, until [`Run::abandon_in_flight`].
    pub fn interrupt(&self, signal: &'static str) {
        self.halt(Stop::Interrupted { signal });
        // A region waiting out a retry's backoff wakes up to see the stop.
        self.state.abandon.send_replace(false);
    }

    /// Gives up the calls still waiting for an answer; their regions end as the
    /// run's stop says. Their units stay charged (the request may have arrived).
    pub fn abandon_in_flight(&self) {
        self.state.abandon.send_replace(true);
    }

    /// Resolves once the calls in flight are to be given up.
    async fn abandoned(&self) {
        let mut rx = self.state.abandon.subscribe();
        // The sender lives as long as the run, so the error (it was dropped) never comes.
        let _ = rx.wait_for(|gone| *gone).await;
    }

    /// Resolves once the calls of `method` have stopped (its bucket's, or every call),
    /// at once when they already have (checked after subscribing, so no stop slips
    /// between).
    async fn woken(&self, method: &str) {
        let mut rx = self.state.abandon.subscribe();
        // Another bucket's stop wakes every waiter; only one of `method`'s ends the wait.
        while !self.stopped_for(method) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Whether the calls of `method` have stopped: every call, or its bucket's.
    fn stopped_for(&self, method: &str) -> bool {
        let bucket = self.bucket_of(method);
        self.state
            .stop
            .lock()
            .map_or(true, |s| s.all.is_some() || s.buckets.contains_key(bucket))
    }

    /// The bucket `method` is charged to (the main one for a method without a cost,
    /// which the charge refuses anyway).
    fn bucket_of(&self, method: &str) -> &str {
        self.settings
            .budget
            .bucket_of(method)
            .map_or(crate::quota::BUDGET_POLICY, |b| b.name)
    }

    fn stop_status(&self) -> Status {
        self.state
            .stop
            .lock()
            .ok()
            .and_then(|s| s.first.as_ref().map(Stop::status))
            .unwrap_or(Status::BudgetExhausted)
    }

    /// Stops every call. The final summary line says why the run stopped
    /// (DESIGN.md: one line), so the moment itself is only a debug event.
    fn halt(&self, stop: Stop) {
        self.record_stop(None, stop);
    }

    /// Stops the calls charged to `bucket`; the others go on (DESIGN.md 3.9).
    fn halt_bucket(&self, bucket: &str, stop: Stop) {
        self.record_stop(Some(bucket), stop);
    }

    /// Records a stop of every call (`bucket` none) or of one bucket's calls; the
    /// first of each kind wins, and the first of all is what the run reports.
    fn record_stop(&self, bucket: Option<&str>, stop: Stop) {
        let Ok(mut stops) = self.state.stop.lock() else {
            return;
        };
        let fresh = bucket.map_or(stops.all.is_none(), |b| !stops.buckets.contains_key(b));
        if !fresh {
            return;
        }
        let why = stop.describe(self.clock.now_us());
        match bucket {
            None => {
                tracing::debug!(run_id = %self.settings.run_id, "stopping: {why}; no further calls");
                stops.all = Some(stop.clone());
            }
            Some(b) => {
                tracing::debug!(run_id = %self.settings.run_id, "stopping the calls of bucket {b}: {why}");
                stops.buckets.insert(b.to_owned(), stop.clone());
            }
        }
        stops.first.get_or_insert(stop);
        drop(stops);
        // Wakes the regions waiting out a retry's backoff (`woken`): a budget stop
        // cuts the wait short as a signal does.
        self.state.abandon.send_modify(|_| {});
    }

    /// Counts one attempt at `method` that ended as `outcome`.
    fn count_attempt(&self, method: &'static str, outcome: CallOutcome) {
        // A poisoned map only loses a metric; the run itself goes on.
        if let Ok(mut attempts) = self.state.attempts.lock() {
            *attempts.entry((method, outcome)).or_insert(0) += 1;
        }
    }

    /// Charges one call of `method` to the budget before it is made. Says the
    /// limiter's clock when it granted the charge; `None` for a call made unmetered.
    async fn charge(
        &self,
        method: &'static str,
        report: &mut RegionReport,
    ) -> Result<Option<i64>, Failed> {
        if self.stopped_for(method) {
            return Err(Failed::NotReached);
        }
        let id = format!(
            "{}-{}",
            self.settings.run_id,
            self.state.seq.fetch_add(1, Ordering::Relaxed)
        );
        let charge = match self
            .settings
            .budget
            .charge(&id, method, 1, self.settings.allowance)
        {
            Ok(c) => c,
            Err(e) => {
                self.halt(Stop::Fatal {
                    message: e.to_string(),
                });
                return Err(Failed::Stopped);
            }
        };
        if let Some(reason) = self.state.limiter_down.get() {
            return self.unmetered(method, &charge, reason, report).await;
        }
        match self.limiter.charge_timed(&charge).await {
            Ok((d, at_us)) if d.granted => {
                let run_units =
                    self.state.units.fetch_add(charge.units, Ordering::Relaxed) + charge.units;
                report.units += charge.units;
                // Before the call: a process killed from here on leaves rows that show
                // the units it spent, not 0.
                let (run_id, code, units) = (
                    self.settings.run_id.clone(),
                    report.code.clone(),
                    report.units,
                );
                let doing = format!("recording the units of region {code}");
                if let Err(e) = self
                    .with_store(doing, move |s| {
                        s.record_units(&run_id, &code, units, run_units)
                    })
                    .await
                {
                    tracing::debug!(region = %report.code, "{}", chain(&e));
                }
                Ok(Some(at_us))
            }
            Ok((d, _)) => {
                let stop = Stop::denied(method, &charge.bucket, &d, self.clock.now_us());
                self.halt_bucket(&charge.bucket, stop);
                Err(Failed::Stopped)
            }
            Err(e) if e.is_unavailable() => {
                let reason = self.limiter_is_down(&e);
                self.unmetered(method, &charge, reason, report).await
            }
            Err(e) => {
                self.halt(Stop::Fatal {
                    message: format!("charging {method}: {e}"),
                });
                Err(Failed::Stopped)
            }
        }
    }

    /// Marks the limiter down for the rest of the run, saying so once.
    fn limiter_is_down(&self, e: &LimiterError) -> &str {
        self.state.limiter_down.get_or_init(|| {
            tracing::warn!(
                run_id = %self.settings.run_id,
                "{e}; going on without it for the rest of this run: calls [when_limiter_down] allows are made unmetered and journalled in {}, to be counted in the window once it answers again; the others stop the run",
                self.db.display()
            );
            e.to_string()
        })
    }

    /// A call while the limiter is down: journalled and made when its method is
    /// allowed, the end of the run when it is not.
    async fn unmetered(
        &self,
        method: &'static str,
        charge: &Charge,
        reason: &str,
        report: &mut RegionReport,
    ) -> Result<Option<i64>, Failed> {
        if self.settings.budget.when_down(method) == DownPolicy::Deny {
            self.halt_bucket(
                &charge.bucket,
                Stop::LimiterDown {
                    method,
                    reason: reason.to_owned(),
                },
            );
            return Err(Failed::Stopped);
        }
        // The row is written before the call is made, as a charge would be: a call
        // the journal does not hold must not happen.
        if let Err(e) = self.write_journal(charge).await {
            self.halt(Stop::Fatal {
                message: format!(
                    "the limiter is down ({reason}) and {method} could not be journalled: {}",
                    chain(&e)
                ),
            });
            return Err(Failed::Stopped);
        }
        self.state
            .units_unmetered
            .fetch_add(charge.units, Ordering::Relaxed);
        report.units_unmetered += charge.units;
        Ok(None)
    }

    /// Appends `charge` to the journal, opening it the first time.
    async fn write_journal(&self, charge: &Charge) -> Result<(), RunError> {
        let task = |source| RunError::Task {
            doing: "journalling a call made while the limiter is down".into(),
            source,
        };
        let db = self.db.clone();
        let journal = self
            .state
            .journal
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || Journal::open(&db))
                    .await
                    .map_err(task)?
                    .map(Arc::new)
                    .map_err(|source| RunError::Journal { source })
            })
            .await?;
        let (journal, key, charge) = (
            Arc::clone(journal),
            self.settings.budget.key.clone(),
            charge.clone(),
        );
        tokio::task::spawn_blocking(move || journal.record(&key, &charge))
            .await
            .map_err(task)?
            .map_err(|source| RunError::Journal { source })
    }

    /// One upstream call, charged before every attempt; transient failures are tried
    /// again after a backoff, at most [`MAX_ATTEMPTS`] attempts in all.
    async fn call<T, F, Fut>(
        &self,
        method: &'static str,
        report: &mut RegionReport,
        mut attempt: F,
    ) -> Result<T, Failed>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, CallError>>,
    {
        for n in 1..=MAX_ATTEMPTS {
            let one_at_a_time = self.clock_gate().await;
            let charging = Instant::now();
            let charged_at = self.charge(method, report).await?;
            self.state.calls.fetch_add(1, Ordering::Relaxed);
            let (answered, date) = tokio::select! {
                answered = dated(attempt()) => answered,
                () = self.abandoned() => {
                    tracing::warn!(region = %report.code, "{method}: the call was given up, the run is stopping");
                    return Err(Failed::Stopped);
                }
            };
            let clock = match (charged_at, date) {
                (Some(limiter_at_us), Some(date_s)) => {
                    self.check_clock(Reading {
                        limiter_at_us,
                        elapsed: charging.elapsed(),
                        date_s,
                    })
                    .await
                }
                _ => Ok(()),
            };
            drop(one_at_a_time);
            if let Err(stopped) = clock {
                // The call was made: counted as it ended, though nothing of it is kept.
                let outcome = answered
                    .as_ref()
                    .map_or_else(|e| outcome_of(e.class()), |_| CallOutcome::Ok);
                self.count_attempt(method, outcome);
                return Err(stopped);
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
            let err = self.client.scrub(&err.to_string());
            match class {
                ErrorClass::Transient if n < MAX_ATTEMPTS => {
                    let wait = backoff(n);
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
                    let bucket = self.bucket_of(method).to_owned();
                    let until_us = crate::youtube::quota_reset_after(self.clock.now_us());
                    // A limiter already found down is not asked again (its timeout
                    // would be paid once more); this bucket stops either way.
                    let blocked = match self.state.limiter_down.get() {
                        Some(reason) => Err(format!("the limiter is down: {reason}")),
                        None => self
                            .limiter
                            .block_until(&bucket, until_us)
                            .await
                            .map_err(|e| e.to_string()),
                    };
                    if let Err(e) = blocked {
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
                    self.halt_bucket(&bucket, stop);
                    return Err(Failed::Stopped);
                }
                ErrorClass::Fatal => {
                    let message = err;
                    // The region whose call was refused says why in `--json` too.
                    report.error = Some(message.clone());
                    self.halt(Stop::Fatal { message });
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

    /// While the limiter's clock is distrusted, the turn to make the one call whose
    /// answer says whether it agrees; the others wait for that answer. `None` once
    /// it is trusted.
    async fn clock_gate(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let check = &self.state.clock;
        if !check.distrusted.load(Ordering::SeqCst) {
            return None;
        }
        let turn = check.one_at_a_time.lock().await;
        check.distrusted.load(Ordering::SeqCst).then_some(turn)
    }

    /// Compares the limiter's clock at a charge with the `Date` of the call's answer:
    /// too far apart, the run stops before its next call (the answer is not stored:
    /// its times would be the wrong clock's); agreeing, a distrusted clock is trusted
    /// again. Either way the skew is recorded, once a run.
    async fn check_clock(&self, reading: Reading) -> Result<(), Failed> {
        let Some(clock) = self.limiter.clock() else {
            return Ok(());
        };
        let measured = reading.measure();
        let skew = Skew::of(clock, &measured);
        let check = &self.state.clock;
        if measured.too_far() {
            if !check.stopped.swap(true, Ordering::SeqCst) {
                tracing::error!(
                    run_id = %self.settings.run_id,
                    clock = clock.as_str(),
                    skew_s = skew.seconds(),
                    "{} (the Date of its answers): {}. The budget's window cannot be trusted on it, so this run stops before its next call; until a run sees the clocks agree, each run makes one call to check them and `budget charge` is refused",
                    skew.describe(),
                    clock.fix()
                );
                // Stopped first, so that no region starts a call meanwhile.
                self.halt(Stop::ClockSkew { skew });
                self.record_skew(skew).await;
            }
            return Err(Failed::Stopped);
        }
        let was_distrusted = check.distrusted.swap(false, Ordering::SeqCst);
        if was_distrusted {
            tracing::info!(
                run_id = %self.settings.run_id,
                "{}: the clocks agree again; the run goes on",
                skew.describe()
            );
        }
        if !check.recorded.swap(true, Ordering::SeqCst) || was_distrusted {
            self.record_skew(skew).await;
        }
        Ok(())
    }

    /// Records `skew` as the last seen on its clock; a failure is logged (the check
    /// itself has already decided).
    async fn record_skew(&self, skew: Skew) {
        let db = self.db.clone();
        let recorded = tokio::task::spawn_blocking(move || {
            skew::record(&db, crate::schema::MIGRATIONS, &skew)
        })
        .await;
        match recorded {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(run_id = %self.settings.run_id, "{e}"),
            Err(e) => {
                tracing::warn!(run_id = %self.settings.run_id, "recording the clock skew: {e}")
            }
        }
    }

    /// Runs `work` on the store off the async threads; `doing` says what for, in
    /// the error.
    async fn with_store<T: Send + 'static>(
        &self,
        doing: String,
        work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, RunError> {
        let store = Arc::clone(&self.store);
        let what = doing.clone();
        tokio::task::spawn_blocking(move || {
            let guard = store.lock().map_err(|_| RunError::Poisoned {
                doing: what.clone(),
            })?;
            work(&guard).map_err(|source| RunError::Store {
                doing: what,
                source: Box::new(source),
            })
        })
        .await
        .map_err(|source| RunError::Task { doing, source })?
    }

    fn end_region(report: &mut RegionReport, failed: Failed, stop_status: Status) {
        match failed {
            Failed::Stopped => report.status = stop_status,
            // A region that made no call at all was never reached by this run.
            Failed::NotReached
                if report.pages == 0 && report.units == 0 && report.units_unmetered == 0 =>
            {
                report.status = Status::NotAttempted;
            }
            Failed::NotReached => report.status = stop_status,
            Failed::Region(message) | Failed::ChartNotFound(message) => {
                tracing::error!(region = %report.code, "{message}");
                report.status = Status::Failed;
                report.error = Some(message);
            }
        }
    }

    /// The region's trending pages, then its category names when `steps` (the
    /// region's [`plan::steps`]) list them.
    async fn core(
        self: Arc<Self>,
        region: Region,
        steps: Vec<Step>,
        mut report: RegionReport,
    ) -> RegionReport {
        self.mark_region(&region.code, Status::Running).await;
        let bar = RegionBar::new(
            &region.code,
            steps
                .iter()
                .filter(|s| s.phase() == plan::Phase::Core)
                .count() as u64,
        );
        let result = async {
            let pages = steps
                .iter()
                .filter(|s| matches!(s, Step::TrendingPage(_)))
                .count();
            self.chart(&region, None, pages, &mut report, &bar).await?;
            if steps.contains(&Step::Categories) {
                let got = self
                    .call(VIDEO_CATEGORIES_LIST, &mut report, || {
                        self.client.categories(&region.code, region.hl.as_deref())
                    })
                    .await?;
                let pairs: Vec<(String, String)> =
                    got.into_iter().map(|c| (c.id, c.title)).collect();
                let code = region.code.clone();
                let doing = format!("storing the category names of region {}", region.code);
                let now = self.clock.now_s();
                self.with_store(doing, move |s| s.store_categories(&code, &pairs, now))
                    .await?;
                bar.step("categories");
            }
            let code = region.code.clone();
            let doing = format!("marking region {} complete", region.code);
            let now = self.clock.now_s();
            self.with_store(doing, move |s| s.mark_region_complete(&code, now))
                .await?;
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            Self::end_region(&mut report, failed, self.stop_status());
        }
        bar.finish(report.status.as_str());
        self.mark_after(&report, &steps, plan::Phase::Core).await;
        report
    }

    /// Records in the history what a region of this run is doing (see
    /// [`Store::mark_region`]). A failure costs only the line's accuracy until the run
    /// ends, so it is logged, not fatal.
    async fn mark_region(&self, code: &str, status: Status) {
        let (run_id, region) = (self.settings.run_id.clone(), code.to_owned());
        let doing = format!("recording that region {code} is {status}");
        if let Err(e) = self
            .with_store(doing, move |s| s.mark_region(&run_id, &region, status))
            .await
        {
            tracing::warn!(region = %code, "{}", chain(&e));
        }
    }

    /// After a phase of a region: `queued` again when a later phase has steps for it,
    /// else how it ended.
    async fn mark_after(&self, report: &RegionReport, steps: &[Step], phase: plan::Phase) {
        let later = steps.iter().any(|s| s.phase() > phase);
        let status = if report.going() && later {
            Status::Queued
        } else {
            report.status
        };
        self.mark_region(&report.code, status).await;
    }

    /// Up to `pages` pages of one of the region's charts (the overall one when
    /// `category` is none), each stored as it arrives. The chart may end before the
    /// planned pages do: no nextPageToken.
    async fn chart(
        &self,
        region: &Region,
        category: Option<u32>,
        pages: usize,
        report: &mut RegionReport,
        bar: &RegionBar,
    ) -> Result<(), Failed> {
        let chart = match category {
            Some(c) => format!("the chart of category {c}"),
            None => "the trending chart".to_owned(),
        };
        let mut token: Option<String> = None;
        // The chart position of the next video. A page may hold fewer than 50
        // videos, so ranks continue from the videos actually received, not from
        // the page number (which left gaps: 1..7, then 51..).
        let mut next_rank: u32 = 1;
        // Every token sent in this fetch: one coming back means the upstream is
        // looping, and following it would store the same videos as new ranks.
        let mut tokens_seen: HashSet<String> = HashSet::new();
        for page in 1..=pages {
            let got = self
                .call(VIDEOS_LIST, report, || {
                    self.client.chart_page(
                        &region.code,
                        category,
                        region.hl.as_deref(),
                        token.as_deref(),
                    )
                })
                .await?;
            let (run_id, code, items) =
                (self.settings.run_id.clone(), region.code.clone(), got.items);
            let first_rank = next_rank;
            let last_rank = first_rank as usize + items.len().saturating_sub(1);
            if !items.is_empty() && last_rank > MAX_RANK {
                return Err(Failed::Region(format!(
                    "{VIDEOS_LIST} for region {}: page {page} of {chart} would hold chart positions up to {last_rank}, past the chart's {MAX_RANK}; the upstream broke the protocol, the region stops here",
                    region.code,
                )));
            }
            next_rank = next_rank.saturating_add(u32::try_from(items.len()).unwrap_or(u32::MAX));
            let doing = match category {
                Some(c) => format!(
                    "storing page {page} of the chart of category {c} of region {}",
                    region.code
                ),
                None => format!("storing trending page {page} of region {}", region.code),
            };
            let now = self.clock.now_s();
            let stored = self
                .with_store(doing, move |s| {
                    s.store_chart_page(&run_id, &code, category, first_rank, &items, now)
                })
                .await?;
            report.pages += 1;
            report.videos += stored as u64;
            bar.step(&match category {
                Some(c) => format!("category {c} page {page}"),
                None => format!("page {page}"),
            });
            if let Some(sent) = token.take() {
                tokens_seen.insert(sent);
            }
            match got.next_page_token {
                Some(t) if tokens_seen.contains(&t) => {
                    return Err(Failed::Region(self.client.scrub(&format!(
                        "{VIDEOS_LIST} for region {}: page {page} of {chart} gave page token {t:?} again, already followed in this fetch; the upstream broke the protocol, the region stops here",
                        region.code
                    ))));
                }
                Some(t) => token = Some(t),
                None => break,
            }
        }
        Ok(())
    }

    /// The category charts `steps` list, each up to its planned pages. A category
    /// the upstream has no chart for fails alone, with a warning, and is left out of
    /// the next runs until the region's category names are next fetched.
    async fn charts(
        self: Arc<Self>,
        region: Region,
        steps: Vec<Step>,
        mut report: RegionReport,
    ) -> RegionReport {
        let mut planned: Vec<(u32, usize)> = Vec::new();
        for step in &steps {
            if let Step::ChartPage { category, .. } = step {
                match planned.last_mut() {
                    Some((c, pages)) if c == category => *pages += 1,
                    _ => planned.push((*category, 1)),
                }
            }
        }
        if planned.is_empty() {
            return report;
        }
        self.mark_region(&region.code, Status::Running).await;
        let bar = RegionBar::new(&region.code, planned.iter().map(|(_, n)| *n as u64).sum());
        let result = async {
            for (category, pages) in planned {
                match self
                    .chart(&region, Some(category), pages, &mut report, &bar)
                    .await
                {
                    Ok(()) => {}
                    Err(Failed::ChartNotFound(message)) => {
                        tracing::warn!(
                            region = %region.code,
                            category,
                            "{message}; region {} has no chart of category {category}: not asked again until its category names are next fetched",
                            region.code
                        );
                        let code = region.code.clone();
                        let doing = format!(
                            "noting that region {} has no chart of category {category}",
                            region.code
                        );
                        let now = self.clock.now_s();
                        self.with_store(doing, move |s| {
                            s.mark_chart_missing(&code, category, now)
                        })
                        .await?;
                    }
                    Err(other) => return Err(other),
                }
            }
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            Self::end_region(&mut report, failed, self.stop_status());
        }
        bar.finish(report.status.as_str());
        self.mark_after(&report, &steps, plan::Phase::Charts).await;
        report
    }

    /// The follow-ups (DESIGN.md section 5): the counts of the videos on any chart
    /// in the last `follow.days` and not counted for `follow.every`, stalest first, 50
    /// a call, until none is due or their bucket says no (which stops only these).
    async fn follow_ups(self: Arc<Self>, follow: Follow, now: i64) -> FollowReport {
        let mut report = RegionReport::new("follow-ups");
        let mut removed = 0u64;
        let days = i64::from(follow.days) * 86_400;
        let every = i64::try_from(follow.every.as_secs()).unwrap_or(i64::MAX);
        let result = async {
            let due = self
                .with_store(
                    "choosing the videos due for a follow-up".to_owned(),
                    move |s| s.due_for_follow_up(now - days, now.saturating_sub(every)),
                )
                .await?;
            for batch in due.chunks(MAX_RESULTS) {
                let ids = batch.to_vec();
                let counts = self
                    .call(VIDEOS_BATCH_GET_STATS, &mut report, || {
                        self.client.video_counts(&ids)
                    })
                    .await?;
                let counts: Vec<FollowCounts> = counts
                    .into_iter()
                    .map(|c| FollowCounts {
                        video_id: c.id,
                        view_count: c.view_count,
                        like_count: c.like_count,
                        comment_count: c.comment_count,
                    })
                    .collect();
                let now = self.clock.now_s();
                let stored = self
                    .with_store("storing a follow-up's counts".to_owned(), move |s| {
                        s.store_follow_ups(&ids, &counts, now)
                    })
                    .await?;
                report.pages += 1;
                report.videos += stored.counted as u64;
                removed += stored.removed as u64;
            }
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            Self::end_region(&mut report, failed, self.stop_status());
        }
        if removed > 0 {
            tracing::info!(
                run_id = %self.settings.run_id,
                "follow-ups: {removed} videos are no longer shown by the upstream (removed or private); marked so"
            );
        }
        FollowReport {
            status: report.status,
            calls: u64::from(report.pages),
            videos: report.videos,
            removed,
            units: report.units,
            units_unmetered: report.units_unmetered,
            error: report.error,
        }
    }

    /// The searches `steps` list: one search.list each, then one videos.list for the
    /// details of what it found.
    async fn searches(
        self: Arc<Self>,
        region: Region,
        steps: Vec<Step>,
        mut report: RegionReport,
    ) -> RegionReport {
        let planned: Vec<_> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Search { index, .. } => region.searches.get(*index),
                _ => None,
            })
            .collect();
        if planned.is_empty() {
            return report;
        }
        self.mark_region(&region.code, Status::Running).await;
        let result = async {
            for search in planned {
                let published_after = search.published_within.and_then(|w| {
                    jiff::Timestamp::from_microsecond(self.clock.now_us() - micros(w)).ok()
                });
                let req = SearchRequest {
                    region: &region.code,
                    q: &search.q,
                    order: search.order,
                    published_after,
                };
                let found = self
                    .call(SEARCH_LIST, &mut report, || self.client.search_page(&req))
                    .await?;
                if found.video_ids.is_empty() {
                    continue;
                }
                let ids = found.video_ids;
                let details = self
                    .call(VIDEOS_LIST, &mut report, || {
                        self.client.videos_by_id(&ids, region.hl.as_deref())
                    })
                    .await?;
                let ranked = in_rank_order(&ids, details.items);
                let (run_id, code, name) = (
                    self.settings.run_id.clone(),
                    region.code.clone(),
                    search.name.clone(),
                );
                let doing = format!(
                    "storing search \"{}\" of region {}",
                    search.name, region.code
                );
                let now = self.clock.now_s();
                let stored = self
                    .with_store(doing, move |s| {
                        s.store_search_page(&run_id, &code, &name, 1, &ranked, now)
                    })
                    .await?;
                report.videos += stored as u64;
            }
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            Self::end_region(&mut report, failed, self.stop_status());
        }
        self.mark_after(&report, &steps, plan::Phase::Searches)
            .await;
        report
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

/// The details in the order the search ranked them; videos.list does not promise it.
fn in_rank_order(ids: &[String], items: Vec<VideoRecord>) -> Vec<VideoRecord> {
    let mut by_id: BTreeMap<String, VideoRecord> =
        items.into_iter().map(|v| (v.id.clone(), v)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}

/// Runs `work` for every region still going, at most `concurrency` at once, and
/// returns the reports in the order given.
async fn each_region<F, Fut>(
    run: &Arc<Run>,
    reports: Vec<(Region, RegionReport)>,
    work: F,
) -> Vec<(Region, RegionReport)>
where
    F: Fn(Arc<Run>, Region, RegionReport) -> Fut,
    Fut: Future<Output = RegionReport> + Send + 'static,
{
    let permits = Arc::new(Semaphore::new(run.settings.concurrency));
    let mut tasks = JoinSet::new();
    // Which region each task fetches, to report one that panicked.
    let mut regions_of = std::collections::HashMap::new();
    let mut done: Vec<Option<(Region, RegionReport)>> = Vec::with_capacity(reports.len());
    for (i, (region, report)) in reports.into_iter().enumerate() {
        if !report.going() {
            done.push(Some((region, report)));
            continue;
        }
        done.push(None);
        let fut = work(Arc::clone(run), region.clone(), report);
        // The permit is taken here, in plan order, not inside the task: spawned tasks
        // are first polled in any order, and the plan's order (oldest region first)
        // decides which regions a run cut short by the budget gets to.
        let permit = Arc::clone(&permits).acquire_owned().await;
        let task = tasks.spawn({
            let region = region.clone();
            async move {
                let _permit = permit;
                (i, region, fut.await)
            }
        });
        regions_of.insert(task.id(), (i, region));
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, region, report)) => done[i] = Some((region, report)),
            // A panic is a bug, not a reason to drop the region: it ends `failed`,
            // and so does the run (exit 1). The units it charged stay in the run's.
            Err(e) => {
                let Some((i, region)) = regions_of.remove(&e.id()) else {
                    tracing::error!("a region task failed: {e}");
                    continue;
                };
                let mut report = RegionReport::new(&region.code);
                report.status = Status::Failed;
                report.error = Some(format!("the region's task failed: {e}"));
                tracing::error!(region = %region.code, "{}: the region's task failed: {e}", region.code);
                done[i] = Some((region, report));
            }
        }
    }
    done.into_iter().flatten().collect()
}

/// Runs the plan for `regions` and reports how it went. Everything fetched is
/// committed page by page, whatever stops the run.
pub async fn execute(run: Arc<Run>, regions: Vec<Region>) -> RunReport {
    let began = std::time::Instant::now();
    let start_recorded = record_start(&run, &regions).await;
    distrust_a_skewed_clock(&run).await;
    let fresh = freshness_or_none(&run).await;
    let region_refs: Vec<&Region> = regions.iter().collect();
    let ordered: Vec<Region> = plan::order(&region_refs, &fresh)
        .into_iter()
        .cloned()
        .collect();
    let (locks, reports) = lock_regions(&run, ordered);
    // Every phase walks the steps the dry run plans, taken at one moment.
    let now = run.clock.now_s();
    let reports = fetch_regions(&run, reports, &fresh, now).await;
    drop(locks);
    let follow = match run.settings.follow {
        Some(follow) => Some(Arc::clone(&run).follow_ups(follow, now).await),
        None => None,
    };
    let regions: Vec<RegionReport> = reports.into_iter().map(|(_, r)| r).collect();
    record_attempts(&run, &regions).await;
    let stop = run.state.stop.lock().ok().and_then(|s| s.first.clone());
    let status = run_status(follow.as_ref(), overall(&regions, stop.as_ref()));
    let (report, now) = run_report(&run, status, regions, follow, stop.as_ref(), began).await;
    // A run whose start is not in the database has no rows to finish (and made no
    // call): trying would only add a second, unrelated error to the first.
    if start_recorded {
        record_end(&run, &report, stop.as_ref(), now).await;
    }
    report
}

/// Records the run's start and its regions; false when the start could not be
/// recorded, which halts the run before its first charge.
async fn record_start(run: &Run, regions: &[Region]) -> bool {
    let run_id = run.settings.run_id.clone();
    let kind = run.settings.kind;
    let started = run.clock.now_s();
    let codes: Vec<String> = regions.iter().map(|r| r.code.clone()).collect();
    if let Err(e) = run
        .with_store(format!("recording the start of run {run_id}"), {
            let run_id = run_id.clone();
            move |s| s.begin_run(&run_id, kind, started)
        })
        .await
    {
        // A run that cannot be recorded would spend units no history shows and that
        // no later process could mark abandoned: it stops before its first charge.
        run.halt(Stop::Fatal {
            message: format!("{}; no call made", chain(&e)),
        });
        return false;
    }
    if let Err(e) = run
        .with_store(format!("recording the regions of run {run_id}"), {
            let run_id = run_id.clone();
            move |s| s.begin_run_regions(&run_id, started, &codes)
        })
        .await
    {
        // The run's row is there, and its end records the regions' outcomes.
        tracing::error!(run_id = %run_id, "{}", chain(&e));
    }
    true
}

/// How fresh each region's data is, or nothing (the configured order) when that
/// cannot be read.
async fn freshness_or_none(run: &Arc<Run>) -> BTreeMap<String, Freshness> {
    match freshness(run).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(
                "{}; taking the regions in their configured order",
                chain(&e)
            );
            BTreeMap::new()
        }
    }
}

/// Takes each region's lock, held for the whole run; a region another process is
/// fetching is skipped, one that cannot be locked fails.
fn lock_regions(run: &Run, ordered: Vec<Region>) -> (Vec<RegionLock>, Vec<(Region, RegionReport)>) {
    let mut locks: Vec<RegionLock> = Vec::new();
    let mut reports: Vec<(Region, RegionReport)> = Vec::new();
    for region in ordered {
        let mut report = RegionReport::new(&region.code);
        match lock::try_lock(&run.db, &region.code) {
            Ok(Some(l)) => locks.push(l),
            Ok(None) => {
                tracing::info!(region = %region.code, "region {} is being fetched by another process on this host; skipping it", region.code);
                report.status = Status::Skipped;
            }
            Err(e) => {
                report.status = Status::Failed;
                report.error = Some(format!(
                    "locking {}: {e}",
                    lock::lock_path(&run.db, &region.code).display()
                ));
            }
        }
        reports.push((region, report));
    }
    (locks, reports)
}

/// The three phases over every region still going: core charts, category charts,
/// then searches, each walking the steps planned at `now`.
async fn fetch_regions(
    run: &Arc<Run>,
    reports: Vec<(Region, RegionReport)>,
    fresh: &BTreeMap<String, Freshness>,
    now: i64,
) -> Vec<(Region, RegionReport)> {
    let reports = each_region(run, reports, |run, region, report| {
        let steps = plan::steps(&region, fresh.get(&region.code), now);
        run.core(region, steps, report)
    })
    .await;
    let reports = each_region(run, reports, |run, region, report| {
        let steps = plan::steps(&region, fresh.get(&region.code), now);
        run.charts(region, steps, report)
    })
    .await;
    each_region(run, reports, |run, region, report| {
        let steps = plan::steps(&region, fresh.get(&region.code), now);
        run.searches(region, steps, report)
    })
    .await
}

/// Records when each region was last attempted and how it went.
async fn record_attempts(run: &Run, regions: &[RegionReport]) {
    let now = run.clock.now_s();
    for r in regions {
        let (code, status) = (r.code.clone(), r.status);
        let doing = format!("recording the attempt at region {code}");
        if let Err(e) = run
            .with_store(doing, move |s| s.mark_region_attempt(&code, now, status))
            .await
        {
            tracing::error!(region = %r.code, "{}", chain(&e));
        }
    }
}

/// The run's status from its regions': failed follow-ups fail the run as a failed
/// region does.
fn run_status(follow: Option<&FollowReport>, regions: Status) -> Status {
    match (follow, regions) {
        (Some(f), Status::Complete | Status::BudgetExhausted | Status::UpstreamQuotaExhausted)
            if f.status == Status::Failed =>
        {
            Status::Failed
        }
        (_, status) => status,
    }
}

/// The run's report, with the budget as it stands now, and that moment (unix
/// microseconds).
async fn run_report(
    run: &Run,
    status: Status,
    regions: Vec<RegionReport>,
    follow: Option<FollowReport>,
    stop: Option<&Stop>,
    began: Instant,
) -> (RunReport, i64) {
    let budget = budget_window(run).await;
    let remaining = budget.as_ref().and_then(BudgetWindow::main).map(|main| {
        run.settings
            .budget
            .max_for(run.settings.allowance)
            .saturating_sub(main.used)
    });
    let now = run.clock.now_us();
    let ended_at = now / 1_000_000;
    let report = RunReport {
        run_id: run.settings.run_id.clone(),
        status,
        units_charged: run.state.units.load(Ordering::Relaxed),
        units_unmetered: run.state.units_unmetered.load(Ordering::Relaxed),
        calls: run.state.calls.load(Ordering::Relaxed),
        remaining,
        retry_after_s: stop
            .as_ref()
            .and_then(|s| s.retry_after(now))
            .map(super::report::seconds),
        denied_by: stop.and_then(|s| s.denied_by().map(str::to_owned)),
        regions,
        follow,
        stop_reason: stop.map(|s| s.describe(now)),
        ended_at,
        took: began.elapsed(),
        budget,
        attempts: run
            .state
            .attempts
            .lock()
            .map(|a| a.clone())
            .unwrap_or_default(),
    };
    (report, now)
}

/// Records the run's end: its outcome, each region's, and its calls by method and
/// outcome.
async fn record_end(run: &Run, report: &RunReport, stop: Option<&Stop>, now: i64) {
    // A run failed by its regions, not stopped, says which and why in its row too.
    let failed: Vec<String> = report
        .regions
        .iter()
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.code)))
        .collect();
    let outcome = RunOutcome {
        status: report.status.as_str().to_owned(),
        units: report.units_charged,
        calls: report.calls,
        stop_reason: report
            .stop_reason
            .clone()
            .or_else(|| (!failed.is_empty()).then(|| failed.join("; "))),
        ended_at: report.ended_at,
        duration_us: u64::try_from(report.took.as_micros()).unwrap_or(u64::MAX),
    };
    let details = region_outcomes(report, stop, now);
    let calls: Vec<CallCount> = report
        .attempts
        .iter()
        .map(|((method, outcome), n)| CallCount {
            method: (*method).to_owned(),
            outcome: outcome.as_str().to_owned(),
            calls: *n,
        })
        .collect();
    let run_id = run.settings.run_id.clone();
    if let Err(e) = run
        .with_store(format!("recording the end of run {run_id}"), {
            let run_id = run_id.clone();
            move |s| {
                s.record_run_details(&run_id, &details, &calls)?;
                s.finish_run(&run_id, &outcome)
            }
        })
        .await
    {
        tracing::error!(run_id = %run_id, "{}", chain(&e));
    }
}

/// Reads the last skew recorded on the limiter's clock: one too far makes the run
/// check the clock with its first call before any other (DESIGN.md 6). A record that
/// cannot be read is taken for one too far: the check costs only waiting for one call.
async fn distrust_a_skewed_clock(run: &Run) {
    let Some(clock) = run.limiter.clock() else {
        return;
    };
    let db = run.db.clone();
    let found = tokio::task::spawn_blocking(move || skew::recorded_for(&db, clock))
        .await
        .map_err(|e| e.to_string())
        .and_then(|read| read.map_err(|e| e.to_string()));
    let why = match found {
        Ok(Some(skew)) if skew.too_far() => format!(
            "{} when last compared, at {}",
            skew.describe(),
            crate::human::timestamp(skew.measured_at_us)
        ),
        Ok(_) => return,
        Err(e) => format!("{e}; taking the clock for a wrong one"),
    };
    tracing::warn!(
        run_id = %run.settings.run_id,
        "{why}: the first call checks the clocks, and the run goes on only if they agree"
    );
    run.state.clock.distrusted.store(true, Ordering::SeqCst);
}

/// The budget's own window once the run's calls are done, read once for the report
/// and the metrics. Once found down, the limiter is not asked again in this run, not
/// even for this: its timeout would be paid once more.
async fn budget_window(run: &Run) -> Option<BudgetWindow> {
    if run.state.limiter_down.get().is_some() {
        return None;
    }
    let buckets: Vec<_> = run
        .settings
        .budget
        .buckets()
        .iter()
        .map(|b| b.policy())
        .collect();
    match run.limiter.status(&buckets, &[]).await {
        Ok(st) => Some(BudgetWindow {
            buckets: st
                .policies
                .iter()
                .map(|p| BucketWindow {
                    name: p.name.clone(),
                    used: p.used,
                    blocked_until_us: st.blocked_until(&p.name),
                })
                .collect(),
        }),
        Err(e) => {
            tracing::debug!("the budget's window after the run: {e}");
            None
        }
    }
}

/// Each region's line of the run history: its status, and why when it did not
/// complete (its own error, or else the run's stop).
fn region_outcomes(report: &RunReport, stop: Option<&Stop>, now_us: i64) -> Vec<RegionOutcome> {
    report
        .regions
        .iter()
        .map(|r| {
            let reason = match (&r.error, r.status) {
                (Some(e), _) => Some(e.clone()),
                (None, Status::Complete) => None,
                (None, Status::Skipped) => {
                    Some("being fetched by another process on this host".to_owned())
                }
                (None, _) => stop.map(|s| s.describe(now_us)),
            };
            RegionOutcome {
                region: r.code.clone(),
                status: r.status.as_str().to_owned(),
                pages: u64::from(r.pages),
                videos: r.videos,
                units: r.units,
                reason,
            }
        })
        .collect()
}

/// What the store knows of each region.
async fn freshness(run: &Arc<Run>) -> Result<BTreeMap<String, Freshness>, RunError> {
    run.with_store("reading the regions' state".to_owned(), read_freshness)
        .await
}

/// The regions' last complete fetch and category fetch, from the store.
pub fn read_freshness(store: &Store) -> Result<BTreeMap<String, Freshness>, StoreError> {
    let mut out = BTreeMap::new();
    for state in store.region_states()? {
        let categories_fetched_at = store.categories_fetched_at(&state.region)?;
        let missing_charts = store.missing_charts(&state.region)?.into_iter().collect();
        out.insert(
            state.region.clone(),
            Freshness {
                last_complete_at: state.last_complete_at,
                categories_fetched_at,
                missing_charts,
            },
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_full_jitter_under_a_growing_cap() {
        for attempt in 1..=6 {
            let cap = BACKOFF_BASE
                .saturating_mul(1 << (attempt - 1))
                .min(BACKOFF_CAP);
            for _ in 0..200 {
                assert!(backoff(attempt) <= cap);
            }
        }
        // Full jitter spreads waits over the whole range, down to near zero.
        let waits: Vec<Duration> = (0..500).map(|_| backoff(3)).collect();
        assert!(waits.iter().any(|w| *w < Duration::from_millis(100)));
        assert!(waits.iter().any(|w| *w > Duration::from_millis(800)));
    }

    /// A run over a scratch database, its upstream never answering.
    fn scratch_run(dir: &std::path::Path) -> Arc<Run> {
        scratch_run_on(dir, "http://127.0.0.1:9", crate::clock::system())
    }

    /// A run over a scratch database against the upstream at `base`, the run and its
    /// limiter deciding by `clock`.
    fn scratch_run_on(dir: &std::path::Path, base: &str, clock: Arc<dyn Clock>) -> Arc<Run> {
        let db = dir.join("t.db");
        let budget = crate::config::load_budget(&crate::config::Origin::BuiltIn)
            .expect("built-in costs load");
        let settings = RunSettings {
            run_id: "r1".into(),
            kind: RunKind::Run,
            budget: budget.clone(),
            allowance: Allowance::Ceiling,
            concurrency: 2,
            follow: None,
        };
        let deps = RunDeps {
            limiter: Limiter::Embedded(
                crate::quota::EmbeddedLimiter::open_with_clock(
                    &db,
                    &budget.key,
                    Arc::clone(&clock),
                )
                .expect("limiter"),
            ),
            client: Client::new(
                base,
                crate::youtube::ApiKey::new("AIzaTEST-key".into()),
                Duration::from_secs(1),
            )
            .expect("client"),
            store: Store::open(&db).expect("store"),
            db,
            clock,
        };
        Arc::new(Run::new(settings, deps))
    }

    /// The fixture `name` of the fake upstream the end-to-end tests use.
    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/youtube/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Every time the run decides or records comes from the clock it was given, not
    /// the host's: set to 2030, what it stores and charges is dated 2030.
    #[tokio::test]
    async fn a_run_reads_the_time_only_from_its_clock() {
        use wiremock::matchers::{path, query_param};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let upstream = MockServer::start().await;
        // An upstream whose clock agrees (its `Date`), or the clock check stops the run.
        let answer = |name: &str| {
            ResponseTemplate::new(200)
                .insert_header("Date", "Tue, 01 Jan 2030 00:00:00 GMT")
                .set_body_string(fixture(name))
        };
        Mock::given(path("/videos"))
            .and(query_param("chart", "mostPopular"))
            .respond_with(answer("videos_page1.json"))
            .mount(&upstream)
            .await;
        Mock::given(path("/videoCategories"))
            .respond_with(answer("categories.json"))
            .mount(&upstream)
            .await;
        const AT_2030_S: i64 = 1_893_456_000;
        let clock = Arc::new(crate::clock::ManualClock::starting_at(
            AT_2030_S * 1_000_000,
        ));
        let dir = tempfile::tempdir().expect("temp dir");
        let run = scratch_run_on(dir.path(), &upstream.uri(), clock);
        let report = execute(run, vec![region("US")]).await;
        assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
        assert_eq!(report.ended_at, AT_2030_S);

        let db = rusqlite::Connection::open(dir.path().join("t.db")).expect("db");
        let times = |sql: &str| -> Vec<i64> {
            let mut stmt = db.prepare(sql).expect(sql);
            stmt.query_map([], |r| r.get(0))
                .expect(sql)
                .map(|t| t.expect(sql))
                .collect()
        };
        for sql in [
            "SELECT started_at FROM runs",
            "SELECT ended_at FROM runs",
            "SELECT DISTINCT fetched_at FROM chart_places",
            "SELECT last_attempt_at FROM region_state",
            "SELECT categories_fetched_at FROM region_state",
        ] {
            assert_eq!(times(sql), [AT_2030_S], "{sql}");
        }
        let charged = times("SELECT DISTINCT at_us / 1000000 FROM quota_entry");
        assert_eq!(charged, [AT_2030_S], "the limiter's entries");
    }

    fn region(code: &str) -> Region {
        Region {
            code: code.into(),
            offset: 0,
            hl: None,
            pages: 1,
            searches: Vec::new(),
            categories: Vec::new(),
        }
    }

    /// A region whose task panics ends `failed`, in its place, and fails the run; the
    /// others are not affected.
    #[tokio::test]
    async fn a_panicking_region_task_fails_its_region_and_the_run() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = scratch_run(dir.path());
        let reports: Vec<(Region, RegionReport)> = ["US", "GB", "DE"]
            .iter()
            .map(|c| (region(c), RegionReport::new(c)))
            .collect();
        let done = each_region(&run, reports, |_run, region, mut report| async move {
            assert_ne!(region.code, "GB", "a bug in the region's code");
            report.pages = 1;
            report
        })
        .await;
        let got: Vec<(&str, Status)> = done
            .iter()
            .map(|(r, rep)| (r.code.as_str(), rep.status))
            .collect();
        assert_eq!(
            got,
            [
                ("US", Status::Complete),
                ("GB", Status::Failed),
                ("DE", Status::Complete)
            ]
        );
        let gb = &done[1].1;
        assert!(
            gb.error.as_deref().is_some_and(|e| e.contains("panicked")),
            "{:?}",
            gb.error
        );
        let regions: Vec<RegionReport> = done.into_iter().map(|(_, r)| r).collect();
        assert_eq!(overall(&regions, None), Status::Failed);
    }

    /// A stop of any kind wakes a region waiting out a retry's backoff, and one that
    /// came before the wait began ends it at once.
    #[tokio::test]
    async fn a_budget_stop_cuts_a_backoff_short() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = scratch_run(dir.path());
        let waiting = tokio::spawn({
            let run = Arc::clone(&run);
            async move { run.woken(VIDEOS_LIST).await }
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        run.halt_bucket(
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

    #[test]
    fn search_details_keep_the_search_rank() {
        let v = VideoRecord::bare;
        let ids: Vec<String> = ["b", "a", "c"].iter().map(|s| (*s).to_owned()).collect();
        let got: Vec<String> = in_rank_order(&ids, vec![v("a"), v("c"), v("b")])
            .into_iter()
            .map(|v| v.id)
            .collect();
        assert_eq!(got, ids);
    }
}
