//! `trendsync budget [--json]`: every bucket's window as the limiter holds it, what is
//! left of it and when it frees, any upstream block or early refusal, the limits, and
//! on a terminal a chart of the units spent per hour (docs/commands.md).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};

use super::json::{
    BudgetBucketJson, BudgetJson, LimitJson, SpentDayJson, SuggestedJson, UnreadJson,
};
use crate::cmd::figures::{JournalJson, LastKnownJson};
use crate::cmd::identity::ReadJson;
use crate::cmd::shared::BucketJson;
use crate::cmd::{Access, Ctx, exit_code_for, load_budget, open_limiter, read_status};
use crate::error::{ExitCode, SilentExit, after_output};
use crate::output::human;
use crate::output::json::{print_json, rfc3339, seconds};
use crate::quota::drift::{self, SpentDay};
use crate::quota::{
    Allowance, BUDGET_POLICY, Bucket, BucketFigures, Budget, Entry, Kind, Status, Window,
};

/// One bucket of `budget --json`: its `figures`, and what `status` (read with its
/// entries) and the upstream's refusals (`spent`) say of its window.
fn bucket_json(
    bucket: &Bucket,
    figures: &BucketFigures,
    status: &Status,
    spent: &[SpentDay],
) -> BudgetBucketJson {
    let state = status
        .policies
        .iter()
        .find(|p| p.kind == Kind::Bucket && p.name == bucket.name);
    let mut by_method = BTreeMap::new();
    for e in state.and_then(|p| p.entries.as_deref()).unwrap_or_default() {
        *by_method.entry(e.method.clone()).or_insert(0) += e.units;
    }
    BudgetBucketJson {
        bucket: BucketJson::of(figures),
        quota: figures.quota,
        remaining_to_quota: figures.remaining(Allowance::Quota),
        window: bucket.window.to_string(),
        window_s: seconds(bucket.window.length_at(status.now.as_i64())),
        next_free_s: state.and_then(|p| p.next_free).map(seconds),
        empty_in_s: state.and_then(|p| p.empty_in).map(seconds),
        by_method,
        suggested: drift::suggest(spent, bucket, status.now).map(|s| SuggestedJson {
            quota: s.quota,
            ceiling: s.ceiling,
            days: s
                .days
                .iter()
                .map(|d| SpentDayJson {
                    day_start: rfc3339(d.day_us),
                    upstream_spent_at: d.units,
                    day_start_us: d.day_us,
                })
                .collect(),
        }),
    }
}

fn summarize(budget: &Budget, status: &Status, spent: &[SpentDay]) -> BudgetJson {
    let buckets: Vec<BudgetBucketJson> = budget
        .buckets()
        .iter()
        .zip(budget.figures(status, spent))
        .map(|(b, figures)| bucket_json(b, &figures, status, spent))
        .collect();
    let main = &buckets[0];
    let limits = budget
        .limits
        .iter()
        .filter_map(|l| {
            let p = status
                .policies
                .iter()
                .find(|p| p.kind == Kind::Limit && p.name == l.name)?;
            Some(LimitJson {
                name: l.name.clone(),
                used: p.used,
                max: l.max,
                window_s: seconds(l.window.length_at(status.now.as_i64())),
                next_free_s: p.next_free.map(seconds),
            })
        })
        .collect();
    BudgetJson {
        used: main.bucket.used,
        ceiling: main.bucket.ceiling,
        quota: main.quota,
        remaining: main.bucket.remaining,
        remaining_to_quota: main.remaining_to_quota,
        window_s: main.window_s,
        next_free_s: main.next_free_s,
        empty_in_s: main.empty_in_s,
        by_method: main.by_method.clone(),
        limits,
        blocked_until: main.bucket.blocked_until.clone(),
        buckets,
        read: None,
    }
}

/// "over the last 24h", or "today (day@America/Los_Angeles)".
fn over(window: &str, window_s: f64) -> String {
    if window.starts_with(Window::DAY_PREFIX) {
        format!(
            "today ({window}, a day of {})",
            human::duration(Duration::from_secs_f64(window_s))
        )
    } else {
        format!(
            "over the last {}",
            human::duration(Duration::from_secs_f64(window_s))
        )
    }
}

