//! What keeping every entry for the longest window allowed costs (docs/budget.md, "What
//! is kept"): a year of hourly runs of the eight shipped regions under the granular
//! costs file, charged through the product's limiters as the runs charge them, and
//! then what the year left behind, measured: rows and bytes of the embedded limiter's
//! tables, and Redis's keys and this host's ledger of them.
//!
//! Each hour, every region fetches its 4 chart pages (4 `videos.list` calls), and once a
//! day its category names (1 `videoCategories.list`): 32 calls an hour, 8 more a day.
//! Each hour's run confirms the clock with its first answer, as a run on a right clock
//! does, so pruning goes on by that time. The embedded limiter's file lives in memory
//! where the system has a file system there (a year is 283,000 durable transactions);
//! Redis's clock is moved an hour at a time by the tests' clock shim.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use trendsync::clock::{Clock, ManualClock, Micros};
use trendsync::config::{SourceText, parse_costs};
use trendsync::quota::skew::{LimiterClock, Skew};
use trendsync::quota::{Allowance, Budget, EmbeddedLimiter, Journal, Limiter, RedisLimiter};

use crate::admin::Admin;
use crate::redis_server::RedisServer;

const HOUR_US: i64 = 3_600_000_000;
const HOURS: i64 = 365 * 24;
/// 2026-01-01T00:00Z.
const START_US: i64 = 1_767_225_600_000_000;
const REGIONS: u64 = 8;
const PAGES: u64 = 4;

fn budget() -> Result<Budget> {
    parse_costs(&SourceText {
        name: "quota-costs.granular.toml".into(),
        text: include_str!("../../quota-costs.granular.toml"),
    })
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The calls of the run at `hour`: the chart pages, and the category names at the
/// first hour of each day.
fn calls(hour: i64) -> impl Iterator<Item = &'static str> {
    let pages = std::iter::repeat_n("videos.list", (REGIONS * PAGES) as usize);
    let names = std::iter::repeat_n(
        "videoCategories.list",
        if hour % 24 == 0 { REGIONS as usize } else { 0 },
    );
    pages.chain(names)
}

/// Charges the calls of the run at `hour`, each granted, numbering them on from `id`.
fn charge_run(
    rt: &tokio::runtime::Runtime,
    limiter: &Limiter,
    budget: &Budget,
    hour: i64,
    id: &mut u64,
) -> Result<()> {
    for method in calls(hour) {
        *id += 1;
        let charge = budget.charge(&format!("r{hour}-{id}"), method, 1, Allowance::Ceiling)?;
        let decision = rt.block_on(limiter.charge(&charge))?;
        anyhow::ensure!(decision.granted, "hour {hour}: {method} was denied");
    }
    Ok(())
}

/// A confirmation of the clock at `at_us`, as each run's first answer records it.
fn confirmed(clock: LimiterClock, at_us: i64) -> Skew {
    Skew {
        clock,
        skew_us: 0,
        measured_at_us: at_us,
    }
}

/// A scratch directory in memory where the system has one.
fn scratch() -> Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return Ok(dir);
    }
    tempfile::tempdir().context("creating a scratch directory")
}

/// Rows of `table`, and the bytes SQLite's `dbstat` gives its pages and those of its
/// indexes.
fn table_size(conn: &rusqlite::Connection, table: &str) -> Result<(u64, u64)> {
    let rows: i64 = conn
        .query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .with_context(|| format!("counting {table}"))?;
    let bytes: i64 = conn
        .query_row(
            "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat
             WHERE name = ?1 OR name IN (SELECT name FROM sqlite_schema WHERE tbl_name = ?1)",
            [table],
            |r| r.get(0),
        )
        .with_context(|| format!("reading the pages of {table} (dbstat)"))?;
    Ok((u64::try_from(rows)?, u64::try_from(bytes)?))
}

fn file_bytes(db: &Path) -> Result<u64> {
    let conn = rusqlite::Connection::open(db).context("opening the bench database")?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); VACUUM;")
        .context("compacting the bench database")?;
    Ok(std::fs::metadata(db)
        .context("reading the file's size")?
        .len())
}

fn report_tables(db: &Path, tables: &[&str]) -> Result<()> {
    let conn = rusqlite::Connection::open(db).context("opening the bench database")?;
    for table in tables {
        let (rows, bytes) = table_size(&conn, table)?;
        println!(
            "  {table:<16} {rows:>8} rows  {:>8.1} KiB  ({:.0} bytes a row)",
            bytes as f64 / 1024.0,
            bytes as f64 / rows.max(1) as f64
        );
    }
    Ok(())
}

