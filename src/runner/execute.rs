//! Making a run's calls: each charged to the budget right before it is made, regions
//! in parallel with their pages in order, and one shared stop that ends every task's
//! calls as soon as the budget (or the upstream) says no.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{OnceCell, Semaphore};
use tokio::task::JoinSet;

use super::lock::{self, RegionLock};
use super::outcome::{Attempts, CallOutcome, RegionReport, RunReport, Status, Stop, overall};
use super::plan::{self, Freshness};
use crate::config::Region;
use crate::progress::RegionBar;
use crate::quota::{
    Allowance, BUDGET_POLICY, Budget, Charge, DownPolicy, Journal, Limiter, LimiterError,
    UPSTREAM_POLICY, micros,
};
use crate::store::{RunKind, RunOutcome, Store, StoreError};
use crate::youtube::{
    CallError, Client, ErrorClass, SEARCH_LIST, SearchRequest, VIDEO_CATEGORIES_LIST, VIDEOS_LIST,
    VideoRecord,
};

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

use crate::clock::{now_s, now_us};

/// Everything a run needs, shared by its region tasks.
pub struct Run {
    pub run_id: String,
    pub kind: RunKind,
    pub budget: Budget,
    pub allowance: Allowance,
    pub limiter: Limiter,
    pub client: Client,
    pub store: Arc<Mutex<Store>>,
    pub db: PathBuf,
    pub concurrency: usize,
    seq: AtomicU64,
    units: AtomicU64,
    /// Units of calls made unmetered while the limiter was down, and journalled.
    units_unmetered: AtomicU64,
    calls: AtomicU64,
    attempts: Mutex<Attempts>,
    stop: Mutex<Option<Stop>>,
    /// Why the limiter was found unreachable. Once set, it stays down for the rest of
    /// the run: asking again would cost every call a connect timeout, and the calls
    /// journalled meanwhile reach the window at the next command's replay anyway.
    limiter_down: OnceLock<String>,
    /// Opened at the first journalled call: most runs never need it.
    journal: OnceCell<Arc<Journal>>,
}

/// Why a call did not produce a result.
enum Failed {
    /// The run is stopping; the region ends with the run's stop status.
    Stopped,
    /// This region failed; the others go on.
    Region(String),
}

