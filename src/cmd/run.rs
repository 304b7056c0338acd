//! `trendsync run` and `trendsync backfill`: choosing the regions, then either the
//! real run (key, client, store, limiter, signals, summary, metrics) or its
//! `--dry-run` (in `dry_run`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Access, load_config, open_limiter, select_regions};
use crate::cli::{BackfillArgs, Global, RunArgs};
use crate::config::{Config, Region};
use crate::error::{ExitCode, MissingConfig, SilentExit, after_output};
use crate::metrics::{self, BudgetNumbers, Picture};
use crate::quota::{Allowance, Budget, Limiter};
use crate::report::{human, print_json, rfc3339};
use crate::runner::{self, Freshness, Run, RunDeps, RunSettings, Status, lock};
use crate::store::{RunKind, Store, StoreError};
use crate::youtube::{self, ApiKey, Client};

mod dry_run;

/// What a run or backfill was asked to do.
struct Job<'a> {
    kind: &'static str,
    allowance: Allowance,
    regions: Vec<&'a Region>,
    dry_run: bool,
    json: bool,
    concurrency: u16,
}

/// A call that takes longer than this is treated as a timeout (and retried).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn run(global: &Global, args: &RunArgs) -> Result<()> {
    let config = load_config(global)?;
    let regions = select_regions(&config, &args.fetch.regions)?;
    let job = Job {
        kind: "run",
        allowance: Allowance::Ceiling,
        regions,
        dry_run: args.fetch.dry_run,
        json: args.fetch.json,
        concurrency: args.fetch.concurrency,
    };
    execute(global, &config, job).await
}

pub async fn backfill(global: &Global, args: &BackfillArgs) -> Result<()> {
    let config = load_config(global)?;
    let regions = select_regions(&config, &args.fetch.regions)?;
    let fresh = freshness(global)?;
    let stale_after = i64::try_from(args.stale_after.as_secs()).unwrap_or(i64::MAX);
    let now = now_s();
    let asked: Vec<&str> = regions.iter().map(|r| r.code.as_str()).collect();
    let asked = asked.join(", ");
    let stale: Vec<&Region> = regions
        .into_iter()
        .filter(|r| {
            fresh
                .get(&r.code)
                .and_then(|f| f.last_complete_at)
                .is_none_or(|at| now - at > stale_after)
        })
        .collect();
    if stale.is_empty() {
        tracing::info!(
            "backfill: every selected region ({asked}) was fetched completely within the last {}",
            human(args.stale_after)
        );
    }
    let job = Job {
        kind: "backfill",
        allowance: Allowance::Quota,
        regions: stale,
        dry_run: args.fetch.dry_run,
        json: args.fetch.json,
        concurrency: args.fetch.concurrency,
    };
    execute(global, &config, job).await
}

use crate::clock::now_s;

/// What the store knows of each region, read without writing; nothing yet when the
/// database does not exist.
fn freshness(global: &Global) -> Result<BTreeMap<String, Freshness>> {
    let store = match Store::open_read_only(&global.db) {
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

/// The API key from `--api-key-file` or `YOUTUBE_API_KEY`; never printed.
pub(super) fn api_key(global: &Global) -> Result<ApiKey> {
    if let Some(path) = &global.api_key_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            MissingConfig(format!(
                "cannot read the API key file {}: {e}; it must hold only the key",
                path.display()
            ))
        })?;
        if text.trim().is_empty() {
            return Err(
                MissingConfig(format!("the API key file {} is empty", path.display())).into(),
            );
        }
        return checked_key(text, &format!("the API key file {}", path.display()));
    }
    match std::env::var("YOUTUBE_API_KEY") {
        Ok(key) if !key.trim().is_empty() => checked_key(key, "YOUTUBE_API_KEY"),
        _ => Err(MissingConfig(
            "no API key: set YOUTUBE_API_KEY, or pass --api-key-file PATH (a file holding only the key); \
             --dry-run needs none"
                .to_owned(),
        )
        .into()),
    }
}

/// A key is one line of printable ASCII. A second line or a stray character is most
/// likely a file that holds something else too; the message says what, never the key.
fn checked_key(text: String, source: &str) -> Result<ApiKey> {
    let key = text.trim();
    if key.lines().nth(1).is_some() {
        return Err(MissingConfig(format!(
            "{source} holds more than one line; it must hold only the key, on one line"
        ))
        .into());
    }
    if !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(MissingConfig(format!(
            "{source} holds characters no API key has (spaces, control characters or non-ASCII); \
             it must hold only the key"
        ))
        .into());
    }
    Ok(ApiKey::new(text))
}

