//! `trendsync budget [--json]` and `trendsync budget charge METHOD`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::{Access, load_budget, open_limiter, read_status};
use crate::cli::{BudgetAction, BudgetArgs, Global};
use crate::clock::{Clock, Micros};
use crate::error::{ExitCode, SilentExit, UsageError, after_output};
use crate::output::human;
use crate::output::json::{print_json, rfc3339, seconds};
use crate::quota::drift::{self, SpentDay};
use crate::quota::skew::{self, Skew};
use crate::quota::{
    Allowance, BUDGET_POLICY, BucketRef, Budget, ChargeError, Decision, Entry, LimiterError,
    Status, Window,
};
use crate::runner::said_no;

pub async fn run(global: &Global, args: &BudgetArgs, clock: &Arc<dyn Clock>) -> Result<()> {
    match &args.action {
        None => show(global, args.json, clock).await,
        Some(BudgetAction::Charge {
            method,
            count,
            reserve,
            json,
        }) => charge(global, method, *count, *reserve, *json, clock).await,
        Some(BudgetAction::Unblock { bucket, json }) => {
            unblock(global, bucket.as_deref(), *json, clock).await
        }
    }
}

/// The JSON of `budget unblock --json`.
#[derive(Debug, Serialize)]
struct UnblockJson {
    /// Whether a block was in force and was lifted, in any bucket asked for.
    unblocked: bool,
    /// When the lifted block would have ended (the latest, when several were).
    was_blocked_until: Option<String>,
    /// Each bucket asked for.
    buckets: Vec<UnblockedJson>,
}

#[derive(Debug, Serialize)]
struct UnblockedJson {
    name: String,
    unblocked: bool,
    was_blocked_until: Option<String>,
}

/// The bucket `name`, or a usage error naming the buckets there are.
fn bucket_named<'a>(budget: &'a Budget, name: &str) -> Result<BucketRef<'a>> {
    budget.bucket(name).ok_or_else(|| {
        let known: Vec<&str> = budget.buckets().iter().map(|b| b.name).collect();
        UsageError(format!(
            "there is no bucket \"{name}\" in the costs file; its buckets are: {}",
            known.join(", ")
        ))
        .into()
    })
}

/// Lifts an upstream block before its reset, for the operator who knows the key's
/// quota was raised or reset: of one bucket, or of every bucket. Logged, so the cron
/// log shows who let calls through.
async fn unblock(
    global: &Global,
    bucket: Option<&str>,
    json: bool,
    clock: &Arc<dyn Clock>,
) -> Result<()> {
    let budget = load_budget(global)?;
    let buckets = match bucket {
        Some(name) => vec![bucket_named(&budget, name)?],
        None => budget.buckets(),
    };
    let _writing =
        super::maintenance::for_writing(&global.db, super::maintenance::WRITER_PATIENCE)?;
    let limiter = open_limiter(global, &budget, Access::Charge, clock).await?;
    let mut lifted = Vec::with_capacity(buckets.len());
    for b in &buckets {
        let until = limiter.unblock(&b.methods()).await.with_context(|| {
            format!(
                "lifting the upstream block of bucket \"{}\" of budget \"{}\" on {}",
                b.name,
                budget.key,
                limiter.describe()
            )
        })?;
        match until {
            Some(until) => tracing::warn!(
                budget = %budget.key,
                bucket = b.name,
                "lifted the upstream block of bucket \"{}\" of budget \"{}\" on {} (it would have lasted until {}); runs may call the upstream again",
                b.name,
                budget.key,
                limiter.describe(),
                crate::output::human::timestamp(until.as_i64())
            ),
            // Nothing changed: the answer below says so, once; no log line.
            None => tracing::debug!(
                budget = %budget.key,
                bucket = b.name,
                "bucket \"{}\" of budget \"{}\" on {} was not blocked; nothing changed",
                b.name,
                budget.key,
                limiter.describe()
            ),
        }
        lifted.push((b.name.to_owned(), until.map(Micros::as_i64)));
    }
    let report = UnblockJson {
        unblocked: lifted.iter().any(|(_, u)| u.is_some()),
        was_blocked_until: lifted.iter().filter_map(|(_, u)| *u).max().map(rfc3339),
        buckets: lifted
            .iter()
            .map(|(name, until)| UnblockedJson {
                name: name.clone(),
                unblocked: until.is_some(),
                was_blocked_until: until.map(rfc3339),
            })
            .collect(),
    };
    if json {
        return print_json(&report);
    }
    // A lifted block was said once, by its log line (the record of the change, which
    // cron and the journal keep); what stayed as it was is said here.
    let mut out = std::io::stdout().lock();
    for b in report
        .buckets
        .iter()
        .filter(|b| b.was_blocked_until.is_none())
    {
        // The main bucket is the budget itself, as it was before there were others.
        let what = if b.name == BUDGET_POLICY {
            format!("budget \"{}\"", budget.key)
        } else {
            format!("bucket \"{}\" of budget \"{}\"", b.name, budget.key)
        };
        writeln!(out, "{what} was not blocked")?;
    }
    Ok(())
}

