//! `trendsync export`: the trending snapshots for analysts, one row per (fetch,
//! region, chart, rank) or per (video, region, chart, UTC day), as CSV in the column
//! layout of the public trending-video datasets or as JSON lines; or the counts time
//! series; or the same columns, typed, as Parquet. Streamed: memory stays flat however
//! long the history.

use std::io::{BufWriter, IsTerminal, Write};

use anyhow::{Context, Result, anyhow};
use serde::Serialize;

use super::Ctx;
use super::signals::{Signals, StopRequest};
use crate::cli::{ChartChoice, ExportArgs, ExportFormat, ExportPer};
use crate::dataset::{
    COUNTS_TABLE, HISTORY_TABLE, PLACES_TABLE, write_count, write_history, write_place,
};
use crate::error::{SilentExit, UsageError, UsageTip};
use crate::output::parquet::{Column, Limits, Table};
mod rows;

use crate::store::{ChartHistoryRow, CountRow, ExportGrain, ExportRow, ExportSpan, Store};
use rows::*;

/// The CSV header of a kind of export: its columns' names.
fn header(columns: &[Column]) -> impl Iterator<Item = &'static str> + '_ {
    columns.iter().map(|c| c.name)
}

/// What an export writes: which rows, at which grain.
#[derive(Debug, Clone, Copy)]
struct Selection<'a> {
    span: ExportSpan,
    /// Only these charts (0: the overall chart); every chart when `None`.
    charts: Option<&'a [u32]>,
    /// How many rows per chart place; `None` for the chart history, one row per
    /// (video, region, chart).
    grain: Option<ExportGrain>,
    /// The counts series instead of the chart places.
    counts: bool,
}

/// One JSON line: the CSV's columns with JSON types (null for hidden counts).
#[derive(Serialize)]
struct RowJson<'a> {
    video_id: &'a str,
    trending_date: String,
    title: &'a str,
    channel_title: &'a str,
    category_id: Option<&'a str>,
    publish_time: String,
    tags: Option<&'a [String]>,
    views: Option<i64>,
    likes: Option<i64>,
    dislikes: Option<i64>,
    comment_count: Option<i64>,
    thumbnail_link: Option<&'a str>,
    comments_disabled: bool,
    ratings_disabled: bool,
    video_error_or_removed: bool,
    description: &'a str,
    region: &'a str,
    rank: u32,
    fetched_at: String,
    category_title: Option<&'a str>,
    duration_s: Option<i64>,
    /// The category id of the chart; null for the overall chart.
    chart: Option<String>,
    channel_id: &'a str,
    /// The latest upstream change of meaning in force at `fetched_at`.
    methodology: Option<&'static str>,
}

/// One JSON line of `--counts`.
#[derive(Serialize)]
struct CountJson<'a> {
    video_id: &'a str,
    counted_at: String,
    views: Option<i64>,
    likes: Option<i64>,
    comment_count: Option<i64>,
    source: &'a str,
    methodology: Option<&'static str>,
}