/// A key file others can read is a key others can spend.
fn warn_if_shared(path: &std::path::Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                "the API key file {} can be read by other users (mode {:o}); chmod 600 it",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
    }
}

async fn execute(global: &Global, config: &Config, job: Job<'_>) -> Result<()> {
    if job.dry_run {
        dry_run::run(global, config, &job).await
    } else {
        fetch(global, config, job).await
    }
}

/// The real run: every call charged before it is made.
async fn fetch(global: &Global, config: &Config, job: Job<'_>) -> Result<()> {
    // Before anything else, so that a signal during the setup stops the run cleanly
    // too instead of killing the process.
    let signals = Signals::listen()?;
    let key = api_key(global)?;
    if let Some(path) = &global.api_key_file {
        warn_if_shared(path);
    }
    // The error names the base itself, masked and without the key.
    let client = Client::new(&global.api_base, key, REQUEST_TIMEOUT)
        .context("setting up the upstream client (--api-base, the API key)")?;
    let store = Store::open(&global.db)
        .with_context(|| format!("opening the database {}", global.db.display()))?;
    mark_abandoned(&store, &global.db);
    let limiter = open_limiter(global, &config.budget, Access::Charge).await?;
    let kind = if job.allowance == Allowance::Quota {
        RunKind::Backfill
    } else {
        RunKind::Run
    };
    let run_id = crate::report::new_run_id();
    // Held until the run's outcome is recorded: while it is, nobody takes the run
    // for one a killed process left behind.
    let run_lock = lock::lock_run(&global.db, &run_id).with_context(|| {
        format!(
            "locking {}",
            lock::run_lock_path(&global.db, &run_id).display()
        )
    })?;
    let settings = RunSettings {
        run_id,
        kind,
        budget: config.budget.clone(),
        allowance: job.allowance,
        concurrency: usize::from(job.concurrency),
    };
    let deps = RunDeps {
        limiter,
        client,
        store,
        db: global.db.clone(),
    };
    let run = Arc::new(Run::new(settings, deps));
    let received = Arc::new(OnceLock::new());
    let watcher = tokio::spawn(signals.watch(Arc::clone(&run), Arc::clone(&received)));
    let regions: Vec<Region> = job.regions.iter().map(|r| (*r).clone()).collect();
    let report = runner::execute(Arc::clone(&run), regions).await;
    drop(run_lock);
    let allowance = if job.allowance == Allowance::Quota {
        "quota"
    } else {
        "ceiling"
    };
    log_summary(&report, job.kind, allowance);
    // The run's outcome decides the exit code, not its metrics: a file that cannot be
    // written is logged, and the last-run timestamp going stale is what alerts.
    if let Some(path) = &global.metrics_file
        && let Err(e) =
            write_metrics(path, &global.db, run.limiter(), &config.budget, &report).await
    {
        tracing::error!(run_id = %report.run_id, "{}", crate::error::report(&e));
    }
    let printed = if job.json {
        print_json(&report)
    } else {
        Ok(())
    };
    watcher.abort();
    let outcome = match report.status.exit_code() {
        None => Ok(()),
        Some(ExitCode::Interrupted) if received.get() == Some(&Signal::Term) => {
            Err(SilentExit(ExitCode::Terminated).into())
        }
        Some(code) => Err(SilentExit(code).into()),
    };
    after_output(printed, outcome)
}

/// The one-line summary (the heartbeat a cron log keeps), with the run's numbers as
/// fields for JSON logs.
fn log_summary(report: &runner::RunReport, kind: &str, allowance: &str) {
    // The regions by name, so that the line of a run that made no call (a region
    // skipped, nothing stale) still says which regions it was about.
    let named: Vec<String> = report
        .regions
        .iter()
        .map(|r| format!("{} {}", r.code, r.status.as_str()))
        .collect();
    let summary = if named.is_empty() {
        format!("{}; no region to fetch", report.summary(kind, allowance))
    } else {
        format!(
            "{}; regions: {}",
            report.summary(kind, allowance),
            named.join(", ")
        )
    };
    let regions: Vec<&str> = report.regions.iter().map(|r| r.code.as_str()).collect();
    let regions = regions.join(",");
    macro_rules! summary {
        ($level:ident) => {
            tracing::$level!(
                run_id = %report.run_id,
                kind,
                status = report.status.as_str(),
                units = report.units_charged,
                calls = report.calls,
                regions = %regions,
                "{summary}"
            )
        };
    }
    match report.status {
        Status::Complete => summary!(info),
        Status::Failed => summary!(error),
        _ => summary!(warn),
    }
}