/// One bucket's lines of `budget`.
pub(super) fn print_bucket(
    out: &mut impl Write,
    b: &BudgetBucketJson,
    alone: bool,
) -> std::io::Result<()> {
    let f = &b.bucket;
    let opt = |d: Option<f64>, what: &str| match d {
        Some(s) => format!(
            "in {} ({what})",
            human::duration(Duration::from_secs_f64(s))
        ),
        None => "now (the window is empty)".to_owned(),
    };
    if !alone {
        writeln!(out, "  bucket {}", f.name)?;
    }
    // A calendar day's units all leave together, at its end.
    let (oldest, newest) = match b.window.strip_prefix(Window::DAY_PREFIX) {
        Some(zone) => {
            let at = format!("the day ends: midnight in {zone}");
            (at.clone(), at)
        }
        None => (
            "the oldest units leave the window".to_owned(),
            "the newest units leave the window".to_owned(),
        ),
    };
    // What can be spent now comes first: "next free in 24h" above 9459 units left
    // read as "nothing available". While the upstream's block lasts that is nothing,
    // whatever this budget counted, so the block leads.
    if let Some(until) = f.figures.blocked_until {
        writeln!(
            out,
            "  blocked     until {}: the upstream said this bucket's quota is spent",
            crate::output::human::timestamp(until.as_i64())
        )?;
        writeln!(
            out,
            "  available   none until then; by this budget's count {} to the ceiling ({} to the quota)",
            f.remaining, b.remaining_to_quota
        )?;
    } else if f.remaining > 0 {
        writeln!(
            out,
            "  available   {} now, to the ceiling ({} to the quota)",
            f.remaining, b.remaining_to_quota
        )?;
    } else {
        writeln!(
            out,
            "  available   none to the ceiling; {} to the quota (backfill, budget charge --reserve)",
            b.remaining_to_quota
        )?;
    }
    writeln!(
        out,
        "  used        {} of ceiling {} (quota {}) {}",
        f.used,
        f.ceiling,
        b.quota,
        over(&b.window, b.window_s)
    )?;
    let frees = if f.remaining > 0 {
        "  more frees  "
    } else {
        "  next free   "
    };
    writeln!(out, "{frees}{}", opt(b.next_free_s, &oldest))?;
    writeln!(out, "  empty       {}", opt(b.empty_in_s, &newest))?;
    if !b.by_method.is_empty() {
        let methods: Vec<String> = b
            .by_method
            .iter()
            .map(|(m, u)| format!("{m} {u}"))
            .collect();
        writeln!(out, "  by method   {}", methods.join(", "))?;
    }
    if f.figures.blocked_until.is_none() {
        writeln!(out, "  blocked     no")?;
    }
    if let Some(units) = f.upstream_spent_at {
        writeln!(
            out,
            "  upstream    said the quota is spent today at {units} units counted since midnight {} (quota {}): another consumer of the key, or a quota lower than configured",
            drift::UPSTREAM_ZONE,
            b.quota
        )?;
    }
    if let Some(s) = &b.suggested {
        let days: Vec<String> = s
            .days
            .iter()
            .map(|d| {
                format!(
                    "{} on the day from {}",
                    d.upstream_spent_at,
                    crate::output::human::timestamp(d.day_start_us)
                )
            })
            .collect();
        writeln!(
            out,
            "  suggested   quota {}, ceiling {}: the upstream said the quota was spent at {} units counted",
            s.quota,
            s.ceiling,
            days.join(" and ")
        )?;
    }
    Ok(())
}

pub(super) async fn show(ctx: &Ctx<'_>, json: bool) -> Result<()> {
    let (global, _clock) = (ctx.global, &ctx.clock);
    let budget = load_budget(ctx)?;
    if global.redis_url.is_none() {
        // The embedded limiter's window is in the database: none there is a typo in
        // --db, not a whole budget left.
        ctx.require_db()?;
    }
    let read = super::identity::ReadJson::check(ctx, &budget);
    let limiter = open_limiter(ctx, &budget, Access::ReadReplayed).await?;
    let names: Vec<&str> = budget.buckets().iter().map(|b| b.name.as_str()).collect();
    let status = match read_status(&limiter, &budget, &names).await {
        Ok(status) => status,
        // Down, or its clock too far from this host's to count a day: try later (75),
        // with what is still known meanwhile.
        Err(e) if exit_code_for(&e) == ExitCode::TryLater => {
            return unreadable(ctx, &budget, read, &e, json);
        }
        Err(e) => return Err(e),
    };
    let spent = limiter.upstream_spent().await.with_context(|| {
        format!(
            "reading what the upstream's refusals of budget \"{}\" measured from {}",
            budget.key,
            limiter.describe()
        )
    })?;
    let mut report = summarize(&budget, &status, &spent);
    let costs = read.costs.path.clone();
    report.read = Some(read);
    if json {
        return print_json(&report);
    }
    let width = crate::output::table::width();
    let mut out = crate::output::table::Wrapped::new(std::io::stdout().lock(), width);
    writeln!(
        out,
        "budget \"{}\" on {}, costs from {costs}",
        budget.key,
        limiter.describe()
    )?;
    let alone = report.buckets.len() == 1;
    for b in &report.buckets {
        print_bucket(&mut out, b, alone)?;
    }
    for l in &report.limits {
        let free = l.next_free_s.map_or(String::new(), |s| {
            format!(
                ", next free in {}",
                human::duration(Duration::from_secs_f64(s))
            )
        });
        writeln!(
            out,
            "  limit       {}: {} of {} per {}{free}",
            l.name,
            l.used,
            l.max,
            human::duration(Duration::from_secs_f64(l.window_s))
        )?;
    }
    if std::io::stdout().is_terminal() {
        let entries = status
            .policy(BUDGET_POLICY)
            .and_then(|p| p.entries.as_deref());
        chart(
            &mut out,
            entries.unwrap_or_default(),
            budget.main().window.at(status.now.as_i64()).cutoff_us + 1,
            status.now.as_i64(),
            bar_width(width),
        )?;
    }
    Ok(())
}

