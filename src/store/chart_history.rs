//! The chart history: one row per (video, region, chart) saying how long the video
//! stayed on the chart and how high it got, for `export --per video` (the view
//! `chart_history` answers the same in SQL).
//!
//! The plan: per region, the chart fetches within the span are read once from their
//! index (`fetches_by_chart_time`), each numbered in its chart's order; then the
//! region's videos are walked in order (`video_regions_by_region`) and each video's
//! places read from `places_by_video`, so a video's row is made from its own places
//! alone, never a scan of other videos' snapshots. A span holding less than half of
//! the region's fetches (`--since 30d` of a year) finds its videos through its own
//! fetches' places instead (the primary key of `places`), and reads each one's places
//! from the span's first fetch to its last only. Memory holds the region's fetch
//! numbers and one video's places: flat in the number of videos, however long the
//! history.

use std::collections::{BTreeMap, HashMap};

use rusqlite::params;

use super::sql::current_fetch;
use super::{ExportSpan, Store, StoreError};

/// One video's time on one chart of one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChartHistoryRow {
    pub(crate) video_id: String,
    pub(crate) title: String,
    pub(crate) channel_title: String,
    /// The channel's id (`UC…`): titles are not unique, ids are.
    pub(crate) channel_id: String,
    pub(crate) category_id: Option<String>,
    pub(crate) region: String,
    /// The category id of the chart; `None` for the overall chart.
    pub(crate) chart: Option<u32>,
    /// Unix seconds of its first and last place.
    pub(crate) first_seen: i64,
    pub(crate) last_seen: i64,
    /// UTC days with at least one fetch placing it (by the fetch's start).
    pub(crate) days_on_chart: u64,
    /// Fetches of the chart placing it.
    pub(crate) fetches: u64,
    pub(crate) best_rank: u32,
    /// When it first stood at `best_rank` (unix seconds).
    pub(crate) best_rank_at: i64,
    /// Runs of consecutive fetches of the chart placing it: on, off for one fetch, on
    /// again is 2.
    pub(crate) entries: u64,
    /// The counts at its last place.
    pub(crate) view_count: Option<i64>,
    pub(crate) like_count: Option<i64>,
    pub(crate) comment_count: Option<i64>,
}

/// The region's current chart fetches within a span (`fetch_slots`, docs/schema.md):
/// (chart, its place in the chart's order, when it began).
const CHART_FETCHES: &str = concat!(
    "
SELECT f.num, f.chart, f.fetched_at
FROM fetches AS f
WHERE f.region = (SELECT num FROM regions WHERE code = ?1)
  AND f.search = 0 AND f.fetched_at >= ?2 AND f.fetched_at <= ?3
  AND ",
    current_fetch!(),
    "
ORDER BY f.chart, f.fetched_at, f.num"
);

/// Every place of every video seen in the region, video by video, in fetch order.
const REGION_VIDEO_PLACES: &str = "
SELECT v.num, v.id, v.title, v.channel_title, v.category_id,
       p.fetch, p.rank, p.offset_s, p.views, p.likes, p.comments, v.channel_id
FROM video_regions AS r
JOIN videos AS v ON v.num = r.video
JOIN places AS p ON p.video = r.video
WHERE r.region = (SELECT num FROM regions WHERE code = ?1)
ORDER BY r.video, p.fetch";

/// The places of the videos placed by the region's chart fetches within a span, video
/// by video, in fetch order, from the first to the last fetch of the span (?2, ?3:
/// unix seconds; ?4, ?5: their fetch numbers): for a span that holds a small part of
/// the history, so that a month reads the month's places and the places of the
/// month's videos in it, not every place the region ever held.
const SPAN_VIDEO_PLACES: &str = "
WITH span_fetches AS (
    SELECT f.num FROM fetches AS f
    WHERE f.region = (SELECT num FROM regions WHERE code = ?1)
      AND f.search = 0 AND f.fetched_at >= ?2 AND f.fetched_at <= ?3
), span_videos AS (
    SELECT DISTINCT p.video FROM span_fetches AS s JOIN places AS p ON p.fetch = s.num
)
SELECT v.num, v.id, v.title, v.channel_title, v.category_id,
       p.fetch, p.rank, p.offset_s, p.views, p.likes, p.comments, v.channel_id
