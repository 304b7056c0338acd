//! `trendsync status`: the operator's dashboard, from the database alone (and the
//! budget in one line): per region the last attempt and why it ended so, the age of
//! the last complete fetch, runs in progress and runs a killed process abandoned.
//! `--stale-after` makes it a health check (exit 1 when a region is stale);
//! `--coverage` shows a fleet's slots instead (`coverage.rs`).

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::figures::{JournalJson, LastKnownJson, bucket_text};
use super::shared::{BucketJson, ago, at, charts_text, is_stale, one_line};
use super::{Access, Ctx, load_config, open_limiter, read_status};
use crate::cli::StatusArgs;
use crate::config::Config;
use crate::error::{ExitCode, SilentExit, after_output, chain};
use crate::output::human;
use crate::output::json::{print_json, rfc3339};
use crate::output::table::{self, Column, Table};
use crate::quota::skew::{self, LimiterClock, MAX_SKEW, Skew, amount};
use crate::quota::{Budget, Limiter};

use crate::region_status::{Recorded, RegionStatus, in_progress};
use crate::runner::lock;
use crate::sqlite::Db;
use crate::store::{HistoryRow, RegionState, RunStart, SinkBacklog, Store};

/// Without `--stale-after`, a region is called stale as `backfill` would see it.
const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(2 * 3600);

/// Abandoned runs are listed for this long after they started.
const ABANDONED_SHOWN_FOR: i64 = 7 * 24 * 3600;

#[derive(Debug, Serialize)]
struct RegionJson {
    code: String,
    last_attempt_at: Option<String>,
    last_status: Option<Recorded<RegionStatus>>,
    last_reason: Option<String>,
    last_complete_at: Option<String>,
    stale: bool,
    pages: Option<u64>,
    videos: Option<u64>,
    units: Option<u64>,
    /// The charts its last attempt stored: null for the overall chart, else the
    /// category id.
    charts: Vec<Option<String>>,
}

#[derive(Debug, Serialize)]
struct RunJson {
    run_id: String,
    started_at: String,
}

/// The main bucket's numbers, and every bucket's (docs/budget.md, "Buckets").
#[derive(Debug, Serialize)]
struct BudgetJson {
    used: u64,
    ceiling: u64,
    remaining: u64,
    blocked_until: Option<String>,
    buckets: Vec<BucketJson>,
}

/// The last skew seen between a limiter's clock and the upstream's (docs/schema.md).
#[derive(Debug, Serialize)]
struct SkewJson {
    /// `host` (the embedded limiter's) or `redis` (Redis `TIME`).
    clock: &'static str,
    /// That clock minus the upstream's, in seconds: positive when it is ahead.
    skew_s: f64,
    /// When it was seen, by the upstream's clock.
    measured_at: String,
    /// Over 5 minutes: runs check the clock with one call and `budget charge` is
    /// refused until a run sees it agree.
    too_far: bool,
    /// The limiter this command is configured with decides by this clock.
    in_use: bool,
}

#[derive(Debug, Serialize)]
struct StatusJson {
    regions: Vec<RegionJson>,
    running: Vec<RunJson>,
    abandoned: Vec<RunJson>,
    /// Null when the limiter could not be read.
    budget: Option<BudgetJson>,
    /// Why the limiter could not be read; null when it was.
    budget_error: Option<String>,
    /// While the limiter cannot be read, the figures the latest run that read it
    /// recorded, and when; null when it was read, or no run ever read it.
    last_known: Option<LastKnownJson>,
    /// The calls made while the limiter was down that wait to be counted.
    journal: JournalJson,
    /// The slots queued for the sink and not yet shipped (docs/commands.md, `--sink`).
    sink: SinkJson,
    /// Every clock ever compared, the one in use among them.
    clock_skew: Vec<SkewJson>,
    /// The limiter the budget was read from, the one the latest run charged, and the
    /// costs file read.
    #[serde(flatten)]
    read: super::identity::ReadJson,
}

/// The sink's backlog: what the outbox holds that no run has shipped yet.
#[derive(Debug, Serialize)]
struct SinkJson {
    /// Slots waiting; 0 when none does (or no run was given `--sink`).
    queued_slots: u64,
    /// When the oldest of them was queued (its run's start); null when none waits.
    oldest_queued_at: Option<String>,
}

impl SinkJson {
    fn new(backlog: SinkBacklog) -> SinkJson {
        SinkJson {
            queued_slots: backlog.slots,
            oldest_queued_at: backlog.oldest_queued_at.map(at),
        }
    }

