//! `trendsync run` and `trendsync backfill`: choosing the job (which regions, with
//! which allowance), then either the real run (set up, execute, summarise, exit) or its
//! `--dry-run` (in `dry_run`). Signals during a run are in `cmd/signals.rs`, which `export` and `prune` share.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Access, Ctx, key, load_config, open_limiter, select_regions};
use crate::cli::{BackfillArgs, Command, RunArgs};
use crate::config::{Config, Follow, Region};
use crate::error::{ExitCode, MissingConfig, SilentExit, UsageError, after_output, report};
use crate::output::human;
use crate::output::json::print_json;
use crate::quota::Allowance;
use crate::reports::metrics;
use crate::reports::sink::{self, Sink, SinkUrl};
use crate::runner::{self, Freshness, Jitter, Run, RunDeps, RunSettings, lock};
use crate::store::{RunKind, Store, StoreError};
use crate::youtube::Client;

mod dry_run;

use super::signals::Signals;

/// What a run or backfill was asked to do.
struct Job<'a> {
    kind: RunKind,
    allowance: Allowance,
    regions: Vec<&'a Region>,
    dry_run: bool,
    json: bool,
    concurrency: u16,
    /// `--switch-limiter`: charge this limiter although the latest run charged the
    /// other kind.
    switch_limiter: bool,
    /// `--host-name`, when given; else the system's.
    host_name: Option<&'a str>,
    /// `--sink`: where the run ships its finished slots.
    sink: Option<SinkUrl>,
}

/// `--sink` read, or a usage error (2) that names the forms and shows the URL masked.
fn sink_url(raw: Option<&str>) -> Result<Option<SinkUrl>> {
    raw.map(|raw| {
        SinkUrl::parse(raw).map_err(|e| {
            anyhow::Error::new(UsageError(format!(
                "--sink {}: {e}",
                crate::mask::mask_url(raw)
            )))
        })
    })
    .transpose()
}

/// A call that takes longer than this is treated as a timeout (and retried).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn run(ctx: &Ctx<'_>, args: &RunArgs) -> Result<()> {
    let config = load_config(ctx)?;
    let regions = select_regions(&config, &args.fetch.regions)?;
    let job = Job {
        kind: RunKind::Run,
        allowance: Allowance::Ceiling,
        regions,
        dry_run: args.fetch.dry_run,
        json: args.fetch.json,
        concurrency: args.fetch.concurrency,
        switch_limiter: args.fetch.switch_limiter,
        host_name: args.fetch.host_name.as_deref(),
        sink: sink_url(args.fetch.sink.as_deref())?,
    };
    execute(ctx, &config, job).await
}

pub async fn backfill(ctx: &Ctx<'_>, args: &BackfillArgs) -> Result<()> {
    let config = load_config(ctx)?;
    let regions = select_regions(&config, &args.fetch.regions)?;
    let fresh = freshness(ctx)?;
    let stale_after = i64::try_from(args.stale_after.as_secs()).unwrap_or(i64::MAX);
    let now = ctx.clock.now().to_secs().as_i64();
    let asked: Vec<&str> = regions.iter().map(|r| r.code.as_str()).collect();
    let asked = asked.join(", ");
    let stale: Vec<&Region> = regions
        .into_iter()
        .filter(|r| {
            let last = fresh.get(&r.code).and_then(|f| f.last_complete_at);
            super::shared::is_stale(now, last, stale_after)
        })
        .collect();
    if stale.is_empty() {
        tracing::info!(
            "backfill: every selected region ({asked}) was fetched completely within the last {}",
            human::duration(args.stale_after)
        );
    }
    let job = Job {
        kind: RunKind::Backfill,
        allowance: Allowance::Quota,
        regions: stale,
        dry_run: args.fetch.dry_run,
        json: args.fetch.json,
        concurrency: args.fetch.concurrency,
        switch_limiter: args.fetch.switch_limiter,
        host_name: args.fetch.host_name.as_deref(),
        sink: sink_url(args.fetch.sink.as_deref())?,
    };
    execute(ctx, &config, job).await
}

