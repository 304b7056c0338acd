//! One file per command, each with one entry point; this module dispatches and holds
//! what several commands share: loading the configuration and opening the limiter.

mod budget;
mod completions;
mod configuration;
mod crontab;
mod database;
mod exit;
mod export;
mod figures;
mod identity;
mod key;
mod maintenance;
mod man;
mod prune;
mod run;
mod runs;
mod search;
mod shared;
mod signals;
mod status;
mod video;

pub use exit::exit_code_for;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};

use crate::cli::{Cli, Command, DbUse, Global};
use crate::clock::Clock;
use crate::config::{self, Config, Origin};
use crate::db_files::DbFiles;
use crate::error::{MissingConfig, UsageError, chain, is_broken_pipe, is_silent};
use crate::quota::{
    Budget, EmbeddedLimiter, Journal, Limiter, LimiterError, RedisLimiter, Status, TlsFiles,
};
use crate::sqlite::Db;
use crate::youtube;

/// What a command works with, built once by [`run`] and passed down: nothing below
/// re-reads the flags to rebuild it.
pub(crate) struct Ctx<'a> {
    pub global: &'a Global,
    /// The configuration files, each looked up once, when first needed.
    pub config: config::Lookup,
    /// The one real clock of this command: everything below that decides by time, or
    /// stamps what it writes, is handed this one.
    pub clock: Arc<dyn Clock>,
    /// The command's one connection to `--db`; none when the command uses no database,
    /// or found no file (until a writer creates it).
    db: OnceLock<Db>,
    /// What `--db` held when it was opened.
    found: Option<database::Found>,
    /// The identity of `--db` and its companions, taken when it was opened (before,
    /// for a file a writer has yet to create): what no path the command writes may be.
    files: OnceLock<DbFiles>,
}

impl Ctx<'_> {
    /// The identity of `--db` and its companions.
    pub fn files(&self) -> &DbFiles {
        match self.db() {
            Some(db) => db.files(),
            // Known from the open when there is one; looked up only when there is not.
            None => self.files.get_or_init(|| DbFiles::of(&self.global.db)),
        }
    }

    /// The command's connection, if there is a file.
    pub fn db(&self) -> Option<&Db> {
        self.db.get()
    }

    /// The store on the command's connection, only to read: none when there is no
    /// file, or one that holds none of the store's tables yet.
    pub fn read_store(&self) -> Result<Option<crate::store::Store>, crate::store::StoreError> {
        self.db()
            .map(crate::store::Store::read_on)
            .transpose()
            .map(Option::flatten)
    }

    /// The command's connection to write, creating the file when there was none: for
    /// a command that writes, once its input has been checked.
    pub fn writable_db(&self) -> Result<&Db> {
        if let Some(db) = self.db.get() {
            return Ok(db);
        }
        let opened = database::open(&self.global.db, true, true)?;
        if let Some(db) = opened.db {
            self.db.get_or_init(|| db);
        }
        self.db.get().ok_or_else(|| {
            MissingConfig(format!(
                "--db {}: no database could be opened to write",
                self.global.db.display()
            ))
            .into()
        })
    }

    /// The command's connection to an existing trendsync database, or the refusal (78)
    /// that says what `--db` holds instead and what to do.
    pub fn require_db(&self) -> Result<&Db> {
        let mut found = self.found.as_ref().unwrap_or(&database::Found::Nothing);
        // A file marked trendsync's may hold no tables yet: a first run killed while
        // it created them.
        if matches!(found, database::Found::Ours)
            && let Some(db) = self.db()
            && matches!(
                crate::schema::contents(&db.lock()),
                Ok(crate::schema::Contents::Empty)
            )
        {
            found = &database::Found::NoTables;
        }
        database::require(&self.global.db, found)?;
        self.db.get().ok_or_else(|| {
            MissingConfig(format!(
                "--db {}: no database was opened for this command",
                self.global.db.display()
            ))
            .into()
        })
    }
}

pub async fn run(cli: Cli) -> Result<()> {
    crate::logging::init(cli.global.log_format, cli.global.verbose, cli.global.quiet);
    let global = &cli.global;
    let shadowing = if cli.command.warns_shadow() {
        config::Shadowing::Warn
    } else {
        config::Shadowing::Quiet
    };
    let result = match open_context(global, cli.command.db_use(), shadowing) {
        Err(e) => {
            // Refused before `--db` was opened: said without it.
            if let Ok(ctx) = open_context(global, DbUse::None, shadowing) {
                run::after_refusal(&ctx, &cli.command, &e);
            }
            Err(e)
        }
        Ok(ctx) => {
            let result = dispatch(&ctx, &cli.command).await;
            if let Err(e) = &result {
                run::after_refusal(&ctx, &cli.command, e);
            }
            result
        }
    };
    if let Err(err) = &result
        && cli.command.wants_json()
        && !is_silent(err)
        && !is_broken_pipe(err)
    {
        print_failure_json(err);
    }
    result
}

