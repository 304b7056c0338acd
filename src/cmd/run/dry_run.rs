//! `--dry-run`: the plan a run or backfill would walk, priced against the budget as
//! it stands, printed as a table or as JSON. Nothing is called, charged or written.

use std::io::Write;

use anyhow::Result;
use serde::Serialize;

use super::{Job, due_for_follow_up, freshness};
use crate::cmd::exit::exit_code_for_status;
use crate::cmd::{Access, Ctx, open_limiter, read_status};
use crate::config::Config;
use crate::error::{SilentExit, after_output};
use crate::output::human;
use crate::output::json::{print_json, seconds};
use crate::output::table::{self, Column, Table};
use crate::quota::Budget;
use crate::runner::{self, Simulation, Status};
use crate::youtube;

/// Plans the job, prices it against the budget, and prints what the real run would do;
/// the exit code is the one the real run would give for the same stop.
pub(super) async fn run(ctx: &Ctx<'_>, config: &Config, job: &Job<'_>) -> Result<()> {
    let (global, clock) = (ctx.global, &ctx.clock);
    // No call is made, but a base the real run would refuse is refused here too (78).
    youtube::parse_api_base(&global.api_base)?;
    let fresh = freshness(ctx)?;
    let now = clock.now().to_secs();
    let mut plan = runner::plan(&job.regions, &fresh, now);
    if let Some(follow) = config.regions.follow {
        plan.extend(runner::plan::follow_ups(due_for_follow_up(
            ctx,
            follow,
            now.as_i64(),
        )?));
    }
    let budget = &config.budget;
    // Warns first when this is not what the latest run read; the JSON names both.
    let read = crate::cmd::identity::ReadJson::check(ctx, budget);
    let costs = read.costs.path.clone();
    let limiter = open_limiter(ctx, budget, Access::Read).await?;
    let names: Vec<String> = budget.policies().into_iter().map(|p| p.name).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let status = read_status(&limiter, budget, &names).await?;
    // Read like the window; a limiter that answered that much answers this.
    let spent = limiter.upstream_spent().await.unwrap_or_else(|e| {
        tracing::debug!("reading what the upstream's refusals measured: {e}");
        Vec::new()
    });
    let sim = runner::simulate(&plan, budget, job.allowance, &status, &spent);
    let printed = if job.json {
        print_dry_run_json(job, &sim, read)
    } else {
        print_plan(
            job,
            budget,
            &sim,
            &format!("{}, costs from {costs}", limiter.describe()),
        )
    };
    let summary = match &sim.stop {
        None => format!(
            "{} dry run: the whole plan fits ({} calls)",
            job.kind.as_str(),
            sim.calls.len()
        ),
        Some(stop) => format!(
            "{} dry run: would stop at call {} of {}: {}",
            job.kind.as_str(),
            sim.calls
                .iter()
                .position(|c| !c.fits)
                .map_or(sim.calls.len(), |i| i + 1),
            sim.calls.len(),
            stop.describe(sim.now)
        ),
    };
    let regions: Vec<&str> = job.regions.iter().map(|r| r.code.as_str()).collect();
    tracing::info!(
        kind = job.kind.as_str(),
        regions = %regions.join(","),
        "{summary}; regions: {}",
        regions.join(", ")
    );
    // The real run's exit for the same stop.
    let outcome = match sim
        .stop
        .as_ref()
        .and_then(|s| exit_code_for_status(s.status()))
    {
        None => Ok(()),
        Some(code) => Err(SilentExit(code).into()),
    };
    after_output(printed, outcome)
}

