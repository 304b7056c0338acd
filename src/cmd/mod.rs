//! One file per command, each with one entry point; this module dispatches and holds
//! what several commands share: loading the configuration and opening the limiter.

mod budget;
mod completions;
mod crontab;
mod run;
mod search;

use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command, Global};
use crate::config::{self, Config, Origin};
use crate::error::UsageError;
use crate::quota::{Budget, EmbeddedLimiter, Limiter, RedisLimiter, Status};
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

/// Whether the limiter is opened to charge or only to read. Reading creates and
/// writes nothing, so `--dry-run` and `budget` leave no trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Charge,
}

pub(crate) async fn open_limiter(
    global: &Global,
    budget: &Budget,
    access: Access,
) -> Result<Limiter> {
    match &global.redis_url {
        Some(url) => Ok(Limiter::Redis(
            RedisLimiter::connect(url, &budget.key).await?,
        )),
        None => embedded(&global.db, &budget.key, access).map(Limiter::Embedded),
    }
}

fn embedded(db: &Path, key: &str, access: Access) -> Result<EmbeddedLimiter> {
    let limiter = match access {
        Access::Read => EmbeddedLimiter::open_read_only(db, key),
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
