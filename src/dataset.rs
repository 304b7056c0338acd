//! The dataset as analysts read it: the columns of `export`'s tables (their names are
//! the CSV header, and with their types the Parquet schema), and each row's Parquet
//! cells. `export` writes them to a file, and the sink (`reports::sink`) one object per
//! chart fetch, so that a table read from either has the same columns and types
//! (docs/commands.md).

use std::io::Write;

use anyhow::{Context, Result};

use crate::output::parquet::{Cell, Column, Kind, Table};
use crate::store::{ChartHistoryRow, CountRow, ExportRow, methodology_at};

/// What `methodology` means, in every table.
const METHODOLOGY: &str = "The id of the latest upstream change of what the numbers or charts \
     mean in force at this row's time (see `trendsync video` and the upstream_changes table); \
     an id, not a date, though it is spelled like the day the change took effect. Null before \
     the first. Compare rows of one methodology only";

/// What `chart` means, in every table.
const CHART: &str = "The chart: null for the overall chart, else its category id (text)";

/// What `channel_id` means, in every table.
const CHANNEL_ID: &str = "The channel's id (UC...): unique, unlike its title";

/// The columns of the chart places, in CSV and Parquet alike: the datasets' columns,
/// then ours.
/// `publish_time` is null where the upstream's text is not a time.
pub(crate) const PLACES_TABLE: [Column; 24] = [
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

/// The columns of `--per video`, in CSV and Parquet alike.
pub(crate) const HISTORY_TABLE: [Column; 18] = [
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

/// The columns of `--counts`: their names are the CSV header, and with their types the
/// Parquet schema.
pub(crate) const COUNTS_TABLE: [Column; 7] = [
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

/// One chart place as a row of [`PLACES_TABLE`].
pub(crate) fn write_place<W: Write + Send>(table: &mut Table<W>, row: &ExportRow) -> Result<()> {
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

/// One video's chart history as a row of [`HISTORY_TABLE`].
pub(crate) fn write_history<W: Write + Send>(
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

/// One counts sample as a row of [`COUNTS_TABLE`].
pub(crate) fn write_count<W: Write + Send>(table: &mut Table<W>, row: &CountRow) -> Result<()> {
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
pub(crate) fn instant(secs: i64) -> Result<jiff::Timestamp> {
    jiff::Timestamp::from_second(secs)
        .with_context(|| format!("the database holds a time out of range ({secs} s)"))
}

/// A count as a Parquet `int64`.
pub(crate) fn count(n: u64) -> Result<i64> {
    i64::try_from(n).with_context(|| format!("a count too large for int64 ({n})"))
}