/// The plan as a table, one line per call, with the line where the run would stop;
/// with several buckets (docs/budget.md, "Buckets"), each call's bucket, and totals per bucket.
fn print_plan(job: &Job<'_>, budget: &Budget, sim: &Simulation, limiter: &str) -> Result<()> {
    let width = table::width();
    let mut out = table::Wrapped::new(std::io::stdout().lock(), width);
    let what = job.allowance.as_str();
    let buckets = budget.buckets();
    let several = buckets.len() > 1;
    let maxima: Vec<String> = buckets
        .iter()
        .map(|b| match several {
            true => format!("{} {}", b.name, b.max_for(job.allowance)),
            false => b.max_for(job.allowance).to_string(),
        })
        .collect();
    writeln!(
        out,
        "{} plan against {limiter} ({what} {}); nothing is called, charged or written",
        job.kind.as_str(),
        maxima.join(", ")
    )?;
    // Dropped from the right of this list first when the terminal is narrow.
    let mut columns = vec![
        Column::number("#", 0),
        Column::text("region", 0),
        Column::flex("call"),
        Column::text("method", 3),
    ];
    if several {
        columns.push(Column::text("bucket", 2));
    }
    columns.extend([Column::number("units", 1), Column::number("total", 0)]);
    let mut plan = Table::new(columns);
    let mut stop_shown = false;
    for (i, c) in sim.calls.iter().enumerate() {
        if !c.fits && !stop_shown {
            stop_shown = true;
            if let Some(stop) = sim.bucket_stops.get(&c.bucket).or(sim.stop.as_ref()) {
                let why = match stop.denied_by() {
                    Some(denied_by) => {
                        let said = crate::runner::said_no(denied_by, &c.bucket);
                        let wait = stop.retry_after(sim.now).map_or_else(
                            || format!("never: the call is larger than the maximum of {said}"),
                            |d| format!("capacity frees in {}", human::duration(d)),
                        );
                        format!("{said} would say no; {wait}")
                    }
                    None => stop.describe(sim.now),
                };
                plan.note(format!("  ---- the run would stop here: {why}"));
            }
        }
        let total = if c.fits {
            c.total.to_string()
        } else {
            "-".to_owned()
        };
        let mut cells = vec![
            (i + 1).to_string(),
            c.call.region.clone(),
            c.call.step.describe(),
            c.call.step.method().to_owned(),
        ];
        if several {
            cells.push(c.bucket.clone());
        }
        cells.extend([c.units.to_string(), total]);
        plan.row(cells);
    }
    plan.write(&mut out, width)?;
    print_totals(&mut out, sim, what)
}

/// What the plan's calls that fit add up to, and what they would leave of each bucket
/// to the allowance `what`.
fn print_totals(out: &mut impl Write, sim: &Simulation, what: &str) -> Result<()> {
    let fitting = sim.calls.iter().filter(|c| c.fits).count();
    let units = sim
        .calls
        .iter()
        .filter(|c| c.fits)
        .map(|c| c.units)
        .sum::<u64>();
    if sim.buckets.len() <= 1 {
        writeln!(
            out,
            "{fitting} of {} calls fit, {units} units; {} would remain to the {what}",
            sim.calls.len(),
            sim.remaining()
        )?;
        return Ok(());
    }
    writeln!(
        out,
        "{fitting} of {} calls fit, {units} units; would remain to the {what}:",
        sim.calls.len(),
    )?;
    for b in &sim.buckets {
        let planned: u64 = sim
            .calls
            .iter()
            .filter(|c| c.fits && c.bucket == b.name)
            .map(|c| c.units)
            .sum();
        let left = b.remaining(sim.allowance);
        let stop = sim.bucket_stops.get(&b.name).map_or(String::new(), |s| {
            format!(" (stops: {})", s.describe(sim.now))
        });
        let units = if planned == 1 { "unit" } else { "units" };
        writeln!(
            out,
            "  {:<8} {planned} {units} planned, {left} left{stop}",
            b.name
        )?;
    }
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
    /// The bucket the call is charged to (docs/budget.md, "Buckets").
    bucket: String,
    units: u64,
    /// The running total of the call's bucket.
    total: u64,
    fits: bool,
}