    /// Its line for people, at `now_s`, when slots wait.
    fn text(&self, backlog: SinkBacklog, now_s: i64) -> Option<String> {
        let oldest = backlog.oldest_queued_at?;
        let n = self.queued_slots;
        Some(format!(
            "sink: {n} slot{} wait{} to be shipped, the oldest queued at {} ({}); the next run or backfill with --sink ships {}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
            at(oldest),
            ago(now_s, oldest),
            if n == 1 { "it" } else { "them" },
        ))
    }
}

/// What the database says, read without writing anything.
#[derive(Default)]
struct Stored {
    attempts: BTreeMap<String, HistoryRow>,
    states: BTreeMap<String, RegionState>,
    running: Vec<RunStart>,
    abandoned: Vec<RunStart>,
    sink: SinkBacklog,
}

fn read_stored(db: &Db, now_s: i64) -> Result<Stored> {
    let Some(store) =
        Store::read_on(db).with_context(|| format!("opening {}", db.path().display()))?
    else {
        return Ok(Stored::default());
    };
    let (store, db) = (&store, db.path());
    let read = || -> Result<Stored, crate::store::StoreError> {
        let (running, dead): (Vec<RunStart>, Vec<RunStart>) = store
            .running_runs()?
            .into_iter()
            // A lock that cannot be checked is taken for a live run: never call a run
            // abandoned without knowing.
            .partition(|r| lock::run_is_alive(db, &r.run_id).unwrap_or(true));
        let mut abandoned = store.abandoned_runs(now_s - ABANDONED_SHOWN_FOR)?;
        abandoned.extend(dead);
        abandoned.sort_by_key(|r| std::cmp::Reverse(r.started_at));
        Ok(Stored {
            attempts: store
                .last_attempts()?
                .into_iter()
                .filter_map(|a| Some((a.region.clone()?, a)))
                .collect(),
            states: store
                .region_states()?
                .into_iter()
                .map(|s| (s.region.clone(), s))
                .collect(),
            running,
            abandoned,
            sink: store.sink_backlog()?,
        })
    };
    read().with_context(|| format!("reading the run history from {}", db.display()))
}

pub async fn run(ctx: &Ctx<'_>, args: &StatusArgs) -> Result<()> {
    if args.coverage {
        return coverage::run(ctx, args).await;
    }
    let clock = &ctx.clock;
    let config = load_config(ctx)?;
    let db = ctx.require_db()?;
    let mut stored = read_stored(db, clock.now().to_secs().as_i64())?;
    // Runs the read-only look above found dead are shown as abandoned; the next run
    // records them so.
    let dead_ids: Vec<String> = stored.abandoned.iter().map(|r| r.run_id.clone()).collect();
    for a in stored.attempts.values_mut() {
        if in_progress(&a.status) && dead_ids.contains(&a.run_id) {
            a.status = RegionStatus::Abandoned.into();
        }
    }
    let now = clock.now().to_secs().as_i64();
    let stale_after = args.stale_after.unwrap_or(DEFAULT_STALE_AFTER);
    let stale_s = i64::try_from(stale_after.as_secs()).unwrap_or(i64::MAX);
    let regions = region_lines(&config, &stored, now, stale_s);

    let budget = &config.budget;
    let read = super::identity::ReadJson::check(ctx, budget);
    let limiter = open_limiter(ctx, budget, Access::Read).await?;
    let (window, budget_error) = match budget_window(&limiter, budget).await {
        Ok(window) => (Some(window), None),
        Err(said) => (None, Some(said)),
    };
    // While the limiter cannot be read, what is still known: what the latest run that
    // read it saw, and the calls waiting to be counted since.
    let last_known = match &window {
        Some(_) => None,
        None => LastKnownJson::read(Some(db), budget)?,
    };
    let journal = JournalJson::read(Some(db), &budget.key)?;
    let skews = skew::recorded(Some(db))?;
    let clock_skew = skews
        .iter()
        .map(|s| SkewJson {
            clock: s.clock.as_str(),
            skew_s: s.seconds(),
            measured_at: rfc3339(s.measured_at_us),
            too_far: s.too_far(),
            in_use: limiter.clock() == Some(s.clock),
        })
        .collect();
    let runs = |list: &[RunStart]| {
        list.iter()
            .map(|r| RunJson {
                run_id: r.run_id.clone(),
                started_at: at(r.started_at),
            })
            .collect::<Vec<_>>()
    };
    let report = StatusJson {
        running: runs(&stored.running),
        abandoned: runs(&stored.abandoned),
        regions,
        budget: window,
        budget_error,
        last_known,
        journal,
        sink: SinkJson::new(stored.sink),
        clock_skew,
        read,
    };
    let printed = if args.json {
        print_json(&report)
    } else {
        print_text(
            &report,
            &stored,
            now,
            stale_after,
            &budget.key,
            (&skews, limiter.clock()),
        )
    };
    health(args.stale_after, &report, printed)
}

