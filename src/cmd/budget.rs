//! `trendsync budget [--json]` and `trendsync budget charge METHOD`.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Serialize;

use super::{Access, load_budget, open_limiter, read_status};
use crate::cli::{BudgetAction, BudgetArgs, Global};
use crate::error::{ExitCode, SilentExit, UsageError, after_output};
use crate::quota::{Allowance, BUDGET_POLICY, Budget, ChargeError, Decision, Entry, Status};
use crate::report::{human, print_json, rfc3339, seconds};

pub async fn run(global: &Global, args: &BudgetArgs) -> Result<()> {
    match &args.action {
        None => show(global, args.json).await,
        Some(BudgetAction::Charge {
            method,
            count,
            reserve,
            json,
        }) => charge(global, method, *count, *reserve, *json).await,
        Some(BudgetAction::Unblock { json }) => unblock(global, *json).await,
    }
}

/// The JSON of `budget unblock --json`.
#[derive(Debug, Serialize)]
struct UnblockJson {
    /// Whether a block was in force and was lifted.
    unblocked: bool,
    /// When the lifted block would have ended.
    was_blocked_until: Option<String>,
}

/// Lifts an upstream block before its reset, for the operator who knows the key's
/// quota was raised or reset. Logged, so the cron log shows who let calls through.
async fn unblock(global: &Global, json: bool) -> Result<()> {
    let budget = load_budget(global)?;
    let _writing =
        super::maintenance::for_writing(&global.db, super::maintenance::WRITER_PATIENCE)?;
    let limiter = open_limiter(global, &budget, Access::Charge).await?;
    let until = limiter.unblock().await.with_context(|| {
        format!(
            "lifting the upstream block of budget \"{}\" on {}",
            budget.key,
            limiter.describe()
        )
    })?;
    let report = UnblockJson {
        unblocked: until.is_some(),
        was_blocked_until: until.map(rfc3339),
    };
    match &report.was_blocked_until {
        Some(was) => tracing::warn!(
            budget = %budget.key,
            "lifted the upstream block of budget \"{}\" on {} (it would have lasted until {was}); runs may call the upstream again",
            budget.key,
            limiter.describe()
        ),
        None => tracing::info!(
            budget = %budget.key,
            "budget \"{}\" on {} was not blocked; nothing changed",
            budget.key,
            limiter.describe()
        ),
    }
    if json {
        return print_json(&report);
    }
    let mut out = std::io::stdout().lock();
    match &report.was_blocked_until {
        Some(was) => writeln!(
            out,
            "unblocked budget \"{}\" (the block would have lasted until {was})",
            budget.key
        )?,
        None => writeln!(out, "budget \"{}\" was not blocked", budget.key)?,
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

/// The JSON of `budget --json` (DESIGN.md section 2).
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
}

fn summarize(budget: &Budget, status: &Status) -> BudgetJson {
    let main = status.policies.iter().find(|p| p.name == BUDGET_POLICY);
    let used = main.map_or(0, |p| p.used);
    let mut by_method = BTreeMap::new();
    for e in main.and_then(|p| p.entries.as_deref()).unwrap_or_default() {
        *by_method.entry(e.method.clone()).or_insert(0) += e.units;
    }
    let limits = budget
        .limits
        .iter()
        .filter_map(|l| {
            let p = status.policies.iter().find(|p| p.name == l.name)?;
            Some(LimitJson {
                name: l.name.clone(),
                used: p.used,
                max: l.max,
                window_s: seconds(l.window),
                next_free_s: p.next_free.map(seconds),
            })
        })
        .collect();
    BudgetJson {
        used,
        ceiling: budget.ceiling,
        quota: budget.quota,
        remaining: budget.ceiling.saturating_sub(used),
        remaining_to_quota: budget.quota.saturating_sub(used),
        window_s: seconds(budget.window),
        next_free_s: main.and_then(|p| p.next_free).map(seconds),
        empty_in_s: main.and_then(|p| p.empty_in).map(seconds),
        by_method,
        limits,
        blocked_until: status.blocked_until_us.map(rfc3339),
    }
}

async fn show(global: &Global, json: bool) -> Result<()> {
    let budget = load_budget(global)?;
    let limiter = open_limiter(global, &budget, Access::ReadReplayed).await?;
    let status = read_status(&limiter, &budget, &[BUDGET_POLICY]).await?;
    let report = summarize(&budget, &status);
    if json {
        return print_json(&report);
    }
    let mut out = std::io::stdout().lock();
    let opt = |d: Option<f64>, what: &str| match d {
        Some(s) => format!("in {} ({what})", human(Duration::from_secs_f64(s))),
        None => "now (the window is empty)".to_owned(),
    };
    writeln!(out, "budget \"{}\" on {}", budget.key, limiter.describe())?;
    writeln!(
        out,
        "  used        {} of ceiling {} (quota {}) over the last {}",
        report.used,
        report.ceiling,
        report.quota,
        human(budget.window)
    )?;
    writeln!(
        out,
        "  remaining   {} to the ceiling, {} to the quota",
        report.remaining, report.remaining_to_quota
    )?;
    writeln!(
        out,
        "  next free   {}",
        opt(report.next_free_s, "the oldest units leave the window")
    )?;
    writeln!(
        out,
        "  empty       {}",
        opt(report.empty_in_s, "the newest units leave the window")
    )?;
    if !report.by_method.is_empty() {
        let methods: Vec<String> = report
            .by_method
            .iter()
            .map(|(m, u)| format!("{m} {u}"))
            .collect();
        writeln!(out, "  by method   {}", methods.join(", "))?;
    }
    for l in &report.limits {
        let free = l.next_free_s.map_or(String::new(), |s| {
            format!(", next free in {}", human(Duration::from_secs_f64(s)))
        });
        writeln!(
            out,
            "  limit       {}: {} of {} per {}{free}",
            l.name,
            l.used,
            l.max,
            human(Duration::from_secs_f64(l.window_s))
        )?;
    }
    match &report.blocked_until {
        Some(until) => writeln!(
            out,
            "  blocked     until {until}: the upstream said the key's quota is spent"
        )?,
        None => writeln!(out, "  blocked     no")?,
    }
    if std::io::stdout().is_terminal() {
        let entries = status
            .policies
            .iter()
            .find(|p| p.name == BUDGET_POLICY)
            .and_then(|p| p.entries.as_deref());
        chart(
            &mut out,
            entries.unwrap_or_default(),
            budget.window,
            status.now_us,
        )?;
    }
    Ok(())
}

/// Units spent per hour across the window, oldest hour first, as horizontal bars.
fn chart(
    out: &mut impl Write,
    entries: &[Entry],
    window: Duration,
    now_us: i64,
) -> std::io::Result<()> {
    const WIDTH: u64 = 40;
    let buckets = usize::try_from(window.as_secs().div_ceil(3600).clamp(1, 48)).unwrap_or(24);
    let bucket_us = i64::try_from(window.as_micros()).unwrap_or(i64::MAX) / buckets as i64;
    let start = now_us - bucket_us * buckets as i64;
    let mut sums = vec![0u64; buckets];
    for e in entries {
        let i = usize::try_from((e.at_us - start).max(0) / bucket_us.max(1))
            .unwrap_or(0)
            .min(buckets - 1);
        sums[i] += e.units;
    }
    let top = sums.iter().copied().max().unwrap_or(0).max(1);
    writeln!(
        out,
        "\n  units per {} (oldest first)",
        human(Duration::from_micros(bucket_us.unsigned_abs()))
    )?;
    for (i, units) in sums.iter().enumerate() {
        let ago = Duration::from_micros((bucket_us * (buckets - i) as i64).unsigned_abs());
        let bar = "#".repeat(usize::try_from(units * WIDTH / top).unwrap_or(0));
        writeln!(out, "  -{:>6} {bar} {units}", human(ago))?;
    }
    Ok(())
}

/// `denied_by` when the limiter cannot be reached.
const LIMITER_DOWN: &str = "limiter";

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
    /// The policy `used` and `remaining` describe.
    policy: Option<&'a str>,
}

