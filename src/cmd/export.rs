//! `trendsync export`: the trending snapshots for analysts, one row per (fetch,
//! region, chart, rank) or per (video, region, chart, UTC day), as CSV in the column
//! layout of the public trending-video datasets or as JSON lines; or the counts time
//! series; or the same columns, typed, as Parquet. Streamed: memory stays flat however
//! long the history.

use std::borrow::Cow;
use std::io::{BufWriter, IsTerminal, Write};

use anyhow::{Context, Result, anyhow};
use serde::Serialize;

use super::Ctx;
use super::signals::{Signals, StopRequest};
use crate::cli::{ChartChoice, ExportArgs, ExportFormat, ExportPer};
use crate::error::{SilentExit, UsageError, UsageTip};
use crate::output::parquet::{Cell, Column, Kind, Limits, Table};
use crate::output::text::visible;
use crate::store::{
    ChartHistoryRow, CountRow, ExportGrain, ExportRow, ExportSpan, Store, methodology_at,
};

/// What `methodology` means, in every table.
const METHODOLOGY: &str = "The id of the latest upstream change of what the numbers or charts \
     mean in force at this row's time (see `trendsync video` and the upstream_changes table); \
     an id, not a date, though it is spelled like the day the change took effect. Null before \
     the first. Compare rows of one methodology only";

/// What `chart` means, in every table.
const CHART: &str = "The chart: null for the overall chart, else its category id (text)";

/// What `channel_id` means, in every table.
const CHANNEL_ID: &str = "The channel's id (UC...): unique, unlike its title";

/// The columns of `--counts`: their names are the CSV header, and with their types the
/// Parquet schema.
pub const COUNTS_TABLE: [Column; 7] = [
    Column::required("video_id", Kind::Text).about("The video's id (11 characters)"),
    Column::required("counted_at", Kind::Time)
        .about("When the upstream reported these counts (UTC)"),
    Column::optional("views", Kind::Int).about("View count; null when hidden"),
    Column::optional("likes", Kind::Int).about("Like count; null when hidden"),
    Column::optional("comment_count", Kind::Int)
        .about("Comment count; null when hidden or comments are off"),
    Column::required("source", Kind::Text)
        .about("Where the sample came from: chart, search or follow (a follow-up)"),
    Column::optional("methodology", Kind::Text).about(METHODOLOGY),
];

/// The columns of `--per video`, in CSV and Parquet alike.
pub const HISTORY_TABLE: [Column; 18] = [
    Column::required("video_id", Kind::Text).about("The video's id (11 characters)"),
    Column::required("title", Kind::Text).about("The video's latest title"),
    Column::required("channel_title", Kind::Text).about("The channel's latest title"),
    Column::optional("category_id", Kind::Text).about("The video's category id (text)"),
    Column::required("region", Kind::Text).about("The region's code (ISO 3166-1 alpha-2)"),
    Column::optional("chart", Kind::Text).about(CHART),
    Column::required("channel_id", Kind::Text).about(CHANNEL_ID),
    Column::required("first_seen", Kind::Time).about("Its first place on the chart (UTC)"),
    Column::required("last_seen", Kind::Time).about("Its last place on the chart (UTC)"),
    Column::required("days_on_chart", Kind::Int)
        .about("UTC days with at least one fetch of the chart placing it"),
    Column::required("fetches", Kind::Int).about("Fetches of the chart placing it"),
    Column::required("best_rank", Kind::Int).about("Its best rank (1 is the top)"),
    Column::required("best_rank_at", Kind::Time).about("When it first stood at best_rank (UTC)"),
    Column::required("entries", Kind::Int)
        .about("Runs of consecutive fetches placing it: on, off, on again is 2"),
    Column::optional("views", Kind::Int).about("View count at its last place; null when hidden"),
    Column::optional("likes", Kind::Int).about("Like count at its last place; null when hidden"),
    Column::optional("comment_count", Kind::Int)
        .about("Comment count at its last place; null when hidden"),
    Column::optional("methodology", Kind::Text).about(METHODOLOGY),
];

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

