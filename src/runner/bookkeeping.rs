//! A run's own rows in the history and its report: its start, each region's last
//! attempt, how the run ended, and the report the outside sees of it.

use std::time::Instant;

use super::outcome::{FollowReport, RegionReport, RunReport, Status, Stop};
use super::run::Run;
use crate::clock::{Micros, Secs};
use crate::config::{Region, slot_schedule};
use crate::error::chain;
use crate::quota::SlotRef;
use crate::store::{CallCount, RegionOutcome, RunOutcome};

/// Records the run's start and its regions; false when the start could not be
/// recorded, which halts the run before its first charge.
pub(super) async fn record_start(run: &Run, regions: &[Region]) -> bool {
    let started = run.clock.now().to_secs();
    let limiter = run.settings.limiter.clone();
    if let Err(e) = run
        .record
        .begin_run(run.settings.kind, started, limiter)
        .await
    {
        // A run that cannot be recorded would spend units no history shows and that
        // no later process could mark abandoned: it stops before its first charge.
        run.stops.halt(Stop::Fatal {
            message: format!("{}; no call made", chain(&e)),
        });
        return false;
    }
    let codes: Vec<String> = regions.iter().map(|r| r.code.clone()).collect();
    if let Err(e) = run.record.begin_regions(started, codes).await {
        // The run's row is there, and its end records the regions' outcomes.
        tracing::error!(run_id = %run.settings.run_id, "{}", chain(&e));
    }
    true
}

/// With a sink, queues the slot of each region that ended complete without a lease
/// (the embedded limiter, or a region fetched while the slots' keeper did not answer),
/// as the run's clock placed it when the phases began (`now`), with no token, for the
/// sink to ship after the report; a leased slot was queued with its token when it was
/// marked done (docs/fleet.md, "The sink"). A slot that cannot be queued is logged; its
/// rows are stored all the same.
pub(super) async fn queue_for_sink(run: &Run, regions: &[(Region, RegionReport)], now: Secs) {
    if !run.settings.sink {
        return;
    }
    for (region, report) in regions {
        if report.status != Status::Complete || run.lease_of(&region.code).is_some() {
            continue;
        }
        let (secs, offset_s) = slot_schedule(region);
        let slot = SlotRef::at(&region.code, now.as_i64(), secs, offset_s);
        if let Err(e) = run
            .record
            .queue_for_sink(&region.code, slot.start_s, slot.secs, None)
            .await
        {
            tracing::error!(region = %region.code, "{}", chain(&e));
        }
    }
}

/// Records when each region was last attempted and how it went.
pub(super) async fn record_attempts(run: &Run, regions: &[RegionReport]) {
    let now = run.clock.now().to_secs();
    for r in regions {
        if let Err(e) = run.record.region_attempt(&r.code, now, r.status).await {
            tracing::error!(region = %r.code, "{}", chain(&e));
        }
    }
}

/// The run's status from its regions': failed follow-ups fail the run as a failed
/// region does.
pub(super) fn run_status(follow: Option<&FollowReport>, regions: Status) -> Status {
    match (follow, regions) {
        // Failed outranks every clean stop (docs/commands.md's order).
        (
            Some(f),
            Status::Complete
            | Status::BudgetExhausted
            | Status::UpstreamQuotaExhausted
            | Status::LimiterDown
            | Status::ClockSkew,
        ) if f.status == Status::Failed => Status::Failed,
        (_, status) => status,
    }
}

/// The run's report, with the budget as it stands now, and that moment.
pub(super) async fn run_report(
    run: &Run,
    status: Status,
    regions: Vec<RegionReport>,
    follow: Option<FollowReport>,
    stop: Option<&Stop>,
    began: Instant,
) -> (RunReport, Micros) {
    let regions = say_why_not_attempted(regions, stop, run.clock.now());
    let read = run.meter.window().await;
    let budget = read.window;
    let remaining_by_bucket = run.meter.remaining_by_bucket(budget.as_deref());
    // The main bucket comes first.
    let remaining = remaining_by_bucket
        .as_ref()
        .and_then(|left| left.first())
        .map(|(_, left)| *left);
    let now = run.clock.now();
    let ended_at = now.to_secs().as_i64();
    let totals = run.meter.totals();
    let report = RunReport {
        run_id: run.settings.run_id.clone(),
        status,
        bucket: run.stops.first_bucket(),
        units_charged: totals.units,
        units_unmetered: totals.units_unmetered,
        calls: totals.calls,
        remaining,
        remaining_by_bucket,
        retry_after_s: stop
            .as_ref()
            .and_then(|s| s.retry_after(now))
            .map(crate::output::json::seconds),
        denied_by: stop.and_then(|s| s.denied_by().map(str::to_owned)),
        regions,
        follow,
        stop_reason: stop.map(|s| s.describe(now)),
        ended_at,
        took: began.elapsed(),
        limiter_up: read.up,
        budget,
        attempts: run.attempts.lock().map(|a| a.clone()).unwrap_or_default(),
    };
    (report, now)
}