/// The name this host's runs carry in the fleet's slot records: `--host-name`, else
/// the system's host name, which must pass the same check (a usage error otherwise,
/// saying to name the host).
fn host_name(given: Option<&str>) -> Result<String> {
    if let Some(name) = given {
        return Ok(name.to_owned());
    }
    let system = system_host_name().map_err(|e| {
        UsageError(format!(
            "reading this system's host name: {e}; name the host with --host-name or TRENDSYNC_HOST_NAME"
        ))
    })?;
    crate::cli::parse_host_name(&system).map_err(|e| {
        UsageError(format!(
            "this system's host name cannot name it in the slot records: {e}; name the host with --host-name or TRENDSYNC_HOST_NAME"
        ))
        .into()
    })
}

/// The system's host name, from `gethostname(2)`.
fn system_host_name() -> std::io::Result<String> {
    // 256 bytes: more than any host name Linux allows (64) or POSIX promises (255).
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length, which is what is passed.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..len].to_vec()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the host name is not UTF-8",
        )
    })
}

/// What the store knows of each region, read without writing; nothing yet when the
/// database does not exist.
fn freshness(ctx: &Ctx<'_>) -> Result<BTreeMap<String, Freshness>> {
    let global = ctx.global;
    let store = match ctx.read_store() {
        Ok(Some(store)) => store,
        Ok(None) => return Ok(BTreeMap::new()),
        // The plan is still right without it; only the order of regions may differ.
        Err(e @ StoreError::OlderSchema { .. }) => {
            tracing::warn!("{e}; planning the regions in their configured order");
            return Ok(BTreeMap::new());
        }
        Err(e) => return Err(e).with_context(|| format!("reading {}", global.db.display())),
    };
    runner::read_freshness(&store)
        .with_context(|| format!("reading the regions' state from {}", global.db.display()))
}

/// How many videos are due for a follow-up at `now_s`, read without writing; none when
/// the database does not exist or predates follow-ups.
fn due_for_follow_up(ctx: &Ctx<'_>, follow: Follow, now_s: i64) -> Result<usize> {
    let global = ctx.global;
    let store = match ctx.read_store() {
        Ok(Some(store)) => store,
        Ok(None) | Err(StoreError::OlderSchema { .. }) => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", global.db.display())),
    };
    let every = i64::try_from(follow.every.as_secs()).unwrap_or(i64::MAX);
    let due = store
        .due_for_follow_up(
            now_s - i64::from(follow.days) * 86_400,
            now_s.saturating_sub(every),
        )
        .with_context(|| format!("reading the follow-ups due in {}", global.db.display()))?;
    Ok(due.len())
}

async fn execute(ctx: &Ctx<'_>, config: &Config, job: Job<'_>) -> Result<()> {
    // Something other than a file at --metrics-file is a mistake in the crontab (78),
    // refused before any call; once the run is under way, a file that cannot be
    // written is only logged.
    if let Some(path) = &ctx.global.metrics_file {
        check_metrics_path(ctx, path)?;
    }
    if job.dry_run {
        dry_run::run(ctx, config, &job).await
    } else {
        fetch(ctx, config, job).await
    }
}

/// Refuses (78) a `--metrics-file` no run could write: its directory missing, the
/// database or one of its companions, anything but a regular file.
fn check_metrics_path(ctx: &Ctx<'_>, path: &Path) -> Result<()> {
    refuse_missing_directory(path)?;
    ctx.files().refuse_write(path, "--metrics-file")?;
    crate::atomic::check(path).context("--metrics-file")?;
    Ok(())
}