impl Run {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        run_id: String,
        kind: RunKind,
        budget: Budget,
        allowance: Allowance,
        limiter: Limiter,
        client: Client,
        store: Store,
        db: PathBuf,
        concurrency: usize,
    ) -> Run {
        Run {
            run_id,
            kind,
            budget,
            allowance,
            limiter,
            client,
            store: Arc::new(Mutex::new(store)),
            db,
            concurrency: concurrency.max(1),
            seq: AtomicU64::new(0),
            units: AtomicU64::new(0),
            units_unmetered: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            attempts: Mutex::new(Attempts::new()),
            stop: Mutex::new(None),
            limiter_down: OnceLock::new(),
            journal: OnceCell::new(),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.lock().map_or(true, |s| s.is_some())
    }

    fn stop_status(&self) -> Status {
        self.stop
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(Stop::status))
            .unwrap_or(Status::BudgetExhausted)
    }

    /// Records the run's stop; the first one wins. The final summary line says why
    /// the run stopped (DESIGN.md: one line), so the moment itself is only a debug
    /// event.
    fn halt(&self, stop: Stop) {
        let Ok(mut slot) = self.stop.lock() else {
            return;
        };
        if slot.is_none() {
            tracing::debug!(run_id = %self.run_id, "stopping: {}; no further calls", stop.describe(now_us()));
            *slot = Some(stop);
        }
    }

    /// Counts one attempt at `method` that ended as `outcome`.
    fn count_attempt(&self, method: &'static str, outcome: CallOutcome) {
        // A poisoned map only loses a metric; the run itself goes on.
        if let Ok(mut attempts) = self.attempts.lock() {
            *attempts.entry((method, outcome)).or_insert(0) += 1;
        }
    }

    /// Charges one call of `method` to the budget before it is made.
    async fn charge(&self, method: &'static str, report: &mut RegionReport) -> Result<(), Failed> {
        if self.stopped() {
            return Err(Failed::Stopped);
        }
        let id = format!(
            "{}-{}",
            self.run_id,
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let charge = match self.budget.charge(&id, method, 1, self.allowance) {
            Ok(c) => c,
            Err(e) => {
                self.halt(Stop::Fatal {
                    message: e.to_string(),
                });
                return Err(Failed::Stopped);
            }
        };
        if let Some(reason) = self.limiter_down.get() {
            return self.unmetered(method, &charge, reason, report).await;
        }
        match self.limiter.charge(&charge).await {
            Ok(d) if d.granted => {
                self.units.fetch_add(charge.units, Ordering::Relaxed);
                report.units += charge.units;
                Ok(())
            }
            Ok(d) if d.denied_by.as_deref() == Some(UPSTREAM_POLICY) => {
                let until_us = now_us() + d.retry_after.map_or(0, micros);
                self.halt(Stop::UpstreamQuota {
                    until_us,
                    reason: "blocked by an earlier quotaExceeded".into(),
                });
                Err(Failed::Stopped)
            }
            Ok(d) => {
                let remaining = d
                    .parts
                    .iter()
                    .find(|p| p.policy == BUDGET_POLICY)
                    .map_or(d.remaining(), |p| p.remaining());
                self.halt(Stop::Budget {
                    method,
                    units: charge.units,
                    denied_by: d
                        .denied_by
                        .clone()
                        .unwrap_or_else(|| BUDGET_POLICY.to_owned()),
                    retry_after: d.retry_after,
                    remaining,
                });
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
        self.limiter_down.get_or_init(|| {
            tracing::warn!(
                run_id = %self.run_id,
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
    ) -> Result<(), Failed> {
        if self.budget.when_down(method) == DownPolicy::Deny {
            self.halt(Stop::LimiterDown {
                method,
                reason: reason.to_owned(),
            });
            return Err(Failed::Stopped);
        }
        // The row is written before the call is made, as a charge would be: a call
        // the journal does not hold must not happen.
        if let Err(e) = self.write_journal(charge).await {
            self.halt(Stop::Fatal {
                message: format!(
                    "the limiter is down ({reason}) and {method} could not be journalled: {e}"
                ),
            });
            return Err(Failed::Stopped);
        }
        self.units_unmetered
            .fetch_add(charge.units, Ordering::Relaxed);
        report.units_unmetered += charge.units;
        Ok(())
    }

    /// Appends `charge` to the journal, opening it the first time.
    async fn write_journal(&self, charge: &Charge) -> Result<(), String> {
        let db = self.db.clone();
        let journal = self
            .journal
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || Journal::open(&db))
                    .await
                    .map_err(|e| e.to_string())?
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .await?;
        let (journal, key, charge) = (Arc::clone(journal), self.budget.key.clone(), charge.clone());
        tokio::task::spawn_blocking(move || journal.record(&key, &charge))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())
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
            self.charge(method, report).await?;
            self.calls.fetch_add(1, Ordering::Relaxed);
            let err = match attempt().await {
                Ok(v) => {
                    self.count_attempt(method, CallOutcome::Ok);
                    return Ok(v);
                }
                Err(e) => e,
            };
            let class = err.class();
            self.count_attempt(method, outcome_of(class));
            match class {
                ErrorClass::Transient if n < MAX_ATTEMPTS => {
                    let wait = backoff(n);
                    tracing::warn!(region = %report.code, "{err}; attempt {n} of {MAX_ATTEMPTS}, trying again in {wait:?}");
                    tokio::time::sleep(wait).await;
                }
                ErrorClass::Transient => {
                    return Err(Failed::Region(format!(
                        "{err} (gave up after {MAX_ATTEMPTS} attempts)"
                    )));
                }
                ErrorClass::QuotaExhausted => {
                    let until_us = crate::youtube::quota_reset_after(now_us());
                    // A limiter already found down is not asked again (its timeout
                    // would be paid once more); this run stops either way.
                    let blocked = match self.limiter_down.get() {
                        Some(reason) => Err(format!("the limiter is down: {reason}")),
                        None => self
                            .limiter
                            .block_until(until_us)
                            .await
                            .map_err(|e| e.to_string()),
                    };
                    if let Err(e) = blocked {
                        tracing::error!(
                            "could not block the budget until the upstream's reset: {e}"
                        );
                    }
                    self.halt(Stop::UpstreamQuota {
                        until_us,
                        reason: err.to_string(),
                    });
                    return Err(Failed::Stopped);
                }
                ErrorClass::Fatal => {
                    let message = err.to_string();
                    // The region whose call was refused says why in `--json` too.
                    report.error = Some(message.clone());
                    self.halt(Stop::Fatal { message });
                    return Err(Failed::Stopped);
                }
                ErrorClass::RegionFailed => return Err(Failed::Region(err.to_string())),
            }
        }
        Err(Failed::Region(format!("{method}: no attempt left")))
    }

    /// Runs `work` on the store off the async threads.
    async fn with_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, Failed> {
        let store = Arc::clone(&self.store);
        let joined = tokio::task::spawn_blocking(move || {
            let guard = store
                .lock()
                .map_err(|_| "the store was poisoned by a panic".to_owned())?;
            work(&guard).map_err(|e| e.to_string())
        })
        .await;
        match joined {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Failed::Region(format!("storing: {e}"))),
            Err(e) => Err(Failed::Region(format!("storing: {e}"))),
        }
    }

    fn end_region(report: &mut RegionReport, failed: Failed, stop_status: Status) {
        match failed {
            Failed::Stopped => report.status = stop_status,
            Failed::Region(message) => {
                tracing::error!(region = %report.code, "{message}");
                report.status = Status::Failed;
                report.error = Some(message);
            }
        }
    }

    /// The region's trending pages, then its category names when they are stale.
    async fn core(
        self: Arc<Self>,
        region: Region,
        categories: bool,
        mut report: RegionReport,
    ) -> RegionReport {
        let bar = RegionBar::new(
            &region.code,
            u64::from(region.pages) + u64::from(categories),
        );
        let result = async {
            let mut token: Option<String> = None;
            // The chart position of the next video. A page may hold fewer than 50
            // videos, so ranks continue from the videos actually received, not from
            // the page number (which left gaps: 1..7, then 51..).
            let mut next_rank: u32 = 1;
            for _ in 0..region.pages {
                let got = self
                    .call(VIDEOS_LIST, &mut report, || {
                        self.client.trending_page(
                            &region.code,
                            region.hl.as_deref(),
                            token.as_deref(),
                        )
                    })
                    .await?;
                let (run_id, code, items) = (self.run_id.clone(), region.code.clone(), got.items);
                let first_rank = next_rank;
                next_rank =
                    next_rank.saturating_add(u32::try_from(items.len()).unwrap_or(u32::MAX));
                let stored = self
                    .with_store(move |s| {
                        s.store_trending_page(&run_id, &code, first_rank, &items, now_s())
                    })
                    .await?;
                report.pages += 1;
                report.videos += stored as u64;
                bar.step(&format!("page {}", report.pages));
                match got.next_page_token {
                    Some(t) => token = Some(t),
                    None => break,
                }
            }
            if categories {
                let got = self
                    .call(VIDEO_CATEGORIES_LIST, &mut report, || {
                        self.client.categories(&region.code, region.hl.as_deref())
                    })
                    .await?;
                let pairs: Vec<(String, String)> =
                    got.into_iter().map(|c| (c.id, c.title)).collect();
                let code = region.code.clone();
                self.with_store(move |s| s.store_categories(&code, &pairs, now_s()))
                    .await?;
                bar.step("categories");
            }
            let code = region.code.clone();
            self.with_store(move |s| s.mark_region_complete(&code, now_s()))
                .await?;
            Ok::<(), Failed>(())
        }
        .await;
        if let Err(failed) = result {
            Self::end_region(&mut report, failed, self.stop_status());
        }
        bar.finish(report.status.as_str());
        report
    }

    /// The region's configured searches: one search.list each, then one videos.list
    /// for the details of what it found.
    async fn searches(self: Arc<Self>, region: Region, mut report: RegionReport) -> RegionReport {
        let result = async {
            for search in &region.searches {
                let published_after = search
                    .published_within
                    .and_then(|w| jiff::Timestamp::from_microsecond(now_us() - micros(w)).ok());
                let req = SearchRequest {
                    region: &region.code,
                    q: &search.q,
                    order: search.order,
                    published_after,
                    page_token: None,
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
                    self.run_id.clone(),
                    region.code.clone(),
                    search.name.clone(),
                );
                let stored = self
                    .with_store(move |s| {
                        s.store_search_page(&run_id, &code, &name, 1, &ranked, now_s())
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
    let permits = Arc::new(Semaphore::new(run.concurrency));
    let mut tasks = JoinSet::new();
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
        tasks.spawn(async move {
            let _permit = permit;
            (i, region, fut.await)
        });
    }
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((i, region, report)) => done[i] = Some((region, report)),
            Err(e) => tracing::error!("a region task failed: {e}"),
        }
    }
    done.into_iter().flatten().collect()
}

/// Runs the plan for `regions` and reports how it went. Everything fetched is
/// committed page by page, whatever stops the run.
pub async fn execute(run: Arc<Run>, regions: Vec<Region>) -> RunReport {
    let started = now_s();
    let run_id = run.run_id.clone();
    let kind = run.kind;
    if let Err(Failed::Region(e)) = run
        .with_store(move |s| s.begin_run(&run_id, kind, started))
        .await
    {
        tracing::error!("{e}");
    }

    let fresh = match freshness(&run).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(
                "could not read the regions' state, taking them in configured order: {e}"
            );
            BTreeMap::new()
        }
    };
    let region_refs: Vec<&Region> = regions.iter().collect();
    let ordered: Vec<Region> = plan::order(&region_refs, &fresh)
        .into_iter()
        .cloned()
        .collect();

    // Hold each region's lock for the whole run; a region another process is
    // fetching is skipped.
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

    let max_age = i64::try_from(plan::CATEGORIES_MAX_AGE.as_secs()).unwrap_or(i64::MAX);
    let now = now_s();
    let reports = each_region(&run, reports, |run, region, report| {
        let categories = fresh
            .get(&region.code)
            .and_then(|f| f.categories_fetched_at)
            .is_none_or(|at| now - at >= max_age);
        run.core(region, categories, report)
    })
    .await;
    let reports = each_region(&run, reports, |run, region, report| {
        run.searches(region, report)
    })
    .await;
    drop(locks);

    let regions: Vec<RegionReport> = reports.into_iter().map(|(_, r)| r).collect();
    for r in &regions {
        let (code, status) = (r.code.clone(), r.status.as_str());
        let _ = run
            .with_store(move |s| s.mark_region_attempt(&code, now_s(), status))
            .await;
    }
    let stop = run.stop.lock().ok().and_then(|s| s.clone());
    let status = overall(&regions, stop.as_ref());
    // Once found down, the limiter is not asked again in this run, not even for this.
    let budget_used = match run.limiter_down.get() {
        Some(_) => None,
        None => match run.limiter.status(&run.budget.policies()[..1], &[]).await {
            Ok(st) => st.policies.first().map(|p| p.used),
            Err(_) => None,
        },
    };
    let remaining = budget_used.map(|used| run.budget.max_for(run.allowance).saturating_sub(used));
    let now = now_us();
    let ended_at = now / 1_000_000;
    let report = RunReport {
        run_id: run.run_id.clone(),
        status,
        units_charged: run.units.load(Ordering::Relaxed),
        units_unmetered: run.units_unmetered.load(Ordering::Relaxed),
        calls: run.calls.load(Ordering::Relaxed),
        remaining,
        retry_after_s: stop
            .as_ref()
            .and_then(|s| s.retry_after(now))
            .map(crate::report::seconds),
        regions,
        stop_reason: stop.as_ref().map(|s| s.describe(now)),
        ended_at,
        budget_used,
        attempts: run.attempts.lock().map(|a| a.clone()).unwrap_or_default(),
    };
    let outcome = RunOutcome {
        status: status.as_str().to_owned(),
        units: report.units_charged,
        calls: report.calls,
        stop_reason: report.stop_reason.clone(),
        ended_at,
    };
    let run_id = run.run_id.clone();
    if let Err(Failed::Region(e)) = run
        .with_store(move |s| s.finish_run(&run_id, &outcome))
        .await
    {
        tracing::error!("{e}");
    }
    report
}

/// What the store knows of each region.
async fn freshness(run: &Arc<Run>) -> Result<BTreeMap<String, Freshness>, String> {
    let store = Arc::clone(&run.store);
    tokio::task::spawn_blocking(move || {
        let guard = store
            .lock()
            .map_err(|_| "the store was poisoned".to_owned())?;
        read_freshness(&guard).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The regions' last complete fetch and category fetch, from the store.
pub fn read_freshness(store: &Store) -> Result<BTreeMap<String, Freshness>, StoreError> {
    let mut out = BTreeMap::new();
    for state in store.region_states()? {
        let categories_fetched_at = store.categories_fetched_at(&state.region)?;
        out.insert(
            state.region.clone(),
            Freshness {
                last_complete_at: state.last_complete_at,
                categories_fetched_at,
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

    #[test]
    fn search_details_keep_the_search_rank() {
        let v = |id: &str| VideoRecord {
            id: id.into(),
            title: String::new(),
            description: String::new(),
            channel_id: String::new(),
            channel_title: String::new(),
            published_at: String::new(),
            category_id: None,
            tags: None,
            default_language: None,
            default_audio_language: None,
            duration_s: None,
            live_broadcast_content: None,
            thumbnail_url: None,
            region_restriction: None,
            view_count: None,
            like_count: None,
            comment_count: None,
        };
        let ids: Vec<String> = ["b", "a", "c"].iter().map(|s| (*s).to_owned()).collect();
        let got: Vec<String> = in_rank_order(&ids, vec![v("a"), v("c"), v("b")])
            .into_iter()
            .map(|v| v.id)
            .collect();
        assert_eq!(got, ids);
    }
}
