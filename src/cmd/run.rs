//! `trendsync run` and `trendsync backfill`: the main job, and its `--dry-run`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::{Access, load_config, open_limiter, read_status, select_regions};
use crate::cli::{BackfillArgs, Global, RunArgs};
use crate::config::{Config, Region};
use crate::error::{ExitCode, MissingConfig, SilentExit};
use crate::metrics::{self, Snapshot};
use crate::quota::Allowance;
use crate::report::{human, print_json, seconds};
use crate::runner::{self, Freshness, Run, Simulation, Status};
use crate::store::{RunKind, Store, StoreError};
use crate::youtube::{self, ApiKey, Client};

/// What a run or backfill was asked to do.
struct Job<'a> {
    kind: &'static str,
    allowance: Allowance,
    regions: Vec<&'a Region>,
    dry_run: bool,
    json: bool,
    concurrency: u16,
}

/// A call that takes longer than this is treated as a timeout (and retried).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn run(global: &Global, args: &RunArgs) -> Result<()> {
    let config = load_config(global)?;
    let regions = select_regions(&config, &args.fetch.regions)?;
    let job = Job {
        kind: "run",
        allowance: Allowance::Ceiling,
        regions,
        dry_run: args.fetch.dry_run,
        json: args.fetch.json,
        concurrency: args.fetch.concurrency,
    };
    execute(global, &config, job).await
}

pub async fn backfill(global: &Global, args: &BackfillArgs) -> Result<()> {
    let config = load_config(global)?;
    let regions = select_regions(&config, &args.fetch.regions)?;
    let fresh = freshness(global)?;
    let stale_after = i64::try_from(args.stale_after.as_secs()).unwrap_or(i64::MAX);
    let now = now_s();
    let stale: Vec<&Region> = regions
        .into_iter()
        .filter(|r| {
            fresh
                .get(&r.code)
                .and_then(|f| f.last_complete_at)
                .is_none_or(|at| now - at > stale_after)
        })
        .collect();
    if stale.is_empty() {
        tracing::info!(
            "backfill: every selected region was fetched completely within the last {}",
            human(args.stale_after)
        );
    }
    let job = Job {
        kind: "backfill",
        allowance: Allowance::Quota,
        regions: stale,
        dry_run: args.fetch.dry_run,
        json: args.fetch.json,
        concurrency: args.fetch.concurrency,
    };
    execute(global, &config, job).await
}

use crate::clock::now_s;

/// What the store knows of each region, read without writing; nothing yet when the
/// database does not exist.
fn freshness(global: &Global) -> Result<BTreeMap<String, Freshness>> {
    let store = match Store::open_read_only(&global.db) {
        Ok(Some(store)) => store,
        Ok(None) => return Ok(BTreeMap::new()),
        // The plan is still right without it; only the order of regions may differ.
        Err(e @ StoreError::OlderSchema { .. }) => {
            tracing::warn!("{e}; planning the regions in their configured order");
            return Ok(BTreeMap::new());
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", global.db.display())),
    };
    runner::read_freshness(&store)
        .with_context(|| format!("reading the regions' state from {}", global.db.display()))
}

/// The API key from `--api-key-file` or `YOUTUBE_API_KEY`; never printed.
fn api_key(global: &Global) -> Result<ApiKey> {
    if let Some(path) = &global.api_key_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            MissingConfig(format!(
                "cannot read the API key file {}: {e}; it must hold only the key",
                path.display()
            ))
        })?;
        warn_if_shared(path);
        if text.trim().is_empty() {
            return Err(
                MissingConfig(format!("the API key file {} is empty", path.display())).into(),
            );
        }
        return Ok(ApiKey::new(text));
    }
    match std::env::var("YOUTUBE_API_KEY") {
        Ok(key) if !key.trim().is_empty() => Ok(ApiKey::new(key)),
        _ => Err(MissingConfig(
            "no API key: set YOUTUBE_API_KEY, or pass --api-key-file PATH (a file holding only the key); \
             --dry-run needs none"
                .to_owned(),
        )
        .into()),
    }
}

/// A key file others can read is a key others can spend.
fn warn_if_shared(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                "the API key file {} can be read by other users (mode {:o}); chmod 600 it",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
    }
}