#[derive(Serialize)]
struct DryRunJson {
    run_id: Option<String>,
    dry_run: bool,
    status: &'static str,
    /// The first bucket whose denial or block would cut the run short, else null.
    bucket: Option<String>,
    units_charged: u64,
    units_unmetered: u64,
    calls: u64,
    remaining: u64,
    retry_after_s: Option<f64>,
    /// The policy that would say no (`upstream` while the budget is blocked).
    denied_by: Option<String>,
    units_planned: u64,
    /// Per bucket, units left to the allowance after the calls that fit.
    remaining_by_bucket: std::collections::BTreeMap<String, u64>,
    regions: Vec<RegionJson>,
    plan: Vec<PlanJson>,
    /// The limiter and costs file the plan was checked against, and the latest run's
    /// limiter (as `budget --json` names them).
    #[serde(flatten)]
    read: crate::cmd::identity::ReadJson,
}

/// The plan as the real run's `--json` report would read, plus the calls planned.
fn print_dry_run_json(
    job: &Job<'_>,
    sim: &Simulation,
    read: crate::cmd::identity::ReadJson,
) -> Result<()> {
    // The statuses the real run would report for the same stop.
    let status = sim.stop.as_ref().map_or(Status::Complete, |s| s.status());
    // The region of the call where the run would stop; the regions after it, with no
    // call that fits, are never reached.
    let stops_in = sim.calls.iter().find(|c| !c.fits).map(|c| &c.call.region);
    let regions = job
        .regions
        .iter()
        .map(|r| {
            let mine = sim.calls.iter().filter(|c| c.call.region == r.code);
            let cut = mine.clone().any(|c| !c.fits);
            let reached = mine.clone().any(|c| c.fits) || stops_in == Some(&r.code);
            let region_status = match (cut, reached) {
                (false, _) => Status::Complete,
                (true, true) => status,
                (true, false) => Status::NotAttempted,
            };
            RegionJson {
                code: r.code.clone(),
                status: region_status.as_str(),
                // The pages the plan would fetch (a chart that ends early has fewer).
                pages: mine
                    .clone()
                    .filter(|c| {
                        c.fits
                            && matches!(
                                c.call.step,
                                runner::Step::TrendingPage(_) | runner::Step::ChartPage { .. }
                            )
                    })
                    .count() as u32,
                videos: 0,
                units: mine.filter(|c| c.fits).map(|c| c.units).sum(),
                units_unmetered: 0,
                // Why the real run would not reach it, as its report would say.
                error: (region_status == Status::NotAttempted)
                    .then(|| sim.stop.as_ref().map(|s| s.not_attempted(sim.now, None)))
                    .flatten(),
            }
        })
        .collect();
    let report = DryRunJson {
        run_id: None,
        dry_run: true,
        status: status.as_str(),
        bucket: sim
            .calls
            .iter()
            .find(|c| !c.fits && sim.bucket_stops.contains_key(&c.bucket))
            .map(|c| c.bucket.clone()),
        units_charged: 0,
        units_unmetered: 0,
        calls: 0,
        remaining: sim.remaining(),
        retry_after_s: sim
            .stop
            .as_ref()
            .and_then(|s| s.retry_after(sim.now))
            .map(seconds),
        denied_by: sim
            .stop
            .as_ref()
            .and_then(|s| s.denied_by().map(str::to_owned)),
        units_planned: sim.calls.iter().filter(|c| c.fits).map(|c| c.units).sum(),
        remaining_by_bucket: sim.remaining_by_bucket(),
        regions,
        read,
        plan: sim
            .calls
            .iter()
            .map(|c| PlanJson {
                region: c.call.region.clone(),
                call: c.call.step.describe(),
                method: c.call.step.method(),
                bucket: c.bucket.clone(),
                units: c.units,
                total: c.total,
                fits: c.fits,
            })
            .collect(),
    };
    print_json(&report)
}
