//! One file per command, each with one entry point; this module dispatches and holds
//! what several commands share: loading the configuration and opening the limiter.

mod budget;
mod completions;
mod configuration;
mod crontab;
mod database;
mod exit;
mod export;
mod identity;
mod key;
mod maintenance;
mod man;
mod prune;
mod run;
mod runs;
mod search;
mod status;
mod video;

pub use exit::exit_code_for;

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use crate::cli::{BudgetAction, Cli, Command, Global};
use crate::clock::Clock;
use crate::config::{self, Config, ConfigDirs, Found, Origin, Source};
use crate::error::{MissingConfig, UsageError, chain, is_broken_pipe, is_silent};
use crate::quota::{
    Budget, EmbeddedLimiter, Journal, Limiter, LimiterError, RedisLimiter, Status, TlsFiles,
};
use crate::youtube;

pub async fn run(cli: Cli) -> Result<()> {
    crate::logging::init(cli.global.log_format, cli.global.verbose, cli.global.quiet);
    let global = &cli.global;
    let uses_db = !matches!(
        cli.command,
        Command::Completions { .. }
            | Command::Man { .. }
            | Command::Crontab(_)
            | Command::Config(_)
    );
    // The commands that write the file refuse one that is not trendsync's before
    // anything opens it, so that it is left byte for byte as it was.
    let writes_db = match &cli.command {
        Command::Run(_) | Command::Backfill(_) | Command::Prune(_) => true,
        Command::Budget(args) => matches!(
            args.action,
            Some(BudgetAction::Charge { .. } | BudgetAction::Unblock { .. })
        ),
        _ => false,
    };
    let checked = if uses_db {
        refuse_hard_linked(&global.db).and_then(|()| {
            if writes_db {
                // A writer would otherwise fail in SQLite's words ("unable to open
                // database file", exit 1) at the path's missing directory.
                refuse_missing_directory(&global.db)?;
                database::refuse_unwritable(&global.db)?;
                database::refuse_foreign(&global.db)
            } else {
                Ok(())
            }
        })
    } else {
        Ok(())
    };
    // The one real clock of this command: everything below that decides by time, or
    // stamps what it writes, is handed this one.
    let clock = crate::clock::system();
    let clock = &clock;
    let result = match checked {
        Err(e) => Err(e),
        Ok(()) => match &cli.command {
            Command::Run(args) => run::run(global, args, clock).await,
            Command::Backfill(args) => run::backfill(global, args, clock).await,
            Command::Budget(args) => budget::run(global, args, clock).await,
            Command::Completions { shell } => completions::run(*shell),
            Command::Man { command } => man::run(command),
            Command::Search(args) => search::run(global, args),
            Command::Video(args) => video::run(global, args),
            Command::Crontab(args) => crontab::run(global, args),
            Command::Config(args) => configuration::run(global, args),
            Command::Status(args) => status::run(global, args, clock).await,
            Command::Runs(args) => runs::run(global, args, clock.as_ref()),
            Command::Prune(args) => prune::run(global, args, clock.as_ref()),
            Command::Export(args) => export::run(global, args, clock.as_ref()),
        },
    };
    if let Err(err) = &result
        && wants_json(&cli.command)
        && !is_silent(err)
        && !is_broken_pipe(err)
    {
        print_failure_json(err);
    }
    result
}

/// A database file with more than one hard link is refused (78): each name gets its
/// own WAL and shared-memory file, and SQLite cannot keep the file consistent across
/// them (its documented hazard; the file ends "malformed").
fn refuse_hard_linked(db: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let Ok(meta) = std::fs::metadata(db)
            && meta.is_file()
            && meta.nlink() > 1
        {
            return Err(MissingConfig(format!(
                "--db {}: the file has {} hard links; SQLite cannot keep a database \
                 consistent under several names (each gets its own WAL). Keep one name \
                 (remove the other links), or use a symbolic link instead",
                db.display(),
                meta.nlink()
            ))
            .into());
        }
    }
    Ok(())
}

