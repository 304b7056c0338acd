//! What one charge of the embedded limiter costs in the steady state that hourly runs
//! leave: 40 days of hourly runs of the eight shipped regions (32 `videos.list` calls
//! an hour) charged first, each run confirming the clock, then `N` more charges timed
//! one by one. The file lives in memory where the system has a file system there, so
//! that what is timed is the limiter's own work (SQL, the log and its pruning), not
//! the disk's flush, which is the same for every version and would hide it.
//!
//! It uses only opening with the budget, charging, and the skew record's table, so the
//! same file measures an earlier commit once its opening is spelled as that commit's.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use trendsync::clock::{ManualClock, Micros};
use trendsync::config::{SourceText, parse_costs};
use trendsync::quota::{Allowance, EmbeddedLimiter, Limiter};

const HOUR_US: i64 = 3_600_000_000;
/// 2026-01-01T00:00Z.
const START_US: i64 = 1_767_225_600_000_000;
const DAYS: i64 = 40;
const CALLS_AN_HOUR: usize = 32;
const TIMED: usize = 4_000;

/// A run's first answer confirming the host's clock at `at_us`, written as the runner
/// writes it.
fn confirm(db: &Path, at_us: i64) -> Result<()> {
    let conn = rusqlite::Connection::open(db).context("opening the bench database")?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute(
        "INSERT INTO quota_clock_skew (clock, skew_us, measured_at_us) VALUES ('host', 0, ?1)
         ON CONFLICT (clock) DO UPDATE SET skew_us = 0, measured_at_us = excluded.measured_at_us",
        [at_us],
    )
    .context("recording the run's confirmation")?;
    Ok(())
}

pub(crate) fn run() -> Result<()> {
    let budget = parse_costs(&SourceText {
        name: "quota-costs.toml".into(),
        text: include_str!("../../quota-costs.toml"),
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)?
    } else {
        tempfile::tempdir()?
    };
    let db = dir.path().join("embedded.db");
    let clock = Arc::new(ManualClock::starting_at(Micros::new(START_US)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open(
            &db,
            &budget.key,
            clock.clone(),
            Some(Arc::new(budget.clone())),
        )
        .context("opening")?,
    );
    let mut id = 0u64;
    let mut charge_at = |at: i64, timed: Option<&mut Vec<Duration>>| -> Result<()> {
        id += 1;
        clock.set(Micros::new(at));
        // Named as a run names its calls: the run's id (its start in milliseconds,
        // hexadecimal, and a random part), then the call's number. The log's key is
        // then in time order, as the product's is.
        let run_id = format!("{:x}-{:08x}", (at / HOUR_US) * 3_600_000, at / HOUR_US);
        let charge = budget.charge(
            &format!("{run_id}-{id}"),
            "videos.list",
            1,
            Allowance::Quota,
        )?;
        let started = Instant::now();
        let decision = rt.block_on(limiter.charge(&charge))?;
        if let Some(samples) = timed {
            samples.push(started.elapsed());
        }
        anyhow::ensure!(decision.granted, "charge {id} was denied");
        Ok(())
    };
    // Spaced so that a day's window never holds more than the 9,500 of the quota.
    let spacing = HOUR_US / CALLS_AN_HOUR as i64;
    for hour in 0..DAYS * 24 {
        let at = START_US + hour * HOUR_US;
        confirm(&db, at)?;
        for call in 0..CALLS_AN_HOUR as i64 {
            charge_at(at + call * spacing, None)?;
        }
    }
    let end = START_US + DAYS * 24 * HOUR_US;
    confirm(&db, end)?;
    let mut samples = Vec::with_capacity(TIMED);
    let step = HOUR_US / TIMED as i64;
    for i in 0..TIMED as i64 {
        charge_at(end + i * step, Some(&mut samples))?;
    }
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / TIMED as u32;
    let at = |q: f64| samples[((TIMED as f64 * q) as usize).min(TIMED - 1)];
    println!(
        "\nThe embedded limiter's charge, after {DAYS} days of hourly runs ({} charges), {TIMED} timed:",
        DAYS * 24 * CALLS_AN_HOUR as i64
    );
    println!(
        "  mean {:.1} us, median {:.1} us, p90 {:.1} us, p99 {:.1} us",
        mean.as_secs_f64() * 1e6,
        at(0.5).as_secs_f64() * 1e6,
        at(0.9).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6
    );
    Ok(())
}
