//! `trendsync prune --older-than DURATION`: retention for a database cron fills for
//! years. Deletes old chart and search snapshots and follow-up counts, then the videos
//! nothing refers to.

use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;

use super::Ctx;
use super::maintenance;
use super::signals::Signals;
use crate::cli::PruneArgs;
use crate::clock::Clock;
use crate::error::{SilentExit, after_output};
use crate::store::{PruneReport, Store};

#[derive(Serialize)]
struct PruneJson {
    dry_run: bool,
    /// The prune stopped early, on a signal; the next one finishes it.
    interrupted: bool,
    cutoff: String,
    deleted: serde_json::Map<String, serde_json::Value>,
    videos_deleted: u64,
    bytes_freed: u64,
}

pub fn run(ctx: &Ctx<'_>, args: &PruneArgs, clock: &dyn Clock) -> Result<()> {
    let global = ctx.global;
    // First, so that a signal from now on stops the prune between transactions
    // instead of killing it.
    let stop = Signals::listen()?.stop_request("the prune");
    let now = clock.now().to_secs().as_i64();
    let older_than = i64::try_from(args.older_than.as_secs()).unwrap_or(i64::MAX);
    let cutoff = now.saturating_sub(older_than);
    let db = &global.db;
    let report = if args.dry_run {
        match ctx
            .read_store()
            .with_context(|| format!("opening {} to see what prune would delete", db.display()))?
        {
            Some(store) => store.prune(cutoff, true, false)?,
            None => PruneReport::nothing(cutoff),
        }
    } else {
        // Opening creates a missing file; an empty new database is not what a person
        // who typed a wrong path wants.
        let Some(conn) = ctx.db() else {
            return Err(crate::error::MissingConfig(format!(
                "there is no database at {} to prune; check --db or TRENDSYNC_DB",
                db.display()
            ))
            .into());
        };
        let writing = maintenance::for_writing(ctx.files(), maintenance::WRITER_PATIENCE)?;
        let store =
            Store::on(conn).with_context(|| format!("opening {} to prune", db.display()))?;
        let bytes_before = store.file_bytes()?;
        let mut report = store
            .prune_until(cutoff, false, &|| stop.asked())
            .with_context(|| format!("pruning {}", db.display()))?;
        drop(writing);
        if args.vacuum && !report.interrupted {
            // Writers that start meanwhile wait for it instead of failing on SQLite's
            // busy timeout.
            let _vacuum = maintenance::for_vacuum(ctx.files())?;
            store.vacuum()?;
            report.bytes_freed = bytes_before.saturating_sub(store.file_bytes()?);
        }
        report
    };
    let cutoff_text = crate::output::human::timestamp_s(cutoff);
    // Under -q the text report, the prune's summary, goes as the run's does
    // (docs/metrics.md): a cron line with -q writes nothing but warnings and errors to its
    // log.
    let printed = if global.quiet > 0 && !args.json {
        Ok(())
    } else {
        print_report(&report, &cutoff_text, args.json)
    };
    // The prune is done (or stopped cleanly) whether or not its summary can be written.
    let outcome = match stop.finish() {
        Some(code) => Err(SilentExit(code).into()),
        None => Ok(()),
    };
    after_output(printed, outcome)
}

fn print_report(report: &PruneReport, cutoff_text: &str, json: bool) -> Result<()> {
    if json {
        let deleted = report
            .deleted
            .iter()
            .map(|(what, n)| ((*what).to_string(), serde_json::Value::from(*n)))
            .collect();
        return crate::output::json::print_json(&PruneJson {
            dry_run: report.dry_run,
            interrupted: report.interrupted,
            cutoff: cutoff_text.to_owned(),
            deleted,
            videos_deleted: report.videos_deleted,
            bytes_freed: report.bytes_freed,
        });
    }
    let rows = report
        .deleted
        .iter()
        .map(|(what, n)| format!("{n} {}", row_label(what)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut out = std::io::stdout().lock();
    if report.dry_run {
        writeln!(
            out,
            "would delete snapshots fetched before {cutoff_text}: {rows}, and {} videos",
            report.videos_deleted
        )?;
    } else if report.interrupted {
        writeln!(
            out,
            "stopped early: deleted snapshots fetched before {cutoff_text}: {rows}, and {} videos; {} freed; the next prune finishes the rest",
            report.videos_deleted,
            crate::output::human::size(report.bytes_freed)
        )?;
    } else {
        writeln!(
            out,
            "deleted snapshots fetched before {cutoff_text}: {rows}, and {} videos; {} freed",
            report.videos_deleted,
            crate::output::human::size(report.bytes_freed)
        )?;
    }
    Ok(())
}

/// How the text summary names a table's deleted rows: the table's name in words, and
/// the follow-ups' counts as people call them.
fn row_label(table: &str) -> String {
    match table {
        "follow_counts" => "follow-up counts".to_owned(),
        other => other.replace('_', " "),
    }
}
