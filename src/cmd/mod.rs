//! One file per command, each with one entry point; this module dispatches and holds
//! what several commands share: loading the configuration and opening the limiter.

mod budget;
mod completions;
mod crontab;
mod export;
mod prune;
mod run;
mod search;

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command, Global};
use crate::config::{self, Config, Origin};
use crate::error::UsageError;
use crate::quota::{Budget, EmbeddedLimiter, Journal, Limiter, RedisLimiter, Status};
use crate::youtube;

pub async fn run(cli: Cli) -> Result<()> {
    crate::logging::init(cli.global.log_format, cli.global.verbose, cli.global.quiet);
    let global = &cli.global;
    match &cli.command {
        Command::Run(args) => run::run(global, args).await,
        Command::Backfill(args) => run::backfill(global, args).await,
        Command::Budget(args) => budget::run(global, args).await,
        Command::Completions { shell } => completions::run(*shell),
        Command::Search(args) => search::run(global, args),
        Command::Crontab(args) => crontab::run(global, args),
        Command::Prune(args) => prune::run(global, args),
        Command::Export(args) => export::run(global, args),
    }
}

/// The upstream methods trendsync itself charges, which must all have a cost.
const CALLED: &[&str] = &[youtube::VIDEOS_LIST, youtube::VIDEO_CATEGORIES_LIST];

pub(crate) fn load_config(global: &Global) -> Result<Config> {
    let costs = Origin::resolve(global.costs.as_deref(), "quota-costs.toml");
    let regions = Origin::resolve(global.regions.as_deref(), "regions.toml");
    Ok(Config::load(
        &costs,
        &regions,
        CALLED,
        youtube::SEARCH_LIST,
    )?)
}

pub(crate) fn load_budget(global: &Global) -> Result<Budget> {
    Ok(config::load_budget(&Origin::resolve(
        global.costs.as_deref(),
        "quota-costs.toml",
    ))?)
}

/// Whether the limiter is opened to charge or only to read, and whether the calls
/// journalled while it was down are replayed into it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read the window as it stands; create and write nothing anywhere (`--dry-run`).
    Read,
    /// Read the window once the journal has been replayed into it, so that it shows
    /// every call made (`budget`).
    ReadReplayed,
    /// Charge calls, after replaying the journal.
    Charge,
}

/// Opens the budget's limiter. A Redis that cannot be reached is [`Limiter::Down`],
/// not an error: the command's calls then follow `[when_limiter_down]`. A limiter that
/// answers first gets the calls journalled while it was down (DESIGN.md 3.6).
pub(crate) async fn open_limiter(
    global: &Global,
    budget: &Budget,
    access: Access,
) -> Result<Limiter> {
    let limiter = match &global.redis_url {
        Some(url) => Limiter::or_down(
            RedisLimiter::connect(url, &budget.key)
                .await
                .map(Limiter::Redis),
        )?,
        None => embedded(&global.db, &budget.key, access).map(Limiter::Embedded)?,
    };
    let can_record = match &limiter {
        Limiter::Redis(_) => access != Access::Read,
        // Opened read-only for `budget`; the next charging command replays.
        Limiter::Embedded(_) => access == Access::Charge,
        Limiter::Down { .. } => false,
    };
    if can_record {
        replay_journal(&global.db, budget, &limiter).await;
    }
    Ok(limiter)
}

/// Replays the journal into `limiter`. A replay that fails leaves what it did not
/// replay for the next command, and never stops this one.
async fn replay_journal(db: &Path, budget: &Budget, limiter: &Limiter) {
    let journal = match Journal::open_if_pending(db) {
        Ok(Some(journal)) => journal,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(
                "{e}; the calls journalled while the limiter was down stay for next time"
            );
            return;
        }
    };
    let done = match journal.replay(&budget.key, limiter).await {
        Ok(done) => done,
        Err(e) => {
            tracing::warn!("{e}; the calls not yet replayed stay for next time");
            return;
        }
    };
    if done.calls > 0 {
        tracing::info!(
            "replayed {} call{} ({} units) made while the limiter was down into budget \"{}\" on {}, at their original times",
            done.calls,
            if done.calls == 1 { "" } else { "s" },
            done.units,
            budget.key,
            limiter.describe()
        );
    }
    if let Some(e) = &done.interrupted {
        tracing::warn!(
            "replaying the journal in {} stopped: {e}; {} call{} stay for next time",
            db.display(),
            done.left,
            if done.left == 1 { "" } else { "s" }
        );
    }
    if done.unreadable > 0 {
        tracing::warn!(
            "{} row{} of quota_journal in {} cannot be read back and {} left in place",
            done.unreadable,
            if done.unreadable == 1 { "" } else { "s" },
            db.display(),
            if done.unreadable == 1 { "was" } else { "were" }
        );
    }
}

fn embedded(db: &Path, key: &str, access: Access) -> Result<EmbeddedLimiter> {
    let limiter = match access {
        Access::Read | Access::ReadReplayed => EmbeddedLimiter::open_read_only(db, key),
        Access::Charge => EmbeddedLimiter::open(db, key),
    };
    limiter.with_context(|| format!("opening the embedded limiter in {}", db.display()))
}

/// The budget's window as it stands, listing the entries of the policies named.
pub(crate) async fn read_status(
    limiter: &Limiter,
    budget: &Budget,
    with_entries: &[&str],
) -> Result<Status> {
    limiter
        .status(&budget.policies(), with_entries)
        .await
        .with_context(|| {
            format!(
                "reading budget \"{}\" from {}",
                budget.key,
                limiter.describe()
            )
        })
}

/// The regions a command was asked for, in the configuration's order: all of them
/// when none was named.
pub(crate) fn select_regions<'a>(
    config: &'a Config,
    asked: &[String],
) -> Result<Vec<&'a config::Region>> {
    if asked.is_empty() {
        return Ok(config.regions.regions.iter().collect());
    }
    let mut picked = Vec::with_capacity(asked.len());
    for code in asked {
        let region = config.regions.get(code).ok_or_else(|| {
            let known: Vec<&str> = config
                .regions
                .regions
                .iter()
                .map(|r| r.code.as_str())
                .collect();
            UsageError(format!(
                "--region {code} is not in regions.toml; configured: {}",
                known.join(", ")
            ))
        })?;
        if !picked
            .iter()
            .any(|r: &&config::Region| r.code == region.code)
        {
            picked.push(region);
        }
    }
    Ok(picked)
}