/// Whether the command was asked for one JSON object on stdout.
fn wants_json(command: &Command) -> bool {
    match command {
        Command::Run(args) => args.fetch.json,
        Command::Backfill(args) => args.fetch.json,
        Command::Budget(args) => match &args.action {
            None => args.json,
            Some(BudgetAction::Charge { json, .. } | BudgetAction::Unblock { json, .. }) => *json,
        },
        Command::Search(args) => args.json,
        Command::Video(args) => args.json,
        Command::Status(args) => args.json,
        Command::Runs(args) => args.json,
        Command::Prune(args) => args.json,
        Command::Config(args) => args.json,
        Command::Completions { .. }
        | Command::Man { .. }
        | Command::Crontab(_)
        | Command::Export(_) => false,
    }
}

/// A command that failed before it could report (a bad config file, no key) still
/// answers a script that reads its JSON (docs/commands.md), with the message `main`
/// logs.
fn print_failure_json(err: &anyhow::Error) {
    let object = serde_json::json!({
        "status": "failed",
        "exit_code": exit_code_for(err).code(),
        "error": crate::error::report(err),
    });
    if let Err(e) = crate::output::json::print_json(&object) {
        tracing::debug!("the failure could not be printed as JSON either: {e}");
    }
}

/// The upstream methods trendsync itself charges, which must all have a cost.
const CALLED: &[&str] = &[youtube::VIDEOS_LIST, youtube::VIDEO_CATEGORIES_LIST];

/// The costs file's name in the configuration directories.
pub(crate) const COSTS_FILE: &str = "quota-costs.toml";
/// The regions file's name in the configuration directories.
pub(crate) const REGIONS_FILE: &str = "regions.toml";

/// The `quota-costs.toml` this command reads, and why.
pub(crate) fn costs_file(global: &Global) -> Found {
    resolve(global.costs.as_deref(), "TRENDSYNC_COSTS", COSTS_FILE)
}

/// The `regions.toml` this command reads, and why.
pub(crate) fn regions_file(global: &Global) -> Found {
    resolve(global.regions.as_deref(), "TRENDSYNC_REGIONS", REGIONS_FILE)
}

/// The file a flag or variable names, else the first one the configuration
/// directories hold, else the built-in copy. A file found that hides a different one
/// further down the directories is named in a warning: a process started elsewhere
/// (cron, systemd, another directory) would read the other one.
///
/// The directories are searched once per process and file (which reads the files a
/// shadow is judged by): every later question gets the same answer, so a command
/// names the file it loaded, even if one appears meanwhile, and warns once.
fn resolve(given: Option<&Path>, variable: &str, name: &str) -> Found {
    if let Some(path) = given {
        let from_variable = std::env::var_os(variable).is_some_and(|v| Path::new(&v) == path);
        return Found {
            origin: Origin::Given(path.to_path_buf()),
            source: if from_variable {
                Source::Variable
            } else {
                Source::Flag
            },
            shadows: None,
        };
    }
    static FOUND: std::sync::Mutex<Vec<(String, Found)>> = std::sync::Mutex::new(Vec::new());
    let mut cache = FOUND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, found)) = cache.iter().find(|(n, _)| *n == name) {
        return found.clone();
    }
    let found = ConfigDirs::from_env().find(name);
    if let (Origin::Given(path), Some((other, other_source))) = (&found.origin, &found.shadows) {
        tracing::warn!(
            "{name}: reading {} (found in {}), which hides a different {} (in {}); a process started in another directory or with other variables, as cron and systemd are, may read that one instead. Keep one of them, or name the file with {}",
            shown(path),
            where_found(found.source),
            shown(other),
            where_found(*other_source),
            if name == COSTS_FILE {
                "--costs"
            } else {
                "--regions"
            }
        );
    }
    cache.push((name.to_owned(), found.clone()));
    found
}

/// Where a configuration directory is, in words.
fn where_found(source: Source) -> &'static str {
    match source {
        Source::ConfigDir => "$TRENDSYNC_CONFIG_DIR",
        Source::CurrentDir => "the current directory",
        Source::XdgConfigHome => "$XDG_CONFIG_HOME/trendsync",
        Source::System => config::SYSTEM_DIR,
        Source::Flag | Source::Variable | Source::BuiltIn => "the place it was given",
    }
}

