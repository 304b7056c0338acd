//! `trendsync budget [--json]`: every bucket's window as the limiter holds it, what is
//! left of it and when it frees, any upstream block or early refusal, the limits, and
//! on a terminal a chart of the units spent per hour (docs/commands.md).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};

use super::json::{BudgetBucketJson, BudgetJson, LimitJson, SpentDayJson, SuggestedJson};
use crate::cmd::shared::BucketJson;
use crate::cmd::{Access, Ctx, load_budget, open_limiter, read_status};
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
fn print_bucket(out: &mut impl Write, b: &BudgetBucketJson, alone: bool) -> std::io::Result<()> {
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
    // read as "nothing available".
    if f.remaining > 0 {
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
    match f.figures.blocked_until {
        Some(until) => writeln!(
            out,
            "  blocked     until {}: the upstream said this bucket's quota is spent",
            crate::output::human::timestamp(until.as_i64())
        )?,
        None => writeln!(out, "  blocked     no")?,
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
    let status = read_status(&limiter, &budget, &names).await?;
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
    for (i, units) in sums.iter().enumerate() {
        let hour = first + i as i64;
        let label = jiff::Timestamp::from_microsecond(hour * HOUR)
            .map_or_else(|_| "??:??".to_owned(), |t| t.strftime("%H:%M").to_string());
        let bar = "#".repeat(usize::try_from(units.div_ceil(per_mark)).unwrap_or(0));
        writeln!(out, "  {label} {bar} {units}")?;
    }
    Ok(())
}

/// The columns a bar may take in `width` (80 when unlimited): what is left after the
/// label and the count, at most 40.
fn bar_width(width: Option<usize>) -> usize {
    width.unwrap_or(80).saturating_sub(16).clamp(8, 40)
}