/// The columns of the chart places, in CSV and Parquet alike: the datasets' columns,
/// then ours.
/// `publish_time` is null where the upstream's text is not a time.
pub const PLACES_TABLE: [Column; 24] = [
    Column::required("video_id", Kind::Text).about("The video's id (11 characters)"),
    Column::required("trending_date", Kind::Day).about("The UTC date the fetch began"),
    Column::required("title", Kind::Text).about("The video's latest title"),
    Column::required("channel_title", Kind::Text).about("The channel's latest title"),
    Column::optional("category_id", Kind::Text).about("The video's category id (text)"),
    Column::optional("publish_time", Kind::Time)
        .about("When the video was published (UTC); null where the upstream's text is no time"),
    Column::optional("tags", Kind::TextList).about("The video's tags; null when it has none"),
    Column::optional("views", Kind::Int).about("View count this fetch saw; null when hidden"),
    Column::optional("likes", Kind::Int).about("Like count this fetch saw; null when hidden"),
    Column::optional("dislikes", Kind::Int)
        .about("Always null: the upstream no longer returns dislikes"),
    Column::optional("comment_count", Kind::Int)
        .about("Comment count this fetch saw; null when hidden or comments are off"),
    Column::optional("thumbnail_link", Kind::Text).about("The thumbnail's URL"),
    Column::required("comments_disabled", Kind::Bool).about("No comment count was returned"),
    Column::required("ratings_disabled", Kind::Bool).about("No like count was returned"),
    Column::required("video_error_or_removed", Kind::Bool)
        .about("A follow-up found the video gone or private"),
    Column::required("description", Kind::Text).about("The video's latest description"),
    Column::required("region", Kind::Text).about("The region's code (ISO 3166-1 alpha-2)"),
    Column::required("rank", Kind::Int).about("Its place on the chart (1 is the top)"),
    Column::required("fetched_at", Kind::Time).about("When this place's page was stored (UTC)"),
    Column::optional("category_title", Kind::Text).about("The category's title in the region"),
    Column::optional("duration_s", Kind::Int).about("The video's length in seconds"),
    Column::optional("chart", Kind::Text).about(CHART),
    Column::required("channel_id", Kind::Text).about(CHANNEL_ID),
    Column::optional("methodology", Kind::Text).about(METHODOLOGY),
];

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
                parquet(out, &COUNTS_TABLE, &go_on, counts, write_count_parquet)?
            } else if let Some(grain) = span.grain {
                let places = |each: &mut dyn FnMut(&ExportRow) -> Result<()>| places(grain, each);
                parquet(out, &PLACES_TABLE, &go_on, places, write_parquet)?
            } else {
                parquet(out, &HISTORY_TABLE, &go_on, history, write_history_parquet)?
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

fn write_count_csv<W: Write>(csv: &mut csv::Writer<W>, row: &CountRow) -> csv::Result<()> {
    let int = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
    csv.write_field(&row.video_id)?;
    csv.write_field(utc_time(row.at))?;
    csv.write_field(int(row.views))?;
    csv.write_field(int(row.likes))?;
    csv.write_field(int(row.comments))?;
    csv.write_field(row.source)?;
    csv.write_field(methodology_at(row.at).unwrap_or_default())?;
    csv.write_record(None::<&[u8]>)
}

fn count_json(row: &CountRow) -> CountJson<'_> {
    CountJson {
        video_id: &row.video_id,
        counted_at: utc_time(row.at),
        views: row.views,
        likes: row.likes,
        comment_count: row.comments,
        source: row.source,
        methodology: methodology_at(row.at),
    }
}

/// One JSON line of `--per video`.
#[derive(Serialize)]
struct HistoryJson<'a> {
    video_id: &'a str,
    title: &'a str,
    channel_title: &'a str,
    category_id: Option<&'a str>,
    region: &'a str,
    /// The category id of the chart; null for the overall chart.
    chart: Option<String>,
    channel_id: &'a str,
    first_seen: String,
    last_seen: String,
    days_on_chart: u64,
    fetches: u64,
    best_rank: u32,
    best_rank_at: String,
    entries: u64,
    views: Option<i64>,
    likes: Option<i64>,
    comment_count: Option<i64>,
    /// The latest upstream change of meaning in force at `last_seen`.
    methodology: Option<&'static str>,
}

fn history_json(row: &ChartHistoryRow) -> HistoryJson<'_> {
    HistoryJson {
        video_id: &row.video_id,
        title: &row.title,
        channel_title: &row.channel_title,
        category_id: row.category_id.as_deref(),
        region: &row.region,
        chart: row.chart.map(|c| c.to_string()),
        channel_id: &row.channel_id,
        first_seen: utc_time(row.first_seen),
        last_seen: utc_time(row.last_seen),
        days_on_chart: row.days_on_chart,
        fetches: row.fetches,
        best_rank: row.best_rank,
        best_rank_at: utc_time(row.best_rank_at),
        entries: row.entries,
        views: row.view_count,
        likes: row.like_count,
        comment_count: row.comment_count,
        methodology: methodology_at(row.last_seen),
    }
}