/// After a `run` or `backfill` that failed: one refused by its configuration (78)
/// still writes `--metrics-file`, with the status `config_error`, so that a bad edit
/// alerts within one run rather than hours later as stale (docs/metrics.md). Not when
/// the refusal is about the metrics path itself (there is nowhere to write), nor
/// after `--dry-run`, which writes no metrics. The database is only read, and only
/// when the command opened it as trendsync's: a file that is not is left alone.
pub(super) fn after_refusal(ctx: &Ctx<'_>, command: &Command, err: &anyhow::Error) {
    let kind = match command {
        Command::Run(args) if !args.fetch.dry_run => RunKind::Run,
        Command::Backfill(args) if !args.fetch.dry_run => RunKind::Backfill,
        _ => return,
    };
    let Some(path) = &ctx.global.metrics_file else {
        return;
    };
    if super::exit_code_for(err) != ExitCode::Config {
        return;
    }
    if let Err(e) = check_metrics_path(ctx, path) {
        tracing::debug!("the metrics file is not written: {}", report(&e));
        return;
    }
    let budget = super::load_budget(ctx).ok();
    let configured = ctx
        .config
        .regions()
        .ok()
        .and_then(|found| crate::config::load_regions(&found.origin).ok())
        .map(|regions| regions.regions.into_iter().map(|r| r.code).collect());
    let db = match (ctx.db(), &ctx.found) {
        (Some(db), _) => metrics::Database::Read(db),
        (None, Some(super::database::Found::Nothing)) => metrics::Database::NoFile,
        (None, _) => metrics::Database::Unknown,
    };
    let refusal = metrics::Refusal {
        refused: metrics::Refused {
            kind,
            at: ctx.clock.now().to_secs().as_i64(),
        },
        db,
        budget: budget.as_ref(),
        configured,
        protected: ctx.files(),
    };
    if let Err(e) = metrics::write_after_refusal(path, refusal) {
        tracing::error!("{}", crate::error::chain(&e));
    }
}

/// The run would find out only once it has spent its calls, in one ERROR line and
/// with exit 0, that --metrics-file cannot be created.
fn refuse_missing_directory(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => return Ok(()),
    };
    let found = if dir.is_dir() {
        return Ok(());
    } else if dir.exists() {
        format!("{} is not a directory", dir.display())
    } else {
        format!("the directory {} does not exist", dir.display())
    };
    Err(MissingConfig(format!(
        "--metrics-file {}: {found}; create it, or check --metrics-file \
         (TRENDSYNC_METRICS_FILE)",
        path.display(),
    ))
    .into())
}