async fn charge(
    global: &Global,
    method: &str,
    count: u64,
    reserve: bool,
    json: bool,
) -> Result<()> {
    let budget = load_budget(global)?;
    let allowance = if reserve {
        Allowance::Quota
    } else {
        Allowance::Ceiling
    };
    let id = format!("manual-{}", crate::report::new_run_id());
    let charge = budget
        .charge(&id, method, count, allowance)
        .map_err(|e| match e {
            ChargeError::UnknownMethod(_) => {
                let known: Vec<&str> = budget.costs.keys().map(String::as_str).collect();
                UsageError(format!(
                    "{e}; the methods with a cost are: {}",
                    known.join(", ")
                ))
            }
            ChargeError::TooLarge { .. } => UsageError(e.to_string()),
        })?;
    let _writing =
        super::maintenance::for_writing(&global.db, super::maintenance::WRITER_PATIENCE)?;
    let limiter = open_limiter(global, &budget, Access::Charge).await?;
    let decision: Decision = match limiter.charge(&charge).await {
        Ok(d) => d,
        // Nothing can be granted while the limiter is down: a denial, as for a run.
        Err(e) if e.is_unavailable() => {
            tracing::error!(
                "{e}; nothing was charged: make the calls when the limiter answers again"
            );
            let printed = if json {
                print_json(&ChargeJson {
                    granted: false,
                    units: charge.units,
                    used: None,
                    remaining: None,
                    retry_after_s: None,
                    denied_by: Some(LIMITER_DOWN),
                    policy: None,
                })
            } else {
                Ok(())
            };
            return after_output(printed, Err(SilentExit(ExitCode::TryLater).into()));
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
    // The numbers are those of the policy that said no or is next to; while the
    // upstream block says no, which no policy's numbers describe, the budget's own.
    let applied = decision
        .applied()
        .or_else(|| decision.parts.iter().find(|p| p.policy == BUDGET_POLICY));
    let report = ChargeJson {
        granted: decision.granted,
        units: decision.units,
        used: applied.map(|p| p.used),
        remaining: applied.map(|p| p.remaining()),
        retry_after_s: decision.retry_after.map(seconds),
        denied_by: decision.denied_by.as_deref(),
        policy: applied.map(|p| p.policy.as_str()),
    };
    let printed = if json {
        print_json(&report)
    } else {
        print_decision(&report, &decision, count, method).map_err(Into::into)
    };
    let outcome = if decision.granted {
        Ok(())
    } else {
        Err(SilentExit(ExitCode::TryLater).into())
    };
    after_output(printed, outcome)
}

fn print_decision(
    report: &ChargeJson<'_>,
    decision: &Decision,
    count: u64,
    method: &str,
) -> std::io::Result<()> {
    let about = report
        .policy
        .map_or(String::new(), |p| format!(" in policy \"{p}\""));
    let (units, verb) = if report.units == 1 {
        ("unit", "does")
    } else {
        ("units", "do")
    };
    let what = format!("{} {units} ({count} × {method})", report.units);
    let after = format!(
        "{} used, {} remaining{about}",
        report.used.unwrap_or(0),
        report.remaining.unwrap_or(0)
    );
    let mut out = std::io::stdout().lock();
    if decision.granted {
        writeln!(out, "granted {what}; {after}")?;
    } else {
        let policy = report.denied_by.unwrap_or("the budget");
        let wait = match decision.retry_after {
            Some(d) => format!("retry after {} ({:.3} s)", human(d), d.as_secs_f64()),
            None => "it can never fit: it is larger than the policy's maximum".to_owned(),
        };
        writeln!(
            out,
            "denied by {policy}: {what} {verb} not fit; {wait}; {after}"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000_000;

    fn entry(at_us: i64, units: u64) -> Entry {
        Entry {
            at_us,
            units,
            method: "videos.list".into(),
        }
    }

    #[test]
    fn the_chart_has_one_bar_per_hour_oldest_first_scaled_to_the_busiest() {
        let now = 100 * H;
        // 100 units half an hour ago, 25 units 23.5 hours ago.
        let entries = [entry(now - 23 * H - H / 2, 25), entry(now - H / 2, 100)];
        let mut out = Vec::new();
        chart(&mut out, &entries, Duration::from_secs(24 * 3600), now).expect("writing to memory");
        let text = String::from_utf8(out).expect("utf-8");
        let bars: Vec<&str> = text.lines().filter(|l| l.starts_with("  -")).collect();
        assert!(text.contains("units per 1h (oldest first)"), "{text}");
        assert_eq!(bars.len(), 24, "{text}");
        assert_eq!(bars[0], format!("  -   24h {} 25", "#".repeat(10)));
        assert_eq!(bars[23], format!("  -    1h {} 100", "#".repeat(40)));
        assert!(bars[1..23].iter().all(|b| b.ends_with(" 0")), "{text}");
    }
}