FROM span_videos AS s
JOIN videos AS v ON v.num = s.video
JOIN places AS p ON p.video = s.video AND p.fetch >= ?4 AND p.fetch <= ?5
ORDER BY s.video, p.fetch";

/// How many chart fetches the region holds, whatever their time.
const REGION_CHART_FETCHES: &str = "
SELECT count(*) FROM fetches
WHERE region = (SELECT num FROM regions WHERE code = ?1) AND search = 0";

/// The region's chart fetches within a span, read once: those of the charts asked for
/// by number, and how many fetches of any chart the span holds, from which to which
/// number.
#[derive(Debug, Default)]
struct SpanFetches {
    wanted: HashMap<i64, ChartFetch>,
    count: u64,
    first: i64,
    last: i64,
}

/// How [`Store::export_chart_history_by`] finds a region's videos.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Walk {
    /// Every video the region holds ([`REGION_VIDEO_PLACES`]).
    Region,
    /// The videos the span's fetches placed ([`SPAN_VIDEO_PLACES`]).
    Span,
}

/// A chart fetch: its chart, its number in the chart's order, when it began.
#[derive(Debug, Clone, Copy)]
struct ChartFetch {
    chart: u32,
    ord: u64,
    started: i64,
}

/// One place of a video on a chart.
#[derive(Debug, Clone, Copy)]
struct Place {
    /// The fetch's number in its chart's order.
    ord: u64,
    /// When the fetch began, and when this place's page arrived (unix seconds).
    started: i64,
    at: i64,
    rank: u32,
    views: Option<i64>,
    likes: Option<i64>,
    comments: Option<i64>,
}

/// One video's places on one chart, gathered.
#[derive(Debug, Default)]
struct Gathered {
    places: Vec<Place>,
}

impl Gathered {
    /// The row of these places, `None` for none.
    fn row(mut self, video: &VideoText, region: &str, chart: u32) -> Option<ChartHistoryRow> {
        self.places.sort_unstable_by_key(|p| (p.ord, p.at));
        let first = self.places.first()?;
        let last = self.places.last()?;
        let mut days: Vec<i64> = self
            .places
            .iter()
            .map(|p| p.started.div_euclid(86_400))
            .collect();
        days.sort_unstable();
        days.dedup();
        let best = self
            .places
            .iter()
            .min_by_key(|p| (p.rank, p.at))
            .unwrap_or(first);
        let entries = 1 + self
            .places
            .windows(2)
            .filter(|w| w[1].ord > w[0].ord + 1)
            .count() as u64;
        Some(ChartHistoryRow {
            video_id: video.id.clone(),
            title: video.title.clone(),
            channel_title: video.channel_title.clone(),
            channel_id: video.channel_id.clone(),
            category_id: video.category_id.clone(),
            region: region.to_owned(),
            chart: (chart != 0).then_some(chart),
            first_seen: self.places.iter().map(|p| p.at).min().unwrap_or(first.at),
            last_seen: self.places.iter().map(|p| p.at).max().unwrap_or(last.at),
            days_on_chart: days.len() as u64,
            fetches: self.places.len() as u64,
            best_rank: best.rank,
            best_rank_at: best.at,
            entries,
            view_count: last.views,
            like_count: last.likes,
            comment_count: last.comments,
        })
    }
}

#[derive(Debug, Default)]
struct VideoText {
    id: String,
    title: String,
    channel_title: String,
    channel_id: String,
    category_id: Option<String>,
}