/// The real run: every call charged before it is made.
async fn fetch(ctx: &Ctx<'_>, config: &Config, job: Job<'_>) -> Result<()> {
    let (global, clock) = (ctx.global, &ctx.clock);
    // Before anything else, so that a signal during the setup stops the run cleanly
    // too instead of killing the process.
    let signals = Signals::listen()?;
    let host = host_name(job.host_name)?;
    let key = key::for_calls(global)?;
    // Before anything is charged, the journal's replay included.
    super::identity::refuse_other_kind(
        ctx,
        &config.budget.key,
        job.switch_limiter,
        &format!("this {}", job.kind.as_str()),
    )?;
    // The region locks are taken once the run is under way, after the journal's
    // replay; a lock file that is a link to the database is refused now, before any
    // charge.
    lock::refuse_linked(ctx.files())?;
    // Held for the whole run: a `prune --vacuum` under way is waited for here, before
    // anything is recorded or charged.
    let _writing =
        super::maintenance::for_writing(ctx.files(), super::maintenance::WRITER_PATIENCE)?;
    // The error names the base itself, masked and without the key.
    let client = Client::new(&global.api_base, key, REQUEST_TIMEOUT)
        .context("setting up the upstream client (--api-base, the API key)")?;
    let db = ctx.writable_db()?;
    {
        // Let go before the limiter is opened: its work runs on other threads, which
        // take the connection in turn.
        let store = Store::on(db)
            .with_context(|| format!("opening the database {}", global.db.display()))?;
        lock::mark_abandoned(&store, &global.db);
    }
    // The one clock the limiter, its ledger and journal, and the run decide by.
    let limiter = open_limiter(ctx, &config.budget, Access::Charge).await?;
    let run_id = crate::runner::run_id::new_run_id(clock.as_ref());
    // Held until the run's outcome is recorded: while it is, nobody takes the run
    // for one a killed process left behind.
    let run_lock = lock::lock_run(ctx.files(), &run_id)
        .with_context(|| format!("locking {}", lock::lock_path(&global.db).display()))?;
    let settings = RunSettings {
        run_id,
        kind: job.kind,
        budget: config.budget.clone(),
        allowance: job.allowance,
        concurrency: usize::from(job.concurrency),
        follow: config.regions.follow,
        limiter: Some(super::identity::run_record(global, &config.budget)),
        host,
        lease: config.regions.lease,
        slot_poll: runner::slot_poll(config.regions.lease),
        sink: job.sink.is_some(),
    };
    let deps = RunDeps {
        limiter,
        upstream: Arc::new(client),
        store: Store::resume(db),
        db: db.clone(),
        clock: Arc::clone(clock),
        jitter: Jitter::Random,
        // The limiter's own, when it keeps the fleet's slots.
        gate: None,
    };
    let run = Arc::new(Run::new(settings, deps));
    let watch = signals.watch(Arc::clone(&run));
    let regions: Vec<Region> = job.regions.iter().map(|r| (*r).clone()).collect();
    let report = runner::execute(Arc::clone(&run), regions).await;
    drop(run_lock);
    report.log_summary(job.kind.as_str(), job.allowance);
    if let Some(url) = &job.sink {
        ship_to_sink(db, url, clock.as_ref(), &report.run_id).await;
    }
    // The run's outcome decides the exit code, not its metrics: a file that cannot be
    // written is logged, and the last-run timestamp going stale is what alerts.
    let configured: Vec<&str> = config
        .regions
        .regions
        .iter()
        .map(|r| r.code.as_str())
        .collect();
    if let Some(path) = &global.metrics_file
        && let Err(e) = metrics::write_after_run(path, db, &config.budget, &configured, &report)
    {
        tracing::error!(run_id = %report.run_id, "{}", crate::error::chain(&e));
    }
    let printed = if job.json {
        print_json(&report)
    } else {
        Ok(())
    };
    let outcome = match watch.finish(report.status) {
        None => Ok(()),
        Some(code) => Err(SilentExit(code).into()),
    };
    after_output(printed, outcome)
}

/// Ships what the outbox holds to the sink at `url`, after the run's report and before
/// its metrics (which count what is left). A sink that fails is one log line naming it
/// and the error: the rows are safe in the database, the slots stay queued for the next
/// run, and the exit code is the run's.
async fn ship_to_sink(
    db: &crate::sqlite::Db,
    url: &SinkUrl,
    clock: &dyn crate::clock::Clock,
    run_id: &str,
) {
    // Nothing queued, nothing to set up: a sink that is down says so only when a
    // slot waits for it.
    if matches!(crate::store::Store::resume(db).sink_backlog(), Ok(b) if b.slots == 0) {
        return;
    }
    let shipped = match Sink::open(url) {
        Ok(to) => sink::ship(db, &to, clock).await,
        Err(e) => Err(e),
    };
    match shipped {
        Ok(done) if done.slots > 0 => tracing::info!(
            run_id,
            "shipped {} slot{} to the sink {} ({} object{} written, {} already there)",
            done.slots,
            if done.slots == 1 { "" } else { "s" },
            url.shown(),
            done.written,
            if done.written == 1 { "" } else { "s" },
            done.already,
        ),
        Ok(_) => {}
        Err(e) => tracing::error!(
            run_id,
            "the sink {} failed; its slots stay queued in the database for the next run: {}",
            url.shown(),
            crate::error::chain(&e)
        ),
    }
}
