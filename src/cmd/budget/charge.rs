//! `trendsync budget charge METHOD`: units charged by hand, as a run charges them, for
//! calls made outside trendsync; refused, with exit 75, when the limiter is down or
//! its clock is distrusted (docs/commands.md).

use std::io::Write;

use anyhow::{Context, Result};

use super::json::{ChargeJson, PartJson};
use crate::clock::Clock;
use crate::cmd::{Access, Ctx, load_budget, open_limiter};
use crate::error::{ExitCode, SilentExit, UsageError, after_output, chain};
use crate::output::human;
use crate::output::json::{print_json, seconds};
use crate::quota::skew::{self, Skew};
use crate::quota::{Allowance, Budget, Charge, ChargeError, Decision, Limiter, LimiterError};
use crate::runner::said_no;

/// `denied_by` when the limiter cannot be reached.
const LIMITER_DOWN: &str = "limiter";

/// `denied_by` while the limiter's clock is distrusted (docs/schema.md).
const CLOCK_SKEW: &str = "clock";

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

pub(super) async fn charge(
    ctx: &Ctx<'_>,
    method: &str,
    count: u64,
    reserve: bool,
    json: bool,
) -> Result<()> {
    let (global, clock) = (ctx.global, &ctx.clock);
    let budget = load_budget(ctx)?;
    let allowance = if reserve {
        Allowance::Quota
    } else {
        Allowance::Ceiling
    };
    let charge = charge_of(&budget, method, count, allowance, clock.as_ref())?;
    let _writing =
        super::maintenance::for_writing(ctx.files(), super::maintenance::WRITER_PATIENCE)?;
    super::identity::refuse_other_kind(ctx, &budget.key, false, "budget charge")?;
    let limiter = open_limiter(ctx, &budget, Access::Charge).await?;
    let what = format!("{count} × {method}");
    let decision = match decide(ctx, &limiter, &charge, &what, &budget.key).await? {
        Ok(decision) => decision,
        Err(denied_by) => return refused(json, charge.units, denied_by),
    };
    let report = report_of(&decision, &charge);
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
            let mut out = std::io::stdout().lock();
            // A denial charged nothing: saying where it "charged" would read as a
            // charge made.
            if !decision.granted {
                return writeln!(out, "nothing was charged on {}", limiter.describe());
            }
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
            writeln!(out, "charged on {}{kept}", limiter.describe())
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

/// The charge of `count` calls of `method`, named for this hand charge; a method with
/// no cost, or more units than the limiter counts, is a usage error (2).
fn charge_of(
    budget: &Budget,
    method: &str,
    count: u64,
    allowance: Allowance,
    clock: &dyn Clock,
) -> Result<Charge> {
    let id = format!("manual-{}", crate::runner::run_id::new_run_id(clock));
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
    Ok(charge)
}

/// The limiter's decision on `charge` (`what` was asked for, in words), or why it was
/// refused before one (the word of `denied_by`): a clock not to be trusted, or a
/// limiter that does not answer.
async fn decide(
    ctx: &Ctx<'_>,
    limiter: &Limiter,
    charge: &Charge,
    what: &str,
    budget_key: &str,
) -> Result<Result<Decision, &'static str>> {
    // A charge decided by a clock last seen far from the upstream's would count the
    // window wrongly; only a run can check the clock (its calls' answers say the
    // upstream's time), so until one has, nothing is charged here.
    if let Some(limiter_clock) = limiter.clock()
        && let Some(skew) = skew::recorded_for(ctx.db(), limiter_clock)?.filter(Skew::too_far)
    {
        tracing::error!(
            "{} when last compared, at {}; nothing was charged: {}, then run `trendsync run` once, whose first call checks the clocks; once they agree, charging works again",
            skew.describe(),
            crate::output::human::timestamp(skew.measured_at_us),
            skew.clock.fix()
        );
        return Ok(Err(CLOCK_SKEW));
    }
    match limiter.charge(charge).await {
        Ok(d) => Ok(Ok(d)),
        // Nothing can be granted while the limiter is down: a denial, as for a run.
        Err(e) if e.is_unavailable() => {
            let counted = if e.surely_uncounted() {
                "nothing was charged"
            } else {
                // A timeout can come after the script ran; its units then free
                // with its window, and the charge is still refused (the safe side).
                "not granted, though the limiter may have counted it before it stopped answering"
            };
            tracing::error!(
                "{}; {counted}: make the calls when the limiter answers again",
                chain(&e)
            );
            Ok(Err(LIMITER_DOWN))
        }
        // A clock to fix, as a recorded skew is (docs/alerts.md): refused alike.
        Err(LimiterError::ClocksApart { apart, .. }) => {
            let recorded = skew::recorded(ctx.db()).unwrap_or_default();
            tracing::error!("{apart}; nothing was charged; {}", apart.advice(&recorded));
            Ok(Err(CLOCK_SKEW))
        }
        Err(e) => Err(e).with_context(|| {
            format!(
                "charging {what} to budget \"{budget_key}\" on {}",
                limiter.describe()
            )
        }),
    }
}

/// What `budget charge --json` prints of `decision`.
fn report_of<'a>(decision: &'a Decision, charge: &Charge) -> ChargeJson<'a> {
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
    ChargeJson {
        granted: decision.granted,
        units: decision.units,
        used: applied.map(|p| p.used),
        remaining: applied.map(|p| p.remaining()),
        retry_after_s: decision.retry_after.map(seconds),
        denied_by: decision.denied_by.as_deref(),
        policy: applied.map(|p| p.policy.as_str()),
        parts: parts_of(decision, &charge.bucket),
    }
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