/// `budget` when the limiter cannot be read: the error, said as every failure is (on
/// stderr), then on stdout the last known figures with when they were read, and the
/// calls that wait in the journal to be counted (docs/json.md, "While the limiter
/// cannot be read"); exit 75, since the next try may read it.
fn unreadable(
    ctx: &Ctx<'_>,
    budget: &Budget,
    read: ReadJson,
    err: &anyhow::Error,
    json: bool,
) -> Result<()> {
    let error = crate::error::report(err);
    tracing::error!("{error}");
    let db = ctx.db();
    let last_known = LastKnownJson::read(db, budget)?;
    let journal = JournalJson::read(db, &budget.key)?;
    let printed = if json {
        print_json(&UnreadJson {
            status: "failed",
            exit_code: ExitCode::TryLater.code(),
            error,
            last_known,
            journal,
            read,
        })
    } else {
        let now = ctx.clock.now().to_secs().as_i64();
        let mut out = std::io::stdout().lock();
        (|| -> std::io::Result<()> {
            writeln!(
                out,
                "budget \"{}\" on {}, costs from {}: the limiter cannot be read, so nothing below is current",
                budget.key,
                read.limiter.describe(),
                read.costs.path
            )?;
            match &last_known {
                Some(known) => known.write(&mut out, now)?,
                None => writeln!(
                    out,
                    "  no figures are known: no run has read the limiter yet"
                )?,
            }
            writeln!(out, "  {}", journal.text(now))
        })()
        .map_err(Into::into)
    };
    after_output(printed, Err(SilentExit(ExitCode::TryLater).into()))
}

/// Units spent per clock hour across the window, oldest first, as horizontal bars
/// labelled with each hour's start (UTC), scaled so that the busiest hour fills `width`
/// columns of bar, the scale said in the heading. The window starts at `start_us`: a
/// window's length before now, or a calendar day's midnight.
pub(super) fn chart(
    out: &mut impl Write,
    entries: &[Entry],
    start_us: i64,
    now_us: i64,
    width: usize,
) -> std::io::Result<()> {
    const HOUR: i64 = 3_600_000_000;
    // Whole clock hours, from the one holding the window's start to the one holding
    // now; at most two days of them.
    let first = start_us.div_euclid(HOUR).max(now_us.div_euclid(HOUR) - 47);
    let last = now_us.div_euclid(HOUR);
    let mut sums = vec![0u64; usize::try_from(last - first + 1).unwrap_or(1)];
    for e in entries {
        let hour = e.at_us.div_euclid(HOUR).clamp(first, last);
        sums[usize::try_from(hour - first).unwrap_or(0)] += e.units;
    }
    let top = sums.iter().copied().max().unwrap_or(0);
    let per_mark = top.div_ceil(width.max(1) as u64).max(1);
    writeln!(
        out,
        "\n  units per hour (UTC); # = {per_mark} unit{}",
        if per_mark == 1 { "" } else { "s" }
    )?;
    // A 24-hour window touches 25 clock hours, the first and the last with the same
    // clock time (and a calendar day's window one more on a long day): when the chart
    // crosses midnight, the first bar and each day's first carry the date, so that no
    // two bars read alike.
    let dated = first.div_euclid(24) != last.div_euclid(24);
    for (i, units) in sums.iter().enumerate() {
        let hour = first + i as i64;
        let label = match (dated, i == 0 || hour.rem_euclid(24) == 0) {
            (false, _) => hour_label(hour, "%H:%M"),
            (true, true) => hour_label(hour, "%m-%d %H:%M"),
            (true, false) => format!("{:>11}", hour_label(hour, "%H:%M")),
        };
        let bar = "#".repeat(usize::try_from(units.div_ceil(per_mark)).unwrap_or(0));
        writeln!(out, "  {label} {bar} {units}")?;
    }
    Ok(())
}

/// The start of clock hour `hour` (hours since the Unix epoch, UTC) in `format`.
fn hour_label(hour: i64, format: &str) -> String {
    const HOUR_US: i64 = 3_600_000_000;
    jiff::Timestamp::from_microsecond(hour.saturating_mul(HOUR_US))
        .map_or_else(|_| "??:??".to_owned(), |t| t.strftime(format).to_string())
}

/// The columns a bar may take in `width` (80 when unlimited): what is left after the
/// label (a date and a time) and the count, at most 40.
fn bar_width(width: Option<usize>) -> usize {
    width.unwrap_or(80).saturating_sub(22).clamp(8, 40)
}