/// Builds the command's context: its clock, and `--db` opened once as it needs it. A
/// file the command must not touch is refused before anything opens it for good, so
/// that it is left byte for byte as it was.
fn open_context(global: &Global, db_use: DbUse, shadowing: config::Shadowing) -> Result<Ctx<'_>> {
    let mut ctx = Ctx {
        global,
        config: config::Lookup::new(
            global.costs.as_deref(),
            global.regions.as_deref(),
            shadowing,
        ),
        clock: crate::clock::system(),
        db: OnceLock::new(),
        found: None,
        files: OnceLock::new(),
    };
    if db_use == DbUse::None {
        return Ok(ctx);
    }
    refuse_hard_linked(&global.db)?;
    // A writer would otherwise fail in SQLite's words ("unable to open database file",
    // exit 1) at the path's missing directory, and a reader answer as if from an empty
    // database: once here, for every command that uses --db.
    refuse_missing_directory(&global.db)?;
    let writes = matches!(db_use, DbUse::Write | DbUse::Change);
    if writes && matches!(global.db.try_exists(), Ok(false)) {
        // Said before the command's work, though the file is created later.
        database::refuse_unwritable(&global.db)?;
    }
    // A writer creates a missing file only once it has something to write
    // ([`Ctx::writable_db`]): a command refused for its input leaves nothing behind.
    let opened = database::open(&global.db, writes, false)?;
    if let Some(db) = opened.db {
        ctx.db.get_or_init(|| db);
    }
    ctx.found = Some(opened.found);
    Ok(ctx)
}