async fn execute(global: &Global, config: &Config, job: Job<'_>) -> Result<()> {
    if !job.dry_run {
        return fetch(global, config, job).await;
    }
    let fresh = freshness(global)?;
    let plan = runner::plan(&job.regions, &fresh, now_s());
    let budget = &config.budget;
    let limiter = open_limiter(global, budget, Access::Read).await?;
    let names: Vec<String> = budget.policies().into_iter().map(|p| p.name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let status = read_status(&limiter, budget, &names).await?;
    let sim = runner::simulate(&plan, budget, job.allowance, &status);
    let cut = sim.stop.is_some();
    if job.json {
        print_dry_run_json(&job, &sim)?;
    } else {
        print_plan(
            &job,
            budget.max_for(job.allowance),
            &sim,
            &limiter.describe(),
        )?;
    }
    let summary = match &sim.stop {
        None => format!(
            "{} dry run: the whole plan fits ({} calls)",
            job.kind,
            sim.calls.len()
        ),
        Some((policy, wait)) => format!(
            "{} dry run: would stop at call {} of {}: {policy} would say no{}",
            job.kind,
            sim.calls.iter().filter(|c| c.fits).count() + 1,
            sim.calls.len(),
            wait.map_or(String::new(), |d| format!(
                "; capacity frees in {}",
                human(d)
            ))
        ),
    };
    tracing::info!("{summary}");
    if cut {
        Err(SilentExit(ExitCode::TryLater).into())
    } else {
        Ok(())
    }
}

/// The real run: every call charged before it is made.
async fn fetch(global: &Global, config: &Config, job: Job<'_>) -> Result<()> {
    let key = api_key(global)?;
    let client = Client::new(&global.api_base, key, REQUEST_TIMEOUT)
        .with_context(|| format!("setting up the upstream client for {}", global.api_base))?;
    let store = Store::open(&global.db)
        .with_context(|| format!("opening the database {}", global.db.display()))?;
    let limiter = open_limiter(global, &config.budget, Access::Charge).await?;
    let kind = if job.allowance == Allowance::Quota {
        RunKind::Backfill
    } else {
        RunKind::Run
    };
    let run = Arc::new(Run::new(
        crate::report::new_run_id(),
        kind,
        config.budget.clone(),
        job.allowance,
        limiter,
        client,
        store,
        global.db.clone(),
        usize::from(job.concurrency),
    ));
    let regions: Vec<Region> = job.regions.iter().map(|r| (*r).clone()).collect();
    let report = runner::execute(Arc::clone(&run), regions).await;
    let allowance = if job.allowance == Allowance::Quota {
        "quota"
    } else {
        "ceiling"
    };
    let summary = report.summary(job.kind, allowance);
    match report.status {
        Status::Complete => tracing::info!("{summary}"),
        Status::Failed => tracing::error!("{summary}"),
        _ => tracing::warn!("{summary}"),
    }
    // The run's outcome decides the exit code, not its metrics: a file that cannot be
    // written is logged, and the last-run timestamp going stale is what alerts.
    if let Some(path) = &global.metrics_file
        && let Err(e) = write_metrics(path, &run, &report)
    {
        tracing::error!("{e:#}");
    }
    if job.json {
        print_json(&report)?;
    }
    match report.status.exit_code() {
        None => Ok(()),
        Some(code) => Err(SilentExit(code).into()),
    }
}

/// The methods a run calls, reported in the metrics even when a run made no call of them.
const RUN_METHODS: &[&str] = &[
    youtube::VIDEOS_LIST,
    youtube::VIDEO_CATEGORIES_LIST,
    youtube::SEARCH_LIST,
];

/// Writes `--metrics-file` after a run: the run's own numbers, with the regions' state
/// and the other kind's last run read from the store.
fn write_metrics(path: &Path, run: &Run, report: &runner::RunReport) -> Result<()> {
    let other_kind = match run.kind {
        RunKind::Run => RunKind::Backfill,
        RunKind::Backfill => RunKind::Run,
    };
    let (regions, other) = {
        let store = run.store.lock().map_err(|_| {
            anyhow::anyhow!("writing the metrics file: the store was poisoned by a panic")
        })?;
        (store.region_states(), store.last_finished_run(other_kind))
    };
    // What the run itself knows is still worth writing when the store cannot say more.
    let regions = regions.unwrap_or_else(|e| {
        tracing::error!("metrics without the regions' last success: {e}");
        Vec::new()
    });
    let other = other.unwrap_or_else(|e| {
        tracing::error!("metrics without the last {}: {e}", other_kind.as_str());
        None
    });
    let snapshot = Snapshot {
        kind: run.kind,
        report,
        other,
        budget: &run.budget,
        regions: &regions,
        methods: RUN_METHODS,
    };
    metrics::write_atomically(path, &snapshot.exposition().render())
        .context("writing the metrics file")?;
    tracing::debug!(path = %path.display(), "metrics written");
    Ok(())
}

fn print_plan(job: &Job<'_>, max: u64, sim: &Simulation, limiter: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    let what = match job.allowance {
        Allowance::Ceiling => "ceiling",
        Allowance::Quota => "quota",
    };
    writeln!(
        out,
        "{} plan against {limiter} ({what} {max}); nothing is called, charged or written",
        job.kind
    )?;
    writeln!(
        out,
        "{:>4}  {:<6} {:<28} {:<22} {:>5} {:>6}",
        "#", "region", "call", "method", "units", "total"
    )?;
    let mut stop_shown = false;
    for (i, c) in sim.calls.iter().enumerate() {
        if !c.fits && !stop_shown {
            stop_shown = true;
            if let Some((policy, wait)) = &sim.stop {
                let wait = wait.map_or(
                    "never: the call is larger than the policy's maximum".to_owned(),
                    |d| format!("capacity frees in {}", human(d)),
                );
                writeln!(
                    out,
                    "  ---- the run would stop here: {policy} would say no; {wait}"
                )?;
            }
        }
        let total = if c.fits {
            c.total.to_string()
        } else {
            "-".to_owned()
        };
        writeln!(
            out,
            "{:>4}  {:<6} {:<28} {:<22} {:>5} {:>6}",
            i + 1,
            c.call.region,
            c.call.step.describe(),
            c.call.step.method(),
            c.units,
            total
        )?;
    }
    let fitting = sim.calls.iter().filter(|c| c.fits).count();
    let units = sim
        .calls
        .iter()
        .filter(|c| c.fits)
        .map(|c| c.units)
        .sum::<u64>();
    writeln!(
        out,
        "{fitting} of {} calls fit, {units} units; {} would remain to the {what}",
        sim.calls.len(),
        sim.remaining
    )?;
    Ok(())
}