/// Marks the runs a dead process left `running` as `abandoned`: those whose run lock
/// nobody holds. Never fails the command: the history is only bookkeeping.
fn mark_abandoned(store: &Store, db: &Path) {
    let running = match store.running_runs() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("{e}; runs left by killed processes stay `running` for now");
            return;
        }
    };
    for r in running {
        match lock::run_is_alive(db, &r.run_id) {
            Ok(true) => {}
            Ok(false) => match store.abandon_run(&r.run_id) {
                Ok(true) => {
                    lock::remove_dead_run_lock(db, &r.run_id);
                    tracing::warn!(
                        run_id = %r.run_id,
                        status = "abandoned",
                        "{} {} started at {} was left running by a process that died; marked abandoned",
                        r.kind.as_str(),
                        r.run_id,
                        rfc3339(r.started_at.saturating_mul(1_000_000))
                    );
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(run_id = %r.run_id, "{e}"),
            },
            Err(e) => tracing::warn!(
                run_id = %r.run_id,
                "cannot tell whether run {} is alive from {}: {e}",
                r.run_id,
                lock::run_lock_path(db, &r.run_id).display()
            ),
        }
    }
}

/// The signal that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Int,
    Term,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    fn exit_code(self) -> ExitCode {
        match self {
            Signal::Int => ExitCode::Interrupted,
            Signal::Term => ExitCode::Terminated,
        }
    }
}

/// How long calls already sent may take to answer after a signal before they are
/// given up.
const SIGNAL_GRACE: Duration = Duration::from_secs(3);

/// SIGINT and SIGTERM, caught from the start of a run so that neither kills it
/// mid-page.
struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn listen() -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                int: signal(SignalKind::interrupt()).context("catching SIGINT")?,
                term: signal(SignalKind::terminate()).context("catching SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => Signal::Int,
                _ = self.term.recv() => Signal::Term,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Int
        }
    }

    /// The first signal stops the run: no new calls, and the calls in flight get
    /// [`SIGNAL_GRACE`] to answer. The second ends the process at once.
    async fn watch(mut self, run: Arc<Run>, received: Arc<OnceLock<Signal>>) {
        let first = self.next().await;
        let _ = received.set(first);
        tracing::warn!(
            run_id = %run.id(),
            signal = first.name(),
            "{}: stopping: no new calls; calls in flight get {} to answer; a second signal ends the process at once",
            first.name(),
            human(SIGNAL_GRACE)
        );
        run.interrupt(first.name());
        tokio::select! {
            () = tokio::time::sleep(SIGNAL_GRACE) => {
                run.abandon_in_flight();
                let second = self.next().await;
                exit_now(&run, second);
            }
            second = self.next() => exit_now(&run, second),
        }
    }
}

/// The second signal: the process ends without waiting for anything. What was stored
/// is committed page by page; the run's row stays `running` until the next process
/// marks it abandoned.
fn exit_now(run: &Run, signal: Signal) -> ! {
    tracing::error!(
        run_id = %run.id(),
        signal = signal.name(),
        "{}: a second signal; ending at once",
        signal.name()
    );
    std::process::exit(i32::from(signal.exit_code().code()))
}

/// The methods a run calls, reported in the metrics even when a run made no call of them.
const RUN_METHODS: &[&str] = &[
    youtube::VIDEOS_LIST,
    youtube::VIDEO_CATEGORIES_LIST,
    youtube::SEARCH_LIST,
];

/// Writes `--metrics-file` after a run: the whole picture from the database, so that
/// a file shared by every cron line is right whoever wrote it last.
async fn write_metrics(
    path: &Path,
    db: &Path,
    limiter: &Limiter,
    budget: &Budget,
    report: &runner::RunReport,
) -> Result<()> {
    // A limiter the run found down is not asked again (its timeout would be paid once
    // more); the file then says nothing about the budget.
    let numbers = match report.budget_used {
        None => None,
        Some(_) => match limiter.status(&budget.policies()[..1], &[]).await {
            Ok(st) => Some(BudgetNumbers {
                key: budget.key.clone(),
                used: st.policies.first().map_or(0, |p| p.used),
                ceiling: budget.ceiling,
                quota: budget.quota,
                blocked_until_us: st.blocked_until_us,
            }),
            Err(e) => {
                tracing::warn!("metrics without the budget: {e}");
                None
            }
        },
    };
    let picture = (|| {
        let store = Store::open_read_only(db)?;
        store
            .map(|s| Picture::read(&s, numbers.clone()))
            .transpose()
    })()
    .with_context(|| format!("reading the metrics from {}", db.display()))?
    .unwrap_or_default();
    metrics::write_atomically(path, &picture.exposition(RUN_METHODS).render())
        .context("writing the metrics file")?;
    tracing::debug!(path = %path.display(), "metrics written");
    Ok(())
}