impl Store {
    /// Hands the chart history of `regions` (in that order; within a region, videos in
    /// the order first stored, each video's charts overall first, then by category id)
    /// to `each`, from the chart fetches within `span` of `charts` (0 for the overall
    /// chart; all when `None`). Returns how many rows.
    pub(crate) fn export_chart_history<E: From<StoreError>>(
        &self,
        regions: &[String],
        charts: Option<&[u32]>,
        span: ExportSpan,
        each: impl FnMut(&ChartHistoryRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        self.export_chart_history_by(regions, charts, span, None, each)
    }

    /// [`Store::export_chart_history`], finding each region's videos as `walk` says;
    /// with `None`, through the span's fetches when it holds less than half of the
    /// region's, else through every video of the region.
    pub(crate) fn export_chart_history_by<E: From<StoreError>>(
        &self,
        regions: &[String],
        charts: Option<&[u32]>,
        span: ExportSpan,
        walk: Option<Walk>,
        mut each: impl FnMut(&ChartHistoryRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut count = 0u64;
        for region in regions {
            let context = format!("exporting the chart history of {region}");
            let span_fetches = self
                .chart_fetches(region, charts, span)
                .map_err(|e| self.err(context.as_str())(e))?;
            if span_fetches.wanted.is_empty() {
                continue;
            }
            let walk = match walk {
                Some(walk) => walk,
                None => self
                    .walk_for(region, &span_fetches)
                    .map_err(|e| self.err(context.as_str())(e))?,
            };
            count += self.export_region(region, &span_fetches, span, walk, &mut each)?;
        }
        Ok(count)
    }

    /// How to find the videos of `region`'s places in a span: a span with less than
    /// half of the region's fetches reads its own videos' places within it; a longer
    /// one walks every video of the region, which costs less than finding them through
    /// the span's places.
    fn walk_for(&self, region: &str, span_fetches: &SpanFetches) -> rusqlite::Result<Walk> {
        let all: i64 = self
            .conn
            .prepare_cached(REGION_CHART_FETCHES)
            .and_then(|mut s| s.query_row([region], |r| r.get(0)))?;
        Ok(
            if span_fetches.count.saturating_mul(2) < all.unsigned_abs() {
                Walk::Span
            } else {
                Walk::Region
            },
        )
    }

    /// The chart history of one region, each row to `each`; how many rows.
    fn export_region<E: From<StoreError>>(
        &self,
        region: &str,
        span_fetches: &SpanFetches,
        span: ExportSpan,
        walk: Walk,
        each: &mut impl FnMut(&ChartHistoryRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let context = format!("exporting the chart history of {region}");
        let fetches = &span_fetches.wanted;
        let mut count = 0u64;
        let narrow = walk == Walk::Span;
        let mut stmt = self
            .conn
            .prepare_cached(if narrow {
                SPAN_VIDEO_PLACES
            } else {
                REGION_VIDEO_PLACES
            })
            .map_err(|e| self.err(context.as_str())(e))?;
        let mut rows = if narrow {
            stmt.query(params![
                region,
                span.since,
                span.until,
                span_fetches.first,
                span_fetches.last
            ])
        } else {
            stmt.query(params![region])
        }
        .map_err(|e| self.err(context.as_str())(e))?;
        let mut current: Option<i64> = None;
        let mut video = VideoText::default();
        let mut by_chart: BTreeMap<u32, Gathered> = BTreeMap::new();
        let mut flush =
            |video: &VideoText, by_chart: &mut BTreeMap<u32, Gathered>| -> Result<u64, E> {
                let mut n = 0;
                for (chart, gathered) in std::mem::take(by_chart) {
                    if let Some(row) = gathered.row(video, region, chart) {
                        each(&row)?;
                        n += 1;
                    }
                }
                Ok(n)
            };
        while let Some(row) = rows.next().map_err(|e| self.err(context.as_str())(e))? {
            let (num, fetch): (i64, i64) =
                (|| Ok((row.get(0)?, row.get(5)?)))().map_err(|e| self.err(context.as_str())(e))?;
            if current != Some(num) {
                count += flush(&video, &mut by_chart)?;
                current = Some(num);
                video = video_text(row).map_err(|e| self.err(context.as_str())(e))?;
            }
            // A place in a search, or in a fetch outside the span or the charts asked
            // for.
            let Some(f) = fetches.get(&fetch) else {
                continue;
            };
            let place = place(row, f).map_err(|e| self.err(context.as_str())(e))?;
            by_chart.entry(f.chart).or_default().places.push(place);
        }
        count += flush(&video, &mut by_chart)?;
        Ok(count)
    }

    /// The chart fetches of `region` within `span`, each numbered in its chart's order.
    fn chart_fetches(
        &self,
        region: &str,
        charts: Option<&[u32]>,
        span: ExportSpan,
    ) -> rusqlite::Result<SpanFetches> {
        let mut stmt = self.conn.prepare_cached(CHART_FETCHES)?;
        let mut rows = stmt.query(params![region, span.since, span.until])?;
        let mut out = SpanFetches {
            first: i64::MAX,
            last: i64::MIN,
            ..SpanFetches::default()
        };
        let mut last_chart: Option<u32> = None;
        let mut ord = 0u64;
        while let Some(row) = rows.next()? {
            let num: i64 = row.get(0)?;
            let chart: u32 = row.get(1)?;
            let started: i64 = row.get(2)?;
            if last_chart != Some(chart) {
                last_chart = Some(chart);
                ord = 0;
            }
            ord += 1;
            out.count += 1;
            out.first = out.first.min(num);
            out.last = out.last.max(num);
            if charts.is_none_or(|c| c.contains(&chart)) {
                out.wanted.insert(
                    num,
                    ChartFetch {
                        chart,
                        ord,
                        started,
                    },
                );
            }
        }
        Ok(out)
    }
}

/// Step 11.
pub(crate) const STEP: crate::sqlite::Migration = crate::sqlite::Migration {
    description: "the chart history: how long each video stayed on each chart, how high it got",
    sql: VIEW,
    data: None,
};

/// [`Store::export_chart_history`] in SQL, over the whole file, with its readable
/// twin. `entries` counts the places whose fetch does not follow one placing the video
/// on the same chart.
const VIEW: &str = "
CREATE VIEW chart_history (video_id, region, chart, first_seen, last_seen, days_on_chart,
                           fetches, best_rank, best_rank_at, entries, view_count,
                           like_count, comment_count) AS
WITH chart_fetches AS (
    SELECT num, region, chart, fetched_at,
           row_number() OVER (PARTITION BY region, chart ORDER BY fetched_at, num) AS ord
    FROM fetches WHERE search = 0
), seen AS (
    SELECT p.video, c.region, c.chart, c.fetched_at AS started,
           c.fetched_at + p.offset_s AS at, p.rank, p.views, p.likes, p.comments,
           CASE WHEN lag(c.ord) OVER w = c.ord - 1 THEN 0 ELSE 1 END AS starts,
           row_number() OVER (PARTITION BY p.video, c.region, c.chart
                              ORDER BY p.rank, c.fetched_at + p.offset_s) AS by_rank,
           row_number() OVER (PARTITION BY p.video, c.region, c.chart
                              ORDER BY c.ord DESC) AS by_recency
    FROM places AS p
    JOIN chart_fetches AS c ON c.num = p.fetch
    WINDOW w AS (PARTITION BY p.video, c.region, c.chart ORDER BY c.ord)
)
SELECT v.id, g.code, CAST(nullif(s.chart, 0) AS TEXT), min(s.at), max(s.at),
       count(DISTINCT s.started / 86400), count(*), min(s.rank),
       max(CASE WHEN s.by_rank = 1 THEN s.at END), sum(s.starts),
       max(CASE WHEN s.by_recency = 1 THEN s.views END),
       max(CASE WHEN s.by_recency = 1 THEN s.likes END),
       max(CASE WHEN s.by_recency = 1 THEN s.comments END)
FROM seen AS s
JOIN videos AS v ON v.num = s.video
JOIN regions AS g ON g.num = s.region
GROUP BY s.video, s.region, s.chart;
CREATE VIEW chart_history_utc (video_id, region, chart, first_seen, last_seen,
                               days_on_chart, fetches, best_rank, best_rank_at, entries,
                               view_count, like_count, comment_count) AS
SELECT video_id, region, chart,
       strftime('%Y-%m-%dT%H:%M:%SZ', first_seen, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', last_seen, 'unixepoch'),
       days_on_chart, fetches, best_rank,
       strftime('%Y-%m-%dT%H:%M:%SZ', best_rank_at, 'unixepoch'),
       entries, view_count, like_count, comment_count
FROM chart_history;
";

#[cfg(test)]
mod tests;

/// The video of a row of the places' queries.
fn video_text(row: &rusqlite::Row<'_>) -> rusqlite::Result<VideoText> {
    Ok(VideoText {
        id: row.get(1)?,
        title: row.get(2)?,
        channel_title: row.get(3)?,
        channel_id: row.get(11)?,
        category_id: row.get(4)?,
    })
}

/// The place of a row of the places' queries, in the chart fetch `f`.
fn place(row: &rusqlite::Row<'_>, f: &ChartFetch) -> rusqlite::Result<Place> {
    let offset: i64 = row.get(7)?;
    Ok(Place {
        ord: f.ord,
        started: f.started,
        at: f.started + offset,
        rank: row.get(6)?,
        views: row.get(8)?,
        likes: row.get(9)?,
        comments: row.get(10)?,
    })
}