fn write_history_csv<W: Write>(
    csv: &mut csv::Writer<W>,
    row: &ChartHistoryRow,
    shown: Shown,
) -> csv::Result<()> {
    let int = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
    csv.write_field(shown.id(&row.video_id).as_bytes())?;
    csv.write_field(shown.text(&row.title).as_bytes())?;
    csv.write_field(shown.text(&row.channel_title).as_bytes())?;
    csv.write_field(shown.text_or_empty(row.category_id.as_deref()).as_bytes())?;
    csv.write_field(&row.region)?;
    csv.write_field(row.chart.map(|c| c.to_string()).unwrap_or_default())?;
    csv.write_field(shown.id(&row.channel_id).as_bytes())?;
    csv.write_field(utc_time(row.first_seen))?;
    csv.write_field(utc_time(row.last_seen))?;
    csv.write_field(row.days_on_chart.to_string())?;
    csv.write_field(row.fetches.to_string())?;
    csv.write_field(row.best_rank.to_string())?;
    csv.write_field(utc_time(row.best_rank_at))?;
    csv.write_field(row.entries.to_string())?;
    csv.write_field(int(row.view_count))?;
    csv.write_field(int(row.like_count))?;
    csv.write_field(int(row.comment_count))?;
    csv.write_field(methodology_at(row.last_seen).unwrap_or_default())?;
    csv.write_record(None::<&[u8]>)
}

/// Where the rows go, which decides how upstream text is written.
#[derive(Debug, Clone, Copy)]
struct Shown {
    /// A terminal: control characters are shown escaped ([`visible`]).
    terminal: bool,
}

impl Shown {
    /// The upstream's text as a cell: inert for a spreadsheet, and visible on a
    /// terminal.
    fn text(self, t: &str) -> Cow<'_, str> {
        let cell = inert_cell(t);
        if self.terminal
            && let Cow::Owned(shown) = visible(&cell)
        {
            return Cow::Owned(shown);
        }
        cell
    }

    /// [`Shown::text`] of text that may be missing: an empty cell then.
    fn text_or_empty(self, t: Option<&str>) -> Cow<'_, str> {
        self.text(t.unwrap_or(""))
    }

    /// A video id: never quoted (its alphabet, [A-Za-z0-9_-], spells no formula that
    /// calls anything, and a quote in front of one starting with `-` would break every
    /// join with it), but made visible on a terminal.
    fn id(self, id: &str) -> Cow<'_, str> {
        if self.terminal {
            visible(id)
        } else {
            Cow::Borrowed(id)
        }
    }
}

/// A text cell as a spreadsheet will show it: one that it would run as a formula
/// (starting with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a single quote
/// in front, the OWASP convention, so that it is shown as text.
fn inert_cell(text: &str) -> Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{text}"))
    } else {
        Cow::Borrowed(text)
    }
}

fn write_csv<W: Write>(csv: &mut csv::Writer<W>, row: &ExportRow, shown: Shown) -> csv::Result<()> {
    let int = |n: Option<i64>| n.map(|n| n.to_string()).unwrap_or_default();
    let flag = |b: bool| if b { "true" } else { "false" };
    csv.write_field(shown.id(&row.video_id).as_bytes())?;
    csv.write_field(utc_date(row.fetch_started_at))?;
    csv.write_field(shown.text(&row.title).as_bytes())?;
    csv.write_field(shown.text(&row.channel_title).as_bytes())?;
    csv.write_field(shown.text_or_empty(row.category_id.as_deref()).as_bytes())?;
    csv.write_field(shown.text(&utc_time_text(&row.published_at)).as_bytes())?;
    let tags = row.tags.as_ref().map(|t| t.join("|")).unwrap_or_default();
    csv.write_field(shown.text(&tags).as_bytes())?;
    csv.write_field(int(row.view_count))?;
    csv.write_field(int(row.like_count))?;
    // The API no longer returns dislikes.
    csv.write_field("")?;
    csv.write_field(int(row.comment_count))?;
    csv.write_field(shown.text_or_empty(row.thumbnail_url.as_deref()).as_bytes())?;
    csv.write_field(flag(row.comment_count.is_none()))?;
    csv.write_field(flag(row.like_count.is_none()))?;
    // A follow-up found it gone or private.
    csv.write_field(flag(row.removed))?;
    csv.write_field(shown.text(&row.description).as_bytes())?;
    csv.write_field(&row.region)?;
    csv.write_field(row.rank.to_string())?;
    csv.write_field(utc_time(row.fetched_at))?;
    csv.write_field(
        shown
            .text_or_empty(row.category_title.as_deref())
            .as_bytes(),
    )?;
    csv.write_field(int(row.duration_s))?;
    csv.write_field(row.chart.map(|c| c.to_string()).unwrap_or_default())?;
    csv.write_field(shown.id(&row.channel_id).as_bytes())?;
    csv.write_field(methodology_at(row.fetched_at).unwrap_or_default())?;
    csv.write_record(None::<&[u8]>)
}

