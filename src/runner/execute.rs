//! A run from start to end: its row, the order of its regions (stalest first), their
//! locks, the three phases over every region still going (core charts, category
//! charts, searches, at most `concurrency` regions at once, their pages in order),
//! the follow-ups, and the report.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::bookkeeping::{
    queue_for_sink, record_attempts, record_end, record_figures, record_start, run_report,
    run_status,
};
use super::lock::{self, LockError, RegionLock};
use super::missed_slots::note_missed_slots;
use super::outcome::{RegionReport, RunReport, Status, overall};
use super::plan::{self, Freshness};
use super::run::Run;
use super::slots;
use crate::clock::Secs;
use crate::config::Region;
use crate::error::chain;

/// Runs the plan for `regions` and reports how it went. Everything fetched is
/// committed page by page, whatever stops the run.
pub async fn execute(run: Arc<Run>, regions: Vec<Region>) -> RunReport {
    let began = std::time::Instant::now();
    let start_recorded = record_start(&run, &regions).await;
    run.clock_check
        .distrust_if_skewed(run.meter.limiter_clock())
        .await;
    let fresh = freshness_or_none(&run).await;
    // The regions whose slot records the run reads back at its end.
    let configured = regions.clone();
    let region_refs: Vec<&Region> = regions.iter().collect();
    let ordered: Vec<Region> = plan::order(&region_refs, &fresh)
        .into_iter()
        .cloned()
        .collect();
    let (locks, reports) = lock_regions(&run, ordered);
    // On the fleet's slots (Redis): after the local lock, as docs/commands.md says.
    // The renewals start first: a region's lease is renewed while another region's
    // claim still waits for its holder.
    let renewal = slots::renew_leases(&run);
    let reports = run.claim_slots(reports).await;
    // Every phase walks the steps the dry run plans, taken at one moment.
    let now = run.clock.now().to_secs();
    let reports = fetch_regions(&run, reports, &fresh, now).await;
    if let Some(renewal) = renewal {
        renewal.abort();
    }
    let reports = run.finish_slots(reports).await;
    queue_for_sink(&run, &reports, now).await;
    drop(locks);
    // A run all of whose regions another host fetched leaves the follow-ups to that
    // host, whose database holds the charts: both counting would bill them twice.
    let all_elsewhere = !reports.is_empty()
        && reports
            .iter()
            .all(|(_, r)| r.status == Status::DoneElsewhere);
    let follow = match run.settings.follow {
        Some(_) if all_elsewhere => {
            tracing::info!(
                run_id = %run.settings.run_id,
                "every region's slot was fetched by another host; the follow-ups are left to it"
            );
            None
        }
        Some(follow) => Some(Arc::clone(&run).follow_ups(follow, now).await),
        None => None,
    };
    // Before the report: the clock may stop the run yet, and its record may clear.
    run.confirm_clock_without_key().await;
    let regions: Vec<RegionReport> = reports.into_iter().map(|(_, r)| r).collect();
    record_attempts(&run, &regions).await;
    let stop = run.stops.reported();
    let status = run_status(follow.as_ref(), overall(&regions, stop.as_ref()));
    let (report, now) = run_report(&run, status, regions, follow, stop.as_ref(), began).await;
    record_figures(&run, &report).await;
    note_missed_slots(&run, &configured).await;
    // A run whose start is not in the database has no rows to finish (and made no
    // call): trying would only add a second, unrelated error to the first.
    if start_recorded {
        record_end(&run, &report, stop.as_ref(), now).await;
    }
    report
}

/// How fresh each region's data is, or nothing (the configured order) when that
/// cannot be read.
async fn freshness_or_none(run: &Arc<Run>) -> BTreeMap<String, Freshness> {
    match run.record.freshness().await {
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
        match lock::try_lock(run.db.files(), &region.code) {
            Ok(Some(l)) => locks.push(l),
            Ok(None) => {
                tracing::info!(region = %region.code, "region {} is being fetched by another process on this host; skipping it", region.code);
                report.status = Status::Skipped;
            }
            // The command refused it before the run; a link made since is refused here.
            Err(LockError::Refused(e)) => {
                report.status = Status::Failed;
                report.error = Some(e.to_string());
            }
            Err(LockError::Io(e)) => {
                report.status = Status::Failed;
                report.error = Some(format!(
                    "locking region {} in {}: {e}",
                    region.code,
                    lock::lock_path(run.db.path()).display()
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
    now: Secs,
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

#[cfg(test)]
mod tests;
