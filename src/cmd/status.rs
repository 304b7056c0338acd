//! `trendsync status`: the operator's dashboard, from the database alone (and the
//! budget in one line): per region the last attempt and why it ended so, the age of
//! the last complete fetch, runs in progress and runs a killed process abandoned.
//! `--stale-after` makes it a health check (exit 1 when a region is stale).

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::budget::json::BucketJson;
use super::{Access, Ctx, load_config, open_limiter, read_status};
use crate::cli::StatusArgs;
use crate::config::Config;
use crate::error::{ExitCode, SilentExit, after_output};
use crate::output::human;
use crate::output::json::{print_json, rfc3339};
use crate::output::table::{self, Column, Table};
use crate::quota::skew::{self, LimiterClock, MAX_SKEW, Skew, amount};
use crate::quota::{Budget, Limiter};

use crate::region_status::{Recorded, RegionStatus, in_progress};
use crate::runner::lock;
use crate::sqlite::Db;
use crate::store::{HistoryRow, RegionState, RunStart, Store};

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
    /// Every clock ever compared, the one in use among them.
    clock_skew: Vec<SkewJson>,
    /// The limiter the budget was read from, the one the latest run charged, and the
    /// costs file read.
    #[serde(flatten)]
    read: super::identity::ReadJson,
}

/// What the database says, read without writing anything.
#[derive(Default)]
struct Stored {
    attempts: BTreeMap<String, HistoryRow>,
    states: BTreeMap<String, RegionState>,
    running: Vec<RunStart>,
    abandoned: Vec<RunStart>,
}

/// Unix seconds as RFC 3339.
pub(crate) fn at(s: i64) -> String {
    rfc3339(s.saturating_mul(1_000_000))
}

/// How far ahead of this host's clock a time may be before it is taken for a wrong
/// clock (the clock-skew bound of docs/schema.md).
const FUTURE_TOLERANCE_S: i64 = 300;

/// Whether a region whose last complete fetch was at `last_complete` (unix seconds)
/// is stale at `now`: never fetched, fetched longer than `stale_s` ago, or fetched at
/// a time still in the future, which only a wrong clock (here or on the host that
/// wrote it) explains and which would otherwise keep a health check passing for as
/// long as the clocks disagree.
pub(crate) fn is_stale(now: i64, last_complete: Option<i64>, stale_s: i64) -> bool {
    last_complete.is_none_or(|c| now.saturating_sub(c) > stale_s || c > now + FUTURE_TOLERANCE_S)
}

/// How long ago, for people: "3h 2m ago"; a time ahead of this host's clock says so
/// ("in the future, 2h 5m ahead").
pub(crate) fn ago(now: i64, then: i64) -> String {
    if then > now {
        return format!(
            "in the future, {} ahead of this host's clock",
            human::duration(Duration::from_secs(u64::try_from(then - now).unwrap_or(0)))
        );
    }
    let secs = u64::try_from(now - then).unwrap_or(0);
    format!("{} ago", human::duration(Duration::from_secs(secs)))
}

/// Text from the store (which holds scrubbed upstream messages) on one terminal
/// line: control characters are shown as escapes, never sent raw.
pub(crate) fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// The charts of a history line for people: `overall+17+25`, `-` for none.
pub(crate) fn charts_text(charts: &[u32]) -> String {
    if charts.is_empty() {
        return "-".to_owned();
    }
    charts
        .iter()
        .map(|c| match c {
            0 => "overall".to_owned(),
            c => c.to_string(),
        })
        .collect::<Vec<_>>()
        .join("+")
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
        })
    };
    read().with_context(|| format!("reading the run history from {}", db.display()))
}

/// Every configured region's last attempt and last complete fetch, as `status --json`
/// prints them.
fn regions_json(config: &Config, stored: &Stored, now: i64, stale_s: i64) -> Vec<RegionJson> {
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

/// Every bucket's figures as the limiter gives them, the main one's also at the top.
async fn read_budget(limiter: &Limiter, budget: &Budget) -> Result<BudgetJson> {
    let st = read_status(limiter, budget, &[]).await?;
    // Read like the window; a limiter that answered that much answers this.
    let spent = limiter.upstream_spent().await.unwrap_or_else(|e| {
        tracing::warn!("reading what the upstream's refusals measured: {e}");
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

pub async fn run(ctx: &Ctx<'_>, args: &StatusArgs) -> Result<()> {
    let (global, clock) = (ctx.global, &ctx.clock);
    let config = load_config(global)?;
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
    let regions = regions_json(&config, &stored, now, stale_s);

    let budget = &config.budget;
    let read = super::identity::ReadJson::check(ctx, budget);
    let limiter = open_limiter(ctx, budget, Access::Read).await?;
    let (window, budget_error) = match read_budget(&limiter, budget).await {
        Ok(window) => (Some(window), None),
        Err(e) => {
            tracing::warn!("{e:#}");
            (None, Some(format!("{e:#}")))
        }
    };
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
    // Without --stale-after the dashboard is the whole point, so failing to print it
    // fails the command; as a health check, the health decides the exit code.
    if args.stale_after.is_none() {
        return printed;
    }
    let stale: Vec<&str> = report
        .regions
        .iter()
        .filter(|r| r.stale)
        .map(|r| r.code.as_str())
        .collect();
    if args.stale_after.is_some() && !stale.is_empty() {
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

/// The budget's lines of `status`: one per bucket, the main one first, or why the
/// limiter could not be read.
fn print_budget(out: &mut impl Write, report: &StatusJson, budget_key: &str) -> Result<()> {
    // Every figure of the budget names the limiter it came from (and the file whose
    // buckets it counts), which may not be the one the runs charge.
    let from = format!(
        "on {}, costs from {}",
        report.read.limiter.describe(),
        report.read.costs.path
    );
    match &report.budget {
        Some(b) => {
            // The main bucket is the budget's line, as it was before there were others.
            for bucket in &b.buckets {
                let what = if bucket.figures.is_main() {
                    format!("budget \"{budget_key}\" ({from})")
                } else {
                    format!("bucket \"{}\" ({from})", bucket.name)
                };
                let early = bucket.upstream_spent_at.map_or(String::new(), |units| {
                    format!(
                        "; the upstream said it was spent today at {units} units counted, below quota {}",
                        bucket.figures.quota
                    )
                });
                writeln!(
                    out,
                    "{what}: {} used of ceiling {}, {} remaining; {}{early}",
                    bucket.used,
                    bucket.ceiling,
                    bucket.remaining,
                    bucket
                        .figures
                        .blocked_until
                        .map_or("not blocked".to_owned(), |u| format!(
                            "blocked until {} (the upstream said this quota is spent)",
                            crate::output::human::timestamp(u.as_i64())
                        ))
                )?;
            }
        }
        None => writeln!(
            out,
            "budget \"{budget_key}\" ({from}): the limiter cannot be read: {}",
            report.budget_error.as_deref().unwrap_or("no reason given")
        )?,
    }
    Ok(())
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
    regions.write(&mut out, width)?;
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
    print_budget(&mut out, report, budget_key)?;
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

#[cfg(test)]
mod tests;
