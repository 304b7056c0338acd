//! `trendsync budget unblock [BUCKET]`: lifting an upstream block before its reset,
//! for the operator who knows the key's quota was raised or reset (docs/commands.md).

use std::io::Write;

use anyhow::{Context, Result};

use super::json::{UnblockJson, UnblockedJson};
use crate::clock::Micros;
use crate::cmd::{Access, Ctx, load_budget, open_limiter};
use crate::error::UsageError;
use crate::output::json::{print_json, rfc3339};
use crate::quota::{BUDGET_POLICY, Bucket, Budget};

/// The bucket `name`, or a usage error naming the buckets there are.
fn bucket_named<'a>(budget: &'a Budget, name: &str) -> Result<&'a Bucket> {
    budget.bucket(name).ok_or_else(|| {
        let known: Vec<&str> = budget.buckets().iter().map(|b| b.name.as_str()).collect();
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
pub(super) async fn unblock(ctx: &Ctx<'_>, bucket: Option<&str>, json: bool) -> Result<()> {
    let budget = load_budget(ctx)?;
    let buckets = match bucket {
        Some(name) => vec![bucket_named(&budget, name)?],
        None => budget.buckets().iter().collect(),
    };
    let _writing =
        super::maintenance::for_writing(ctx.files(), super::maintenance::WRITER_PATIENCE)?;
    let limiter = open_limiter(ctx, &budget, Access::Charge).await?;
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