#[derive(Serialize)]
struct RegionJson {
    code: String,
    status: &'static str,
    pages: u32,
    videos: u64,
    units: u64,
    units_unmetered: u64,
    error: Option<String>,
}

#[derive(Serialize)]
struct PlanJson {
    region: String,
    call: String,
    method: &'static str,
    units: u64,
    total: u64,
    fits: bool,
}

#[derive(Serialize)]
struct DryRunJson {
    run_id: Option<String>,
    dry_run: bool,
    status: &'static str,
    units_charged: u64,
    units_unmetered: u64,
    calls: u64,
    remaining: u64,
    retry_after_s: Option<f64>,
    units_planned: u64,
    regions: Vec<RegionJson>,
    plan: Vec<PlanJson>,
}

fn print_dry_run_json(job: &Job<'_>, sim: &Simulation) -> Result<()> {
    let status = if sim.stop.is_some() {
        "budget_exhausted"
    } else {
        "complete"
    };
    let regions = job
        .regions
        .iter()
        .map(|r| {
            let mine = sim.calls.iter().filter(|c| c.call.region == r.code);
            let cut = mine.clone().any(|c| !c.fits);
            RegionJson {
                code: r.code.clone(),
                status: if cut { "budget_exhausted" } else { "complete" },
                // The pages the plan would fetch (a chart that ends early has fewer).
                pages: mine
                    .clone()
                    .filter(|c| c.fits && matches!(c.call.step, runner::Step::TrendingPage(_)))
                    .count() as u32,
                videos: 0,
                units: mine.filter(|c| c.fits).map(|c| c.units).sum(),
                units_unmetered: 0,
                error: None,
            }
        })
        .collect();
    let report = DryRunJson {
        run_id: None,
        dry_run: true,
        status,
        units_charged: 0,
        units_unmetered: 0,
        calls: 0,
        remaining: sim.remaining,
        retry_after_s: sim.stop.as_ref().and_then(|(_, w)| w.map(seconds)),
        units_planned: sim.calls.iter().filter(|c| c.fits).map(|c| c.units).sum(),
        regions,
        plan: sim
            .calls
            .iter()
            .map(|c| PlanJson {
                region: c.call.region.clone(),
                call: c.call.step.describe(),
                method: c.call.step.method(),
                units: c.units,
                total: c.total,
                fits: c.fits,
            })
            .collect(),
    };
    print_json(&report)
}