async fn dispatch(ctx: &Ctx<'_>, command: &Command) -> Result<()> {
    let clock = &ctx.clock;
    match command {
        Command::Run(args) => run::run(ctx, args).await,
        Command::Backfill(args) => run::backfill(ctx, args).await,
        Command::Budget(args) => budget::run(ctx, args).await,
        Command::Completions { shell } => completions::run(*shell),
        Command::Man { command } => man::run(command),
        Command::Search(args) => search::run(ctx, args),
        Command::Video(args) => video::run(ctx, args),
        Command::Crontab(args) => crontab::run(ctx, args),
        Command::Config(args) => configuration::run(ctx, args),
        Command::Status(args) => status::run(ctx, args).await,
        Command::Runs(args) => runs::run(ctx, args),
        Command::Prune(args) => prune::run(ctx, args, clock.as_ref()),
        Command::Export(args) => export::run(ctx, args),
    }
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

pub(crate) use crate::config::{COSTS_FILE, REGIONS_FILE, shown};

pub(crate) fn load_config(ctx: &Ctx<'_>) -> Result<Config> {
    let costs = &ctx.config.costs()?.origin;
    let regions = &ctx.config.regions()?.origin;
    let config = Config::load(costs, regions, CALLED, youtube::SEARCH_LIST)?;
    refuse_api_key_as_budget_key(ctx.global, &config.budget, costs)?;
    Ok(config)
}

pub(crate) fn load_budget(ctx: &Ctx<'_>) -> Result<Budget> {
    let costs = &ctx.config.costs()?.origin;
    let budget = config::load_budget(costs)?;
    refuse_api_key_as_budget_key(ctx.global, &budget, costs)?;
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
    ctx: &Ctx<'_>,
    budget: &Budget,
    access: Access,
) -> Result<Limiter> {
    let (global, clock, db) = (ctx.global, &ctx.clock, ctx.db());
    // Counted under this file's costs, whatever file the window was charged under.
    let counted = Arc::new(budget.clone());
    let mut limiter = match &global.redis_url {
        Some(url) => {
            let tls = TlsFiles {
                ca_file: global.redis_ca_file.clone(),
                client_cert: global.redis_client_cert.clone(),
                client_key: global.redis_client_key.clone(),
            };
            let (key, clock) = (&budget.key, Arc::clone(clock));
            match RedisLimiter::connect_with_tls(url, &tls, key, clock, Some(counted)).await {
                // A limiter that cannot work however long one waits is a
                // configuration error (78), not an outage.
                Err(e @ LimiterError::Config(_)) => return Err(e.into()),
                opened => Limiter::or_down(
                    opened.map(|l| Limiter::Redis(l.confirmed_at(redis_confirmed_at(db)))),
                )?,
            }
        }
        None => embedded(ctx, counted, access).map(Limiter::Embedded)?,
    };
    let can_record = match &limiter {
        Limiter::Redis(_) => access != Access::Read,
        // Opened read-only for `budget`; the next charging command replays.
        Limiter::Embedded(_) => access == Access::Charge,
        Limiter::Down { .. } => false,
    };
    let db = match access {
        Access::Charge if can_record => Some(ctx.writable_db()?),
        _ => db,
    };
    if can_record && let Some(db) = db {
        if matches!(limiter, Limiter::Redis(_)) {
            limiter = keep_ledger(db, budget, limiter, access, clock).await;
        }
        replay_journal(db, budget, &limiter, clock).await;
    }
    Ok(limiter)
}

/// When the upstream last confirmed Redis `TIME`, by this database's skew record; a
/// record that cannot be read confirms nothing (entries then go by `TIME` alone).
fn redis_confirmed_at(db: Option<&Db>) -> Option<i64> {
    crate::quota::skew::recorded_for(db, crate::quota::skew::LimiterClock::Redis)
        .ok()
        .flatten()
        .map(|s| s.measured_at_us)
}

/// Keeps this host's ledger of Redis grants in the database, restoring it first if Redis
/// lost the window (docs/budget.md, "When Redis loses the window"). Reading the budget
/// opens only a ledger that exists; a command that charges creates one.
async fn keep_ledger(
    db: &Db,
    budget: &Budget,
    limiter: Limiter,
    access: Access,
    clock: &Arc<dyn Clock>,
) -> Limiter {
    let journal = match access {
        Access::Charge => Journal::with(db, Arc::clone(clock)).map(Some),
        Access::Read | Access::ReadReplayed => Journal::any_on(Some(db), Arc::clone(clock)),
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
async fn replay_journal(db: &Db, budget: &Budget, limiter: &Limiter, clock: &Arc<dyn Clock>) {
    let journal = match Journal::pending_on(Some(db), Arc::clone(clock)) {
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
            db.path().display(),
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
            db.path().display(),
            if done.unreadable == 1 { "was" } else { "were" }
        );
    }
}

/// A read-only command treats a missing database as empty; a missing directory,
/// though, is a typo in `--db`, and an empty answer (a whole budget left, no videos)
/// would hide it. A `--db` that is a symbolic link names the directory of the file it
/// points to, where SQLite would create the database.
fn refuse_missing_directory(db: &Path) -> Result<()> {
    if db.exists() {
        return Ok(());
    }
    let linked = std::fs::symlink_metadata(db).is_ok_and(|m| m.file_type().is_symlink());
    if !linked {
        let dir = crate::sqlite::directory_of(db);
        if !dir.is_dir() {
            return Err(MissingConfig(format!(
                "--db {}: the directory {} does not exist; check the path (TRENDSYNC_DB)",
                db.display(),
                dir.display()
            ))
            .into());
        }
        return Ok(());
    }
    let files = DbFiles::of(db);
    let dir = files.directory();
    if !dir.is_dir() {
        return Err(MissingConfig(format!(
            "--db {}: the directory {} does not exist (--db is a symbolic link to {}); \
             check the link, or the path (TRENDSYNC_DB)",
            db.display(),
            dir.display(),
            files.canonical().display()
        ))
        .into());
    }
    Ok(())
}

fn embedded(ctx: &Ctx<'_>, budget: Arc<Budget>, access: Access) -> Result<EmbeddedLimiter> {
    let (path, clock) = (ctx.global.db.as_path(), Arc::clone(&ctx.clock));
    let key = &budget.key;
    let limiter = match (access, ctx.db()) {
        (Access::Read | Access::ReadReplayed, db) => {
            EmbeddedLimiter::reading_on(db, path, key, clock, Some(Arc::clone(&budget)))
        }
        (Access::Charge, _) => {
            EmbeddedLimiter::charging(ctx.writable_db()?, key, clock, Some(Arc::clone(&budget)))
        }
    };
    limiter.with_context(|| format!("opening the embedded limiter in {}", path.display()))
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
    ctx: &Ctx<'_>,
    asked: &[String],
    in_store: impl FnOnce() -> Vec<String>,
) -> Result<()> {
    if asked.is_empty() {
        return Ok(());
    }
    let in_store = in_store();
    let configured: Vec<String> = load_config(ctx)
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
        return Err(unknown_region(
            code,
            "is neither in regions.toml nor in the database",
            "known",
            &known,
        )
        .into());
    }
    Ok(())
}

/// The regions the database knows, for [`check_read_regions`]; none when it cannot
/// say (the command's own reading reports why).
pub(crate) fn stored_regions(db: Option<&Db>) -> Vec<String> {
    db.and_then(|db| crate::store::Store::read_on(db).ok().flatten())
        .and_then(|s| s.regions().ok())
        .unwrap_or_default()
}

/// A `--region` that names no region this command knows (2): what it is not, the
/// nearest code `known` holds, and all of them (`listed` says which they are).
fn unknown_region(code: &str, is_not: &str, listed: &str, known: &[&str]) -> UsageError {
    let hint = config::nearest_region(code, known)
        .map_or(String::new(), |near| format!("did you mean {near}? "));
    UsageError(format!(
        "--region {code} {is_not}; {hint}{listed}: {}",
        known.join(", ")
    ))
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
            unknown_region(code, "is not in regions.toml", "configured", &known)
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