/// The exit of `status`: without --stale-after the dashboard is the whole point, so
/// failing to print it fails the command; as a health check, the health decides.
fn health(stale_after: Option<Duration>, report: &StatusJson, printed: Result<()>) -> Result<()> {
    let Some(stale_after) = stale_after else {
        return printed;
    };
    let stale: Vec<&str> = report
        .regions
        .iter()
        .filter(|r| r.stale)
        .map(|r| r.code.as_str())
        .collect();
    if !stale.is_empty() {
        tracing::error!(
            regions = %stale.join(","),
            "stale: {} not fetched completely within the last {}",
            stale.join(", "),
            human::duration(stale_after)
        );
        return after_output(printed, Err(SilentExit(ExitCode::Failed).into()));
    }
    after_output(printed, Ok(()))
}

/// Each configured region's line, from what the store holds, stale after `stale_s`.
fn region_lines(config: &Config, stored: &Stored, now: i64, stale_s: i64) -> Vec<RegionJson> {
    config
        .regions
        .regions
        .iter()
        .map(|r| {
            let attempt = stored.attempts.get(&r.code);
            let complete = stored.states.get(&r.code).and_then(|s| s.last_complete_at);
            RegionJson {
                code: r.code.clone(),
                last_attempt_at: attempt.map(|a| at(a.started_at)),
                last_status: attempt.map(|a| a.status.clone()),
                last_reason: attempt.and_then(|a| a.reason.clone()),
                last_complete_at: complete.map(at),
                stale: is_stale(now, complete, stale_s),
                pages: attempt.map(|a| a.pages),
                videos: attempt.map(|a| a.videos),
                units: attempt.map(|a| a.units),
                charts: attempt.map_or_else(Vec::new, |a| {
                    a.charts
                        .iter()
                        .map(|c| (*c != 0).then(|| c.to_string()))
                        .collect()
                }),
            }
        })
        .collect()
}

/// The budget's window as `limiter` holds it, every bucket's figures; what went wrong,
/// in words, when it cannot be read (said as a warning too).
async fn budget_window(limiter: &Limiter, budget: &Budget) -> Result<BudgetJson, String> {
    let st = match read_status(limiter, budget, &[]).await {
        Ok(st) => st,
        Err(e) => {
            let said = crate::error::report(&e);
            tracing::warn!("{said}");
            return Err(said);
        }
    };
    // Read like the window; a limiter that answered that much answers this.
    let spent = limiter.upstream_spent().await.unwrap_or_else(|e| {
        tracing::warn!(
            "reading what the upstream's refusals measured: {}",
            chain(&e)
        );
        Vec::new()
    });
    let buckets: Vec<BucketJson> = budget
        .figures(&st, &spent)
        .iter()
        .map(BucketJson::of)
        .collect();
    let main = &buckets[0];
    Ok(BudgetJson {
        used: main.used,
        ceiling: main.ceiling,
        remaining: main.remaining,
        blocked_until: main.blocked_until.clone(),
        buckets,
    })
}

fn print_text(
    report: &StatusJson,
    stored: &Stored,
    now: i64,
    stale_after: Duration,
    budget_key: &str,
    (skews, in_use): (&[Skew], Option<LimiterClock>),
) -> Result<()> {
    let width = table::width();
    let mut out = table::Wrapped::new(std::io::stdout().lock(), width);
    write_regions(&mut out, width, report, stored, now, stale_after)?;
    for r in &stored.running {
        writeln!(
            out,
            "running    {} {} since {} ({})",
            r.kind.as_str(),
            r.run_id,
            at(r.started_at),
            ago(now, r.started_at)
        )?;
    }
    for r in &stored.abandoned {
        writeln!(
            out,
            "abandoned  {} {} started {} ({}): its process died before it ended",
            r.kind.as_str(),
            r.run_id,
            at(r.started_at),
            ago(now, r.started_at)
        )?;
    }
    write_budget(&mut out, report, budget_key, now)?;
    if let Some(line) = report.sink.text(stored.sink, now) {
        writeln!(out, "{line}")?;
    }
    write_clock(&mut out, skews, in_use)?;
    Ok(())
}