/// A path made absolute for a message, so that it names one file wherever it is read.
pub(crate) fn shown(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

pub(crate) fn load_config(global: &Global) -> Result<Config> {
    let costs = costs_file(global).origin;
    let regions = regions_file(global).origin;
    let config = Config::load(&costs, &regions, CALLED, youtube::SEARCH_LIST)?;
    refuse_api_key_as_budget_key(global, &config.budget, &costs)?;
    Ok(config)
}

pub(crate) fn load_budget(global: &Global) -> Result<Budget> {
    let costs = costs_file(global).origin;
    let budget = config::load_budget(&costs)?;
    refuse_api_key_as_budget_key(global, &budget, &costs)?;
    Ok(budget)
}

/// `budget.key` names Redis keys and database rows, so it must not be the API key itself,
/// whatever the key's shape (docs/budget.md, "How the budget counts"). Compared with the
/// key this process would use, when there is one.
fn refuse_api_key_as_budget_key(global: &Global, budget: &Budget, costs: &Origin) -> Result<()> {
    let Ok(key) = key::api_key(global) else {
        return Ok(());
    };
    if key.is(&budget.key) {
        let file = costs.describe(COSTS_FILE);
        return Err(MissingConfig(format!(
            "{file}: budget.key is the API key in use; it must only name the pool (e.g. \"key1\"), \
             or the key would end up in Redis key names and the database"
        ))
        .into());
    }
    Ok(())
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

/// Opens the budget's limiter. A Redis that cannot be reached is [`Limiter::Down`], not an
/// error: the command's calls then follow `[when_limiter_down]`. A limiter that answers
/// first gets the calls journalled while it was down (docs/budget.md, "When the limiter is
/// down").
pub(crate) async fn open_limiter(
    global: &Global,
    budget: &Budget,
    access: Access,
    clock: &Arc<dyn Clock>,
) -> Result<Limiter> {
    let mut limiter = match &global.redis_url {
        Some(url) => {
            let tls = TlsFiles {
                ca_file: global.redis_ca_file.clone(),
                client_cert: global.redis_client_cert.clone(),
                client_key: global.redis_client_key.clone(),
            };
            match RedisLimiter::connect_with_tls(url, &tls, &budget.key, Arc::clone(clock)).await {
                // A limiter that cannot work however long one waits is a
                // configuration error (78), not an outage.
                Err(e @ LimiterError::Config(_)) => return Err(e.into()),
                opened => Limiter::or_down(
                    opened.map(|l| Limiter::Redis(l.confirmed_at(redis_confirmed_at(&global.db)))),
                )?,
            }
        }
        None => embedded(&global.db, &budget.key, access, clock).map(Limiter::Embedded)?,
    };
    // Counted under this file's costs, whatever file the window was charged under.
    limiter = limiter.with_budget(budget);
    let can_record = match &limiter {
        Limiter::Redis(_) => access != Access::Read,
        // Opened read-only for `budget`; the next charging command replays.
        Limiter::Embedded(_) => access == Access::Charge,
        Limiter::Down { .. } => false,
    };
    if can_record {
        if matches!(limiter, Limiter::Redis(_)) {
            limiter = keep_ledger(&global.db, budget, limiter, access, clock).await;
        }
        replay_journal(&global.db, budget, &limiter, clock).await;
    }
    Ok(limiter)
}

/// When the upstream last confirmed Redis `TIME`, by this database's skew record; a
/// record that cannot be read confirms nothing (entries then go by `TIME` alone).
fn redis_confirmed_at(db: &Path) -> Option<i64> {
    crate::quota::skew::recorded_for(db, crate::quota::skew::LimiterClock::Redis)
        .ok()
        .flatten()
        .map(|s| s.measured_at_us)
}

/// Keeps this host's ledger of Redis grants in the database, restoring it first if Redis
/// lost the window (docs/budget.md, "When Redis loses the window"). Reading the budget
/// opens only a ledger that exists; a command that charges creates one.
async fn keep_ledger(
    db: &Path,
    budget: &Budget,
    limiter: Limiter,
    access: Access,
    clock: &Arc<dyn Clock>,
) -> Limiter {
    let journal = match access {
        Access::Charge => Journal::open(db, Arc::clone(clock)).map(Some),
        Access::Read | Access::ReadReplayed => Journal::open_if_any(db, Arc::clone(clock)),
    };
    match journal {
        Ok(Some(journal)) => limiter.keep_ledger(Arc::new(journal), &budget.key).await,
        Ok(None) => limiter,
        Err(e) => {
            tracing::warn!(
                "{}; going on without a ledger: should Redis lose the window, this host cannot restore its share",
                chain(&e)
            );
            limiter
        }
    }
}

/// Replays the journal into `limiter`. A replay that fails leaves what it did not
/// replay for the next command, and never stops this one.
async fn replay_journal(db: &Path, budget: &Budget, limiter: &Limiter, clock: &Arc<dyn Clock>) {
    let journal = match Journal::open_if_pending(db, Arc::clone(clock)) {
        Ok(Some(journal)) => journal,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(
                "{}; the calls journalled while the limiter was down stay for next time",
                chain(&e)
            );
            return;
        }
    };
    let done = match journal.replay(&budget.key, limiter).await {
        Ok(done) => done,
        Err(e) => {
            tracing::warn!(
                "{}; the calls not yet replayed stay for next time",
                chain(&e)
            );
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
            "replaying the journal in {} stopped: {}; {} call{} stay for next time",
            db.display(),
            chain(e),
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

/// A read-only command treats a missing database as empty; a missing directory,
/// though, is a typo in `--db`, and an empty answer (a whole budget left, no videos)
/// would hide it.
pub(crate) fn refuse_missing_directory(db: &Path) -> Result<()> {
    let dir = crate::sqlite::directory_of(db);
    if !db.exists() && !dir.is_dir() {
        return Err(MissingConfig(format!(
            "--db {}: the directory {} does not exist; check the path (TRENDSYNC_DB)",
            db.display(),
            dir.display()
        ))
        .into());
    }
    Ok(())
}

fn embedded(
    db: &Path,
    key: &str,
    access: Access,
    clock: &Arc<dyn Clock>,
) -> Result<EmbeddedLimiter> {
    if access != Access::Charge {
        refuse_missing_directory(db)?;
    }
    let limiter = match access {
        Access::Read | Access::ReadReplayed => {
            EmbeddedLimiter::open_read_only(db, key, Arc::clone(clock))
        }
        Access::Charge => EmbeddedLimiter::open(db, key, Arc::clone(clock)),
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

/// The regions a read command was asked for, checked: each must be in regions.toml
/// or in the database (a region fetched once and since removed from the file still
/// reads). An unknown one is a usage error naming the nearest known code, rather than
/// an empty answer that looks like "no data".
pub(crate) fn check_read_regions(
    global: &Global,
    asked: &[String],
    in_store: impl FnOnce() -> Vec<String>,
) -> Result<()> {
    if asked.is_empty() {
        return Ok(());
    }
    let in_store = in_store();
    let configured: Vec<String> = load_config(global)
        .map(|c| c.regions.regions.iter().map(|r| r.code.clone()).collect())
        .unwrap_or_default();
    let mut known: Vec<&str> = configured
        .iter()
        .chain(&in_store)
        .map(String::as_str)
        .collect();
    known.sort_unstable();
    known.dedup();
    for code in asked {
        let upper = code.trim().to_ascii_uppercase();
        if known.contains(&upper.as_str()) {
            continue;
        }
        let hint = config::nearest_region(code, &known)
            .map_or(String::new(), |near| format!("did you mean {near}? "));
        return Err(UsageError(format!(
            "--region {code} is neither in regions.toml nor in the database; {hint}known: {}",
            known.join(", ")
        ))
        .into());
    }
    Ok(())
}

/// The regions the database at `db` knows, for [`check_read_regions`]; none when it
/// cannot say (the command's own open reports why).
pub(crate) fn stored_regions(db: &Path) -> Vec<String> {
    crate::store::Store::open_read_only(db)
        .ok()
        .flatten()
        .and_then(|s| s.regions().ok())
        .unwrap_or_default()
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
            let hint = config::nearest_region(code, &known)
                .map_or(String::new(), |near| format!("did you mean {near}? "));
            UsageError(format!(
                "--region {code} is not in regions.toml; {hint}configured: {}",
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