#[derive(Debug, Serialize)]
struct LimitJson {
    name: String,
    used: u64,
    max: u64,
    window_s: f64,
    next_free_s: Option<f64>,
}

/// One bucket in `budget --json` (docs/json.md).
#[derive(Debug, Serialize)]
struct BucketJson {
    name: String,
    used: u64,
    ceiling: u64,
    quota: u64,
    remaining: u64,
    remaining_to_quota: u64,
    /// As configured: `"24h"` or `"day@America/Los_Angeles"`.
    window: String,
    /// The window's length now; a calendar day's is that day's (82,800 to 90,000).
    window_s: f64,
    next_free_s: Option<f64>,
    empty_in_s: Option<f64>,
    by_method: BTreeMap<String, u64>,
    blocked_until: Option<String>,
    /// The same moment for the text, which shows it to the second.
    #[serde(skip)]
    blocked_until_us: Option<i64>,
    /// Units charged to the bucket since midnight America/Los_Angeles when the upstream
    /// first refused it this upstream day, below its quota (docs/budget.md, "When the
    /// upstream refuses").
    upstream_spent_at: Option<u64>,
    /// The quota and ceiling to configure after two upstream days in a row spent
    /// early; only for a bucket over the upstream's own day.
    suggested: Option<SuggestedJson>,
}

/// What `budget` suggests configuring for a bucket the upstream spent early.
#[derive(Debug, Serialize)]
struct SuggestedJson {
    quota: u64,
    ceiling: u64,
    /// The two upstream days (when each started: midnight America/Los_Angeles) and
    /// their figures, the earlier first.
    days: Vec<SpentDayJson>,
}

#[derive(Debug, Serialize)]
struct SpentDayJson {
    day_start: String,
    upstream_spent_at: u64,
    /// The same moment for the text.
    #[serde(skip)]
    day_start_us: i64,
}

/// The JSON of `budget --json` (docs/json.md): the main bucket's numbers at
/// the top, as before there were other buckets, and every bucket in `buckets`.
#[derive(Debug, Serialize)]
struct BudgetJson {
    used: u64,
    ceiling: u64,
    quota: u64,
    remaining: u64,
    remaining_to_quota: u64,
    window_s: f64,
    next_free_s: Option<f64>,
    empty_in_s: Option<f64>,
    by_method: BTreeMap<String, u64>,
    limits: Vec<LimitJson>,
    blocked_until: Option<String>,
    buckets: Vec<BucketJson>,
    /// The limiter these figures came from, and the one the latest run charged.
    #[serde(flatten)]
    read: Option<super::identity::ReadJson>,
}