pub fn run(ctx: &Ctx<'_>, args: &ExportArgs) -> Result<()> {
    let (global, clock) = (ctx.global, ctx.clock.as_ref());
    if args.format == ExportFormat::Parquet
        && args.output.is_none()
        && std::io::stdout().is_terminal()
    {
        return Err(UsageTip {
            message: "--format parquet writes a binary file, and stdout is a terminal".into(),
            tip: "give --output PATH, or send stdout to a file or a pipe".into(),
        }
        .into());
    }
    let db = &global.db;
    // An export written over the database or its -wal destroys what it exports.
    let protected = ctx.files();
    if let Some(path) = &args.output {
        protected.refuse_write(path, "--output")?;
    }
    // Before the store is read, so that SIGINT/SIGTERM stop the export between two rows
    // (the file at --output left as it was, no temporary file beside it) instead of
    // killing it.
    let stop = Signals::listen()?.stop_request("the export");
    let store = Store::read_on(ctx.require_db()?)
        .with_context(|| format!("opening {} to export", db.display()))?
        .ok_or_else(|| {
            anyhow!(
                "there is no trendsync database at {} to export; check --db or TRENDSYNC_DB",
                db.display()
            )
        })?;
    super::check_read_regions(ctx, &args.regions, || store.regions().unwrap_or_default())?;
    let regions = if args.regions.is_empty() {
        store.regions()?
    } else {
        args.regions
            .iter()
            .map(|r| r.trim().to_ascii_uppercase())
            .collect()
    };
    let span = export_span(args, clock.now().to_secs())?;
    let charts = chosen_charts(&args.charts);
    if let Some(charts) = &charts
        && !args.charts.is_empty()
    {
        check_charts(&store, &regions, charts)?;
    }
    let span = Selection {
        span,
        charts: charts.as_deref(),
        grain: match args.per {
            ExportPer::Fetch => Some(ExportGrain::Fetch),
            ExportPer::Day => Some(ExportGrain::Day),
            ExportPer::Video => None,
        },
        counts: args.counts,
    };
    let result = match &args.output {
        None => {
            // Not locked: the Parquet writer needs a writer it could send to another
            // thread, and the buffer in front of it takes the lock once per 256 KiB.
            let out = std::io::stdout();
            // Titles and descriptions are the upstream's text: on a terminal a screen
            // clear or a right-to-left override in one is shown escaped, never acted on.
            let shown = Shown {
                terminal: out.is_terminal(),
            };
            match write_rows(&store, &regions, span, args.format, &stop, shown, out) {
                // A reader that stopped early (`| head`) is not a failure of the export.
                Err(e) if is_broken_pipe(&e) => Ok(()),
                other => other.map(|_| ()),
            }
        }
        Some(path) => {
            crate::atomic::write(path, "--output", protected, None, |file| -> Result<()> {
                let shown = Shown { terminal: false };
                write_rows(&store, &regions, span, args.format, &stop, shown, file)?;
                Ok(())
            })
            .with_context(|| format!("exporting to {}", path.display()))
        }
    };
    match (result, stop.finish()) {
        (Err(e), Some(code)) if e.chain().any(|c| c.is::<Stopped>()) => {
            if let Some(path) = &args.output {
                tracing::warn!("export stopped; {} is as it was", path.display());
            }
            Err(SilentExit(code).into())
        }
        (result, _) => result,
    }
}

/// The fetches `--since` and `--until` take in; a range that ends before it begins is
/// a usage error (2), not an empty file.
fn export_span(args: &ExportArgs, now: crate::clock::Secs) -> Result<ExportSpan> {
    let since = args
        .since
        .map(|w| w.since(now))
        .transpose()
        .map_err(|e| UsageError(format!("--since: {e}")))?;
    let until = args
        .until
        .map(|w| w.until(now))
        .transpose()
        .map_err(|e| UsageError(format!("--until: {e}")))?;
    if let (Some(since), Some(until)) = (since, until)
        && since > until
    {
        return Err(UsageTip {
            message: format!(
                "--since {} is after --until {}: no fetch can be in between",
                crate::output::human::timestamp_s(since.as_i64()),
                crate::output::human::timestamp_s(until.as_i64()),
            ),
            tip: "swap them, or give a --since before the --until".into(),
        }
        .into());
    }
    Ok(ExportSpan {
        since: since.map_or(i64::MIN, |s| s.as_i64()),
        until: until.map_or(i64::MAX, |u| u.as_i64()),
    })
}