/// `regions` with the reason of each the run never reached: what stopped the run,
/// and never another region's error as its own (docs/json.md, `regions[].error`).
fn say_why_not_attempted(
    mut regions: Vec<RegionReport>,
    stop: Option<&Stop>,
    now: Micros,
) -> Vec<RegionReport> {
    // The region whose call stopped the run says its error as its own.
    let failed_region = match stop {
        Some(Stop::Fatal { message }) => regions
            .iter()
            .find(|r| r.error.as_ref() == Some(message))
            .map(|r| r.code.clone()),
        _ => None,
    };
    for r in &mut regions {
        if r.status == Status::NotAttempted && r.error.is_none() {
            r.error = Some(match stop {
                Some(stop) => stop.not_attempted(now, failed_region.as_deref()),
                None => "not attempted: the run stopped before it reached this region".to_owned(),
            });
        }
    }
    regions
}

/// Records the figures the limiter reported at the run's end, when it gave them, as
/// the budget's last known ones (docs/metrics.md). A failure is logged: the metrics
/// then show the figures recorded before, should the limiter not answer next time.
pub(super) async fn record_figures(run: &Run, report: &RunReport) {
    let Some(figures) = report.budget.clone() else {
        return;
    };
    let (db, key) = (run.db.clone(), run.settings.budget.key.clone());
    // Read just before the run's end: `status` and `budget` say how old they are.
    let as_of = Secs::new(report.ended_at).to_micros();
    let recorded = tokio::task::spawn_blocking(move || {
        crate::schema::record_figures_on(&db, &key, &figures, as_of)
    })
    .await;
    match recorded {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(run_id = %run.settings.run_id, "{e}"),
        Err(e) => tracing::warn!(
            run_id = %run.settings.run_id,
            "recording the buckets' last known figures: {e}"
        ),
    }
}

/// Records the run's end: its outcome, each region's, and its calls by method and
/// outcome.
pub(super) async fn record_end(run: &Run, report: &RunReport, stop: Option<&Stop>, now: Micros) {
    // A run failed by its regions, not stopped, says which and why in its row too.
    let failed: Vec<String> = report
        .regions
        .iter()
        .filter(|r| r.status != Status::NotAttempted)
        .filter_map(|r| r.error.as_ref().map(|e| format!("{}: {e}", r.code)))
        .collect();
    let outcome = RunOutcome {
        status: report.status,
        units: report.units_charged,
        calls: report.calls,
        stop_reason: report
            .stop_reason
            .clone()
            .or_else(|| (!failed.is_empty()).then(|| failed.join("; "))),
        ended_at: Secs::new(report.ended_at),
        duration_us: u64::try_from(report.took.as_micros()).unwrap_or(u64::MAX),
    };
    let details = region_outcomes(report, stop, now);
    let calls: Vec<CallCount> = report
        .attempts
        .iter()
        .map(|((method, outcome), n)| CallCount {
            method: (*method).to_owned(),
            outcome: (*outcome).into(),
            calls: *n,
        })
        .collect();
    if let Err(e) = run.record.end_run(details, calls, outcome).await {
        tracing::error!(run_id = %run.settings.run_id, "{}", chain(&e));
    }
}

/// Each region's line of the run history: its status, and why when it did not
/// complete (its own error, or else the run's stop).
fn region_outcomes(report: &RunReport, stop: Option<&Stop>, now: Micros) -> Vec<RegionOutcome> {
    report
        .regions
        .iter()
        .map(|r| {
            let reason = match (&r.error, r.status) {
                (Some(e), _) => Some(e.clone()),
                (None, Status::Complete) => None,
                (None, Status::DoneElsewhere) => r.note.clone(),
                (None, Status::Skipped) => {
                    Some("being fetched by another process on this host".to_owned())
                }
                (None, _) => stop.map(|s| s.describe(now)),
            };
            RegionOutcome {
                region: r.code.clone(),
                status: r.status.into(),
                pages: u64::from(r.pages),
                videos: r.videos,
                units: r.units,
                reason,
            }
        })
        .collect()
}