fn json_row(row: &ExportRow) -> RowJson<'_> {
    RowJson {
        video_id: &row.video_id,
        trending_date: utc_date(row.fetch_started_at),
        title: &row.title,
        channel_title: &row.channel_title,
        category_id: row.category_id.as_deref(),
        publish_time: utc_time_text(&row.published_at),
        tags: row.tags.as_deref(),
        views: row.view_count,
        likes: row.like_count,
        dislikes: None,
        comment_count: row.comment_count,
        thumbnail_link: row.thumbnail_url.as_deref(),
        comments_disabled: row.comment_count.is_none(),
        ratings_disabled: row.like_count.is_none(),
        video_error_or_removed: row.removed,
        description: &row.description,
        region: &row.region,
        rank: row.rank,
        fetched_at: utc_time(row.fetched_at),
        category_title: row.category_title.as_deref(),
        duration_s: row.duration_s,
        chart: row.chart.map(|c| c.to_string()),
        channel_id: &row.channel_id,
        methodology: methodology_at(row.fetched_at),
    }
}

fn write_parquet<W: Write + Send>(table: &mut Table<W>, row: &ExportRow) -> Result<()> {
    let chart = row.chart.map(|c| c.to_string());
    table.row(&[
        Cell::Text(&row.video_id),
        Cell::Day(instant(row.fetch_started_at)?),
        Cell::Text(&row.title),
        Cell::Text(&row.channel_title),
        Cell::from(row.category_id.as_deref()),
        row.published_at
            .parse::<jiff::Timestamp>()
            .map_or(Cell::Null, Cell::Time),
        row.tags.as_deref().map_or(Cell::Null, Cell::TextList),
        Cell::int(row.view_count),
        Cell::int(row.like_count),
        // The API no longer returns dislikes.
        Cell::Null,
        Cell::int(row.comment_count),
        Cell::from(row.thumbnail_url.as_deref()),
        Cell::Bool(row.comment_count.is_none()),
        Cell::Bool(row.like_count.is_none()),
        Cell::Bool(row.removed),
        Cell::Text(&row.description),
        Cell::Text(&row.region),
        Cell::Int(row.rank.into()),
        Cell::Time(instant(row.fetched_at)?),
        Cell::from(row.category_title.as_deref()),
        Cell::int(row.duration_s),
        Cell::from(chart.as_deref()),
        Cell::Text(&row.channel_id),
        Cell::from(methodology_at(row.fetched_at)),
    ])?;
    Ok(())
}

fn write_history_parquet<W: Write + Send>(
    table: &mut Table<W>,
    row: &ChartHistoryRow,
) -> Result<()> {
    let chart = row.chart.map(|c| c.to_string());
    table.row(&[
        Cell::Text(&row.video_id),
        Cell::Text(&row.title),
        Cell::Text(&row.channel_title),
        Cell::from(row.category_id.as_deref()),
        Cell::Text(&row.region),
        Cell::from(chart.as_deref()),
        Cell::Text(&row.channel_id),
        Cell::Time(instant(row.first_seen)?),
        Cell::Time(instant(row.last_seen)?),
        Cell::Int(count(row.days_on_chart)?),
        Cell::Int(count(row.fetches)?),
        Cell::Int(row.best_rank.into()),
        Cell::Time(instant(row.best_rank_at)?),
        Cell::Int(count(row.entries)?),
        Cell::int(row.view_count),
        Cell::int(row.like_count),
        Cell::int(row.comment_count),
        Cell::from(methodology_at(row.last_seen)),
    ])?;
    Ok(())
}

fn write_count_parquet<W: Write + Send>(table: &mut Table<W>, row: &CountRow) -> Result<()> {
    table.row(&[
        Cell::Text(&row.video_id),
        Cell::Time(instant(row.at)?),
        Cell::int(row.views),
        Cell::int(row.likes),
        Cell::int(row.comments),
        Cell::Text(row.source),
        Cell::from(methodology_at(row.at)),
    ])?;
    Ok(())
}

/// Unix seconds from the database as an instant.
fn instant(secs: i64) -> Result<jiff::Timestamp> {
    jiff::Timestamp::from_second(secs)
        .with_context(|| format!("the database holds a time out of range ({secs} s)"))
}

/// A count as a Parquet `int64`.
fn count(n: u64) -> Result<i64> {
    i64::try_from(n).with_context(|| format!("a count too large for int64 ({n})"))
}

/// Unix seconds as RFC 3339 UTC, e.g. `2025-01-31T09:00:00Z`.
fn utc_time(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

/// The UTC date of unix seconds, e.g. `2025-01-31`.
fn utc_date(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(
        |_| secs.to_string(),
        |t| t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string(),
    )
}

/// An upstream time as RFC 3339 UTC; text that does not parse is passed on as sent.
fn utc_time_text(text: &str) -> String {
    text.parse::<jiff::Timestamp>()
        .map_or_else(|_| text.to_string(), |t| t.to_string())
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