fn embedded(budget: &Budget) -> Result<()> {
    let dir = scratch()?;
    let db = dir.path().join("year.db");
    let clock = Arc::new(ManualClock::starting_at(Micros::new(START_US)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let mut id = 0u64;
    for hour in 0..HOURS {
        let at = START_US + hour * HOUR_US;
        clock.set(Micros::new(at));
        trendsync::schema::record_skew(&db, &confirmed(LimiterClock::Host, at))
            .context("recording the run's confirmation")?;
        let limiter = Limiter::Embedded(
            EmbeddedLimiter::open(
                &db,
                &budget.key,
                clock.clone(),
                Some(Arc::new(budget.clone())),
            )
            .context("opening the embedded limiter")?,
        );
        charge_run(&rt, &limiter, budget, hour, &mut id)?;
    }
    println!(
        "embedded limiter: {HOURS} hourly runs, {id} charges, in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    report_tables(&db, &["quota_log", "quota_entry"])?;
    println!(
        "  the whole file after VACUUM: {:.1} MiB",
        file_bytes(&db)? as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

fn redis(budget: &Budget) -> Result<()> {
    let server = RedisServer::start_at(START_US);
    let mut admin = Admin {
        conn: server.connection(),
    };
    let dir = scratch()?;
    let db = dir.path().join("ledger.db");
    let host = Arc::new(ManualClock::starting_at(Micros::new(START_US)));
    let host_clock: Arc<dyn Clock> = host.clone();
    let journal = Arc::new(Journal::open(&db, host_clock.clone()).context("opening the ledger")?);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let before: u64 = used_memory(&mut admin)?;
    let started = Instant::now();
    let mut id = 0u64;
    for hour in 0..HOURS {
        let at = START_US + hour * HOUR_US;
        server.clock().set_now_us(at);
        host.set(Micros::new(at));
        let limiter = rt.block_on(async {
            let opened = RedisLimiter::connect(
                &server.url(),
                &budget.key,
                host_clock.clone(),
                Some(Arc::new(budget.clone())),
            )
            .await
            .context("connecting")?;
            anyhow::Ok(
                Limiter::Redis(opened.confirmed_at(Some(at)))
                    .keep_ledger(Arc::clone(&journal), &budget.key)
                    .await,
            )
        })?;
        charge_run(&rt, &limiter, budget, hour, &mut id)?;
    }
    println!(
        "Redis: {HOURS} hourly runs, {id} charges, in {:.0} s",
        started.elapsed().as_secs_f64()
    );
    let keys = admin.scan(&format!("trendsync:{{{}}}:*", budget.key))?;
    let mut sizes = Vec::new();
    for key in &keys {
        let members: u64 = redis::cmd("ZCARD")
            .arg(key)
            .query(&mut admin.conn)
            .unwrap_or(0);
        sizes.push((
            key.clone(),
            members,
            admin.memory_of(std::slice::from_ref(key))?,
        ));
    }
    sizes.sort_by_key(|s| std::cmp::Reverse(s.2));
    for (key, members, bytes) in &sizes {
        println!(
            "  {key:<40} {members:>7} entries  {:>8.1} KiB",
            *bytes as f64 / 1024.0
        );
    }
    let total: u64 = sizes.iter().map(|s| s.2).sum();
    println!(
        "  every key of the budget: {:.1} MiB (MEMORY USAGE); the server's used_memory grew {:.1} MiB",
        total as f64 / (1024.0 * 1024.0),
        (used_memory(&mut admin)?.saturating_sub(before)) as f64 / (1024.0 * 1024.0)
    );
    println!("this host's ledger (SQLite):");
    report_tables(&db, &["quota_journal"])?;
    Ok(())
}

fn used_memory(admin: &mut Admin) -> Result<u64> {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query(&mut admin.conn)
        .context("reading INFO memory")?;
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")
}

pub(crate) fn run() -> Result<()> {
    let budget = budget()?;
    println!(
        "\nRetention: a year of hourly runs, 8 regions, granular costs file, entries kept {} days",
        trendsync::quota::KEEP.as_secs() / 86_400
    );
    embedded(&budget)?;
    redis(&budget)?;
    Ok(())
}
