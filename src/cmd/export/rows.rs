//! One row of each export, as each format writes it: CSV cells (text a spreadsheet
//! would run made inert), JSON objects and Parquet cells, and the times and counts
//! they share.

use std::borrow::Cow;
use std::io::Write;

use serde::Serialize;

use crate::output::text::visible;
use crate::store::{ChartHistoryRow, CountRow, ExportRow, methodology_at};

use super::{CountJson, RowJson};

pub(super) fn write_count_csv<W: Write>(
    csv: &mut csv::Writer<W>,
    row: &CountRow,
) -> csv::Result<()> {
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

pub(super) fn count_json(row: &CountRow) -> CountJson<'_> {
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
pub(super) struct HistoryJson<'a> {
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

pub(super) fn history_json(row: &ChartHistoryRow) -> HistoryJson<'_> {
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

pub(super) fn write_history_csv<W: Write>(
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
pub(super) struct Shown {
    /// A terminal: control characters are shown escaped ([`visible`]).
    pub(super) terminal: bool,
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
pub(super) fn inert_cell(text: &str) -> Cow<'_, str> {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        Cow::Owned(format!("'{text}"))
    } else {
        Cow::Borrowed(text)
    }
}

pub(super) fn write_csv<W: Write>(
    csv: &mut csv::Writer<W>,
    row: &ExportRow,
    shown: Shown,
) -> csv::Result<()> {
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

pub(super) fn json_row(row: &ExportRow) -> RowJson<'_> {
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

/// Unix seconds as RFC 3339 UTC, e.g. `2025-01-31T09:00:00Z`.
pub(super) fn utc_time(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(|_| secs.to_string(), |t| t.to_string())
}

/// The UTC date of unix seconds, e.g. `2025-01-31`.
pub(super) fn utc_date(secs: i64) -> String {
    jiff::Timestamp::from_second(secs).map_or_else(
        |_| secs.to_string(),
        |t| t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string(),
    )
}

/// An upstream time as RFC 3339 UTC; text that does not parse is passed on as sent.
pub(super) fn utc_time_text(text: &str) -> String {
    text.parse::<jiff::Timestamp>()
        .map_or_else(|_| text.to_string(), |t| t.to_string())
}