fn bucket_json(bucket: &BucketRef<'_>, status: &Status, spent: &[SpentDay]) -> BucketJson {
    let state = status.policy(bucket.name);
    let used = state.map_or(0, |p| p.used);
    let mut by_method = BTreeMap::new();
    for e in state.and_then(|p| p.entries.as_deref()).unwrap_or_default() {
        *by_method.entry(e.method.clone()).or_insert(0) += e.units;
    }
    BucketJson {
        name: bucket.name.to_owned(),
        used,
        ceiling: bucket.ceiling,
        quota: bucket.quota,
        remaining: bucket.ceiling.saturating_sub(used),
        remaining_to_quota: bucket.quota.saturating_sub(used),
        window: bucket.window.to_string(),
        window_s: seconds(bucket.window.length_at(status.now.as_i64())),
        next_free_s: state.and_then(|p| p.next_free).map(seconds),
        empty_in_s: state.and_then(|p| p.empty_in).map(seconds),
        by_method,
        blocked_until: status
            .blocked_until(bucket.name)
            .map(|u| rfc3339(u.as_i64())),
        blocked_until_us: status.blocked_until(bucket.name).map(Micros::as_i64),
        upstream_spent_at: drift::spent_today(spent, bucket.name, status.now),
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
    let buckets: Vec<BucketJson> = budget
        .buckets()
        .iter()
        .map(|b| bucket_json(b, status, spent))
        .collect();
    let main = &buckets[0];
    let limits = budget
        .limits
        .iter()
        .filter_map(|l| {
            let p = status.policies.iter().find(|p| p.name == l.name)?;
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
        used: main.used,
        ceiling: main.ceiling,
        quota: main.quota,
        remaining: main.remaining,
        remaining_to_quota: main.remaining_to_quota,
        window_s: main.window_s,
        next_free_s: main.next_free_s,
        empty_in_s: main.empty_in_s,
        by_method: main.by_method.clone(),
        limits,
        blocked_until: main.blocked_until.clone(),
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
fn print_bucket(out: &mut impl Write, b: &BucketJson, alone: bool) -> std::io::Result<()> {
    let opt = |d: Option<f64>, what: &str| match d {
        Some(s) => format!(
            "in {} ({what})",
            human::duration(Duration::from_secs_f64(s))
        ),
        None => "now (the window is empty)".to_owned(),
    };
    if !alone {
        writeln!(out, "  bucket {}", b.name)?;
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
    if b.remaining > 0 {
        writeln!(
            out,
            "  available   {} now, to the ceiling ({} to the quota)",
            b.remaining, b.remaining_to_quota
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
        b.used,
        b.ceiling,
        b.quota,
        over(&b.window, b.window_s)
    )?;
    let frees = if b.remaining > 0 {
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
    match b.blocked_until_us {
        Some(until) => writeln!(
            out,
            "  blocked     until {}: the upstream said this bucket's quota is spent",
            crate::output::human::timestamp(until)
        )?,
        None => writeln!(out, "  blocked     no")?,
    }
    if let Some(units) = b.upstream_spent_at {
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

async fn show(global: &Global, json: bool, clock: &Arc<dyn Clock>) -> Result<()> {
    let budget = load_budget(global)?;
    if global.redis_url.is_none() {
        // The embedded limiter's window is in the database: none there is a typo in
        // --db, not a whole budget left.
        super::database::require(&global.db)?;
    }
    let read = super::identity::ReadJson::check(global, &budget);
    let limiter = open_limiter(global, &budget, Access::ReadReplayed, clock).await?;
    let names: Vec<&str> = budget.buckets().iter().map(|b| b.name).collect();
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
            budget.window.at(status.now.as_i64()).cutoff_us + 1,
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
fn chart(
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

/// `denied_by` when the limiter cannot be reached.
const LIMITER_DOWN: &str = "limiter";

/// `denied_by` while the limiter's clock is distrusted (docs/schema.md).
const CLOCK_SKEW: &str = "clock";

/// The JSON of `budget charge --json`.
#[derive(Debug, Serialize)]
struct ChargeJson<'a> {
    granted: bool,
    units: u64,
    /// Unknown (null) while the limiter is down.
    used: Option<u64>,
    remaining: Option<u64>,
    retry_after_s: Option<f64>,
    denied_by: Option<&'a str>,
    /// What `used` and `remaining` describe: METHOD's bucket, unless a limit said
    /// no (a JSON field name kept from before buckets and limits had their words).
    policy: Option<&'a str>,
    /// Every bucket and limit the charge went to, its bucket first.
    parts: Vec<PartJson<'a>>,
}

/// One bucket or limit a charge went to, after the decision.
#[derive(Debug, Serialize)]
struct PartJson<'a> {
    name: &'a str,
    /// `bucket` or `limit`.
    kind: &'static str,
    used: u64,
    remaining: u64,
}

/// The parts of `decision`, METHOD's `bucket` first, each with its kind.
fn parts_of<'a>(decision: &'a Decision, bucket: &str) -> Vec<PartJson<'a>> {
    // A charge's first part is its bucket's (none when the method costs nothing
    // there); a limit may bear the bucket's name, so position says which is which.
    let mut parts: Vec<PartJson<'a>> = decision
        .parts
        .iter()
        .enumerate()
        .map(|(i, p)| PartJson {
            name: &p.policy,
            kind: if i == 0 && p.policy == bucket {
                "bucket"
            } else {
                "limit"
            },
            used: p.used,
            remaining: p.remaining(),
        })
        .collect();
    parts.sort_by_key(|p| p.kind != "bucket");
    parts
}

async fn charge(
    global: &Global,
    method: &str,
    count: u64,
    reserve: bool,
    json: bool,
    clock: &Arc<dyn Clock>,
) -> Result<()> {
    let budget = load_budget(global)?;
    let allowance = if reserve {
        Allowance::Quota
    } else {
        Allowance::Ceiling
    };
    let id = format!(
        "manual-{}",
        crate::runner::run_id::new_run_id(clock.as_ref())
    );
    let charge = budget
        .charge(&id, method, count, allowance)
        .map_err(|e| match e {
            ChargeError::UnknownMethod(_) => {
                let known: Vec<&str> = budget.all_costs().into_keys().collect();
                UsageError(format!(
                    "{e}; the methods with a cost are: {}",
                    known.join(", ")
                ))
            }
            ChargeError::TooLarge { .. } => UsageError(e.to_string()),
        })?;
    let _writing =
        super::maintenance::for_writing(&global.db, super::maintenance::WRITER_PATIENCE)?;
    super::identity::refuse_other_kind(global, &budget.key, false, "budget charge")?;
    let limiter = open_limiter(global, &budget, Access::Charge, clock).await?;
    // A charge decided by a clock last seen far from the upstream's would count the
    // window wrongly; only a run can check the clock (its calls' answers say the
    // upstream's time), so until one has, nothing is charged here.
    if let Some(limiter_clock) = limiter.clock()
        && let Some(skew) = skew::recorded_for(&global.db, limiter_clock)?.filter(Skew::too_far)
    {
        tracing::error!(
            "{} when last compared, at {}; nothing was charged: {}, then run `trendsync run` once, whose first call checks the clocks; once they agree, charging works again",
            skew.describe(),
            crate::output::human::timestamp(skew.measured_at_us),
            skew.clock.fix()
        );
        return refused(json, charge.units, CLOCK_SKEW);
    }
    let decision: Decision = match limiter.charge(&charge).await {
        Ok(d) => d,
        // Nothing can be granted while the limiter is down: a denial, as for a run.
        Err(e) if e.is_unavailable() => {
            let counted = if e.surely_uncounted() {
                "nothing was charged"
            } else {
                // A timeout can come after the script ran; its units then free
                // with its window, and the charge is still refused (the safe side).
                "not granted, though the limiter may have counted it before it stopped answering"
            };
            tracing::error!("{e}; {counted}: make the calls when the limiter answers again");
            return refused(json, charge.units, LIMITER_DOWN);
        }
        // A clock to fix, as a recorded skew is (docs/alerts.md): refused alike.
        Err(LimiterError::ClocksApart { apart, .. }) => {
            let recorded = skew::recorded(&global.db).unwrap_or_default();
            tracing::error!("{apart}; nothing was charged; {}", apart.advice(&recorded));
            return refused(json, charge.units, CLOCK_SKEW);
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "charging {count} × {method} to budget \"{}\" on {}",
                    budget.key,
                    limiter.describe()
                )
            });
        }
    };
    // The numbers are those of the policy that said no, else those of METHOD's
    // bucket (docs/json.md): the budget an operator charged, not a narrower limit that
    // happens to have less room. While the upstream block says no, which no policy's
    // numbers describe, the bucket's own too.
    let bucket = decision.parts.iter().find(|p| p.policy == charge.bucket);
    let applied = decision
        .denied_by
        .as_ref()
        .and_then(|name| decision.parts.iter().find(|p| &p.policy == name))
        .or(bucket);
    let report = ChargeJson {
        granted: decision.granted,
        units: decision.units,
        used: applied.map(|p| p.used),
        remaining: applied.map(|p| p.remaining()),
        retry_after_s: decision.retry_after.map(seconds),
        denied_by: decision.denied_by.as_deref(),
        policy: applied.map(|p| p.policy.as_str()),
        parts: parts_of(&decision, &charge.bucket),
    };
    let printed = if json {
        print_json(&report)
    } else {
        print_decision(
            &report,
            &decision,
            &charge.bucket,
            count,
            method,
            clock.now().as_i64(),
        )
        .and_then(|()| {
            // Which window was charged, and which file keeps this host's record of it:
            // a shell without cron's TRENDSYNC_DB would otherwise charge, and keep the
            // ledger in, a new ./trendsync.db unawares.
            let kept = if limiter.keeps_ledger() {
                format!(
                    "; its ledger of this charge is kept in {}",
                    global.db.display()
                )
            } else {
                String::new()
            };
            writeln!(
                std::io::stdout().lock(),
                "charged on {}{kept}",
                limiter.describe()
            )
        })
        .map_err(Into::into)
    };
    let outcome = if decision.granted {
        Ok(())
    } else {
        Err(SilentExit(ExitCode::TryLater).into())
    };
    after_output(printed, outcome)
}

/// A charge refused before the limiter decided it (`denied_by` says why): exit 75,
/// with its JSON when asked for.
fn refused(json: bool, units: u64, denied_by: &str) -> Result<()> {
    let printed = if json {
        print_json(&ChargeJson {
            granted: false,
            units,
            used: None,
            remaining: None,
            retry_after_s: None,
            denied_by: Some(denied_by),
            policy: None,
            parts: Vec::new(),
        })
    } else {
        Ok(())
    };
    after_output(printed, Err(SilentExit(ExitCode::TryLater).into()))
}

fn print_decision(
    report: &ChargeJson<'_>,
    decision: &Decision,
    bucket: &str,
    count: u64,
    method: &str,
    now_us: i64,
) -> std::io::Result<()> {
    let (units, verb) = if report.units == 1 {
        ("unit", "does")
    } else {
        ("units", "do")
    };
    let what = format!("{} {units} ({count} × {method})", report.units);
    let after = standing(&report.parts).unwrap_or_else(|| {
        format!(
            "{} used, {} remaining",
            report.used.unwrap_or(0),
            report.remaining.unwrap_or(0)
        )
    });
    let mut out = std::io::stdout().lock();
    if decision.granted {
        writeln!(out, "granted {what}; {after}")?;
    } else {
        let said = report
            .denied_by
            .map_or_else(|| "the budget".to_owned(), |d| said_no(d, bucket));
        let wait = match decision.retry_after {
            Some(d) => format!(
                "retry after {} (at {})",
                human::duration(d),
                crate::output::human::timestamp(now_us + crate::quota::micros(d))
            ),
            None => format!("it can never fit: it is larger than the maximum of {said}"),
        };
        writeln!(
            out,
            "denied by {said}: {what} {verb} not fit; {wait}; {after}"
        )?;
    }
    Ok(())
}

/// Where the charge leaves what it went to, METHOD's bucket first, then each limit
/// (docs/json.md): `5 used, 9495 remaining in bucket "budget"; 5 used, 95 remaining
/// in limit "search"`. `None` when the charge went to nothing.
fn standing(parts: &[PartJson<'_>]) -> Option<String> {
    let lines: Vec<String> = parts
        .iter()
        .map(|p| {
            format!(
                "{} used, {} remaining in {} \"{}\"",
                p.used, p.remaining, p.kind, p.name
            )
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("; "))
}

#[cfg(test)]
mod tests;