/// The regions' table, then how many were fetched completely within `stale_after`.
fn write_regions(
    out: &mut impl Write,
    width: Option<usize>,
    report: &StatusJson,
    stored: &Stored,
    now: i64,
    stale_after: Duration,
) -> Result<()> {
    // Dropped from the right of this list first when the terminal is narrow.
    let mut regions = Table::new(vec![
        Column::text("region", 0),
        Column::text("last attempt", 4),
        Column::text("status", 0),
        Column::number("pages", 7),
        Column::number("videos", 6),
        Column::number("units", 5),
        Column::text("last complete", 3),
        Column::text("charts", 8),
        Column::reason("reason"),
    ]);
    for r in &report.regions {
        let attempt = stored.attempts.get(&r.code);
        let complete = stored
            .states
            .get(&r.code)
            .and_then(|s| s.last_complete_at)
            .map_or("never".to_owned(), |c| ago(now, c));
        let mark = if r.stale { " (stale)" } else { "" };
        let num = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
        regions.row(vec![
            r.code.clone(),
            attempt.map_or("never".to_owned(), |a| ago(now, a.started_at)),
            r.last_status
                .as_ref()
                .map_or("-".to_owned(), ToString::to_string),
            num(r.pages),
            num(r.videos),
            num(r.units),
            format!("{complete}{mark}"),
            attempt.map_or("-".to_owned(), |a| charts_text(&a.charts)),
            r.last_reason.as_deref().map_or(String::new(), one_line),
        ]);
    }
    regions.write(out, width)?;
    let stale = report.regions.iter().filter(|r| r.stale).count();
    let all = report.regions.len();
    write!(
        out,
        "{} of {all} regions fetched completely within the last {}",
        all - stale,
        human::duration(stale_after)
    )?;
    match stale {
        0 => writeln!(out)?,
        _ => writeln!(out, "; {stale} stale")?,
    }
    Ok(())
}

/// The budget's lines: the limiter and the costs file named once, in the first line
/// (every figure below came from them, which may not be the ones the runs charge),
/// then each bucket's figures; or why the limiter cannot be read, with what is still
/// known. Calls waiting in the journal are said whenever there are any.
fn write_budget(
    out: &mut impl Write,
    report: &StatusJson,
    budget_key: &str,
    now: i64,
) -> Result<()> {
    let from = format!(
        "on {}, costs from {}",
        report.read.limiter.describe(),
        report.read.costs.path
    );
    match &report.budget {
        // One bucket: one line, as before there were others.
        Some(b) if b.buckets.len() == 1 => {
            writeln!(
                out,
                "budget \"{budget_key}\" ({from}): {}",
                bucket_text(&b.buckets[0])
            )?;
        }
        Some(b) => {
            writeln!(out, "budget \"{budget_key}\" ({from}):")?;
            for bucket in &b.buckets {
                writeln!(out, "  bucket \"{}\": {}", bucket.name, bucket_text(bucket))?;
            }
        }
        None => {
            writeln!(
                out,
                "budget \"{budget_key}\" ({from}): the limiter cannot be read: {}",
                report.budget_error.as_deref().unwrap_or("no reason given")
            )?;
            match &report.last_known {
                Some(known) => known.write(out, now)?,
                None => writeln!(
                    out,
                    "  no figures are known: no run has read the limiter yet"
                )?,
            }
            writeln!(out, "  {}", report.journal.text(now))?;
            return Ok(());
        }
    }
    if report.journal.pending_calls > 0 {
        writeln!(out, "  {}", report.journal.text(now))?;
    }
    Ok(())
}

/// The skew last measured on the clock in use, and what it means.
fn write_clock(out: &mut impl Write, skews: &[Skew], in_use: Option<LimiterClock>) -> Result<()> {
    for skew in skews.iter().filter(|s| Some(s.clock) == in_use) {
        let verdict = if skew.too_far() {
            format!(
                "over {}: runs check it with one call and `budget charge` is refused until a run sees the clocks agree; {}",
                amount(MAX_SKEW),
                skew.clock.fix()
            )
        } else {
            "within bounds".to_owned()
        };
        writeln!(
            out,
            "clock: {} (at {}); {verdict}",
            skew.describe(),
            crate::output::human::timestamp(skew.measured_at_us)
        )?;
    }
    Ok(())
}

mod coverage;

#[cfg(test)]
mod tests;