/// The charts `--chart` asks for (0 for the overall chart), or `None` for every chart:
/// the overall chart alone when none is named, so that a rank means one chart's rank.
fn chosen_charts(asked: &[ChartChoice]) -> Option<Vec<u32>> {
    if asked.contains(&ChartChoice::All) {
        return None;
    }
    if asked.is_empty() {
        return Some(vec![0]);
    }
    let mut ids: Vec<u32> = asked
        .iter()
        .filter_map(|c| match c {
            ChartChoice::Id(id) => Some(*id),
            ChartChoice::All => None,
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    Some(ids)
}

/// Refuses (2) a chart that no fetch of `regions` has, naming the charts they have:
/// a typo would otherwise be an empty file.
fn check_charts(store: &Store, regions: &[String], asked: &[u32]) -> Result<()> {
    let known = store
        .charts_of(regions)
        .context("listing the charts the database holds")?;
    let name = |c: u32| {
        if c == 0 {
            "overall".to_owned()
        } else {
            c.to_string()
        }
    };
    if let Some(missing) = asked.iter().find(|c| !known.contains(c)) {
        let known = if known.is_empty() {
            "none: no chart has been fetched".to_owned()
        } else {
            known
                .iter()
                .map(|c| name(*c))
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(UsageTip {
            message: format!(
                "--chart {}: no fetch of {} has this chart",
                name(*missing),
                if regions.is_empty() {
                    "any region".to_owned()
                } else {
                    regions.join(", ")
                }
            ),
            tip: format!("known charts: {known} (or all)"),
        }
        .into());
    }
    Ok(())
}

/// The export stopped between two rows because a signal asked it to.
#[derive(Debug, thiserror::Error)]
#[error("stopped by a signal")]
struct Stopped;

/// Streams every row into `out` and hands it back flushed.
fn write_rows<W: Write + Send>(
    store: &Store,
    regions: &[String],
    span: Selection<'_>,
    format: ExportFormat,
    stop: &StopRequest,
    shown: Shown,
    out: W,
) -> Result<W> {
    let go_on = || {
        if stop.asked() {
            Err(anyhow::Error::new(Stopped))
        } else {
            Ok(())
        }
    };
    let out = BufWriter::with_capacity(256 * 1024, out);
    let places = |grain: ExportGrain, each: &mut dyn FnMut(&ExportRow) -> Result<()>| {
        store.export_charts(regions, span.charts, span.span, grain, each)
    };
    let history = |each: &mut dyn FnMut(&ChartHistoryRow) -> Result<()>| {
        store.export_chart_history(regions, span.charts, span.span, each)
    };
    let counts = |each: &mut dyn FnMut(&CountRow) -> Result<()>| {
        store.export_counts(regions, span.span, each)
    };
    let out = match format {
        ExportFormat::Csv => {
            let mut csv = csv::Writer::from_writer(out);
            if span.counts {
                csv.write_record(header(&COUNTS_TABLE))?;
                counts(&mut |row| {
                    go_on()?;
                    Ok(write_count_csv(&mut csv, row)?)
                })?;
            } else if let Some(grain) = span.grain {
                csv.write_record(header(&PLACES_TABLE))?;
                places(grain, &mut |row| {
                    go_on()?;
                    Ok(write_csv(&mut csv, row, shown)?)
                })?;
            } else {
                csv.write_record(header(&HISTORY_TABLE))?;
                history(&mut |row| {
                    go_on()?;
                    Ok(write_history_csv(&mut csv, row, shown)?)
                })?;
            }
            csv.into_inner()
                .map_err(|e| anyhow::Error::new(e.into_error()))?
        }
        ExportFormat::Jsonl => {
            let mut out = out;
            let mut line = |value: &dyn erased::Line| -> Result<()> {
                go_on()?;
                if shown.terminal {
                    let mut text = Vec::new();
                    value.write_to(&mut text)?;
                    let text = String::from_utf8_lossy(&text);
                    out.write_all(crate::output::json::terminal_safe_json(&text).as_bytes())?;
                } else {
                    value.write_to(&mut out)?;
                }
                out.write_all(b"\n")?;
                Ok(())
            };
            if span.counts {
                counts(&mut |row| line(&count_json(row)))?;
            } else if let Some(grain) = span.grain {
                places(grain, &mut |row| line(&json_row(row)))?;
            } else {
                history(&mut |row| line(&history_json(row)))?;
            }
            out
        }
        ExportFormat::Parquet => {
            if span.counts {
                parquet(out, &COUNTS_TABLE, &go_on, counts, write_count)?
            } else if let Some(grain) = span.grain {
                let places = |each: &mut dyn FnMut(&ExportRow) -> Result<()>| places(grain, each);
                parquet(out, &PLACES_TABLE, &go_on, places, write_place)?
            } else {
                parquet(out, &HISTORY_TABLE, &go_on, history, write_history)?
            }
        }
    };
    out.into_inner().map_err(|e| anyhow!(e.into_error()))
}

/// The rows `rows` hands out, each written by `write` into one Parquet table of
/// `columns`; stops when `go_on` says so.
fn parquet<W: Write + Send, R>(
    out: W,
    columns: &'static [Column],
    go_on: &dyn Fn() -> Result<()>,
    rows: impl FnOnce(&mut dyn FnMut(&R) -> Result<()>) -> Result<u64>,
    write: fn(&mut Table<W>, &R) -> Result<()>,
) -> Result<W> {
    let mut table = Table::new(out, columns, Limits::EXPORT)?;
    rows(&mut |row| {
        go_on()?;
        write(&mut table, row)
    })?;
    Ok(table.finish()?)
}

/// A JSON line of either kind, written without knowing which.
mod erased {
    pub trait Line {
        fn write_to(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()>;
    }

    impl<T: serde::Serialize> Line for T {
        fn write_to(&self, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
            serde_json::to_writer(out, self)
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<csv::Error>().is_some_and(|csv| {
                matches!(csv.kind(), csv::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe)
            })
    })
}

#[cfg(test)]
mod tests;
