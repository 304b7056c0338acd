//! Reading the trending snapshots out, one row per (fetch, region, chart, rank), or
//! one per (video, region, chart, UTC day), or the counts series, streamed: a row is
//! handed to the caller as SQLite steps to it, so a year exports in the memory of one
//! row (of one day of one chart, per day).

use std::collections::HashMap;

use rusqlite::params;

use super::{Store, StoreError, sql};

/// Which fetches to export: their start between `since` and `until`, inclusive (unix
/// seconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExportSpan {
    pub(crate) since: i64,
    pub(crate) until: i64,
}

/// One trending place with the video's metadata and the counts that fetch saw.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExportRow {
    pub(crate) video_id: String,
    /// When the fetch began (unix seconds): `trending_date` is its UTC date.
    pub(crate) fetch_started_at: i64,
    pub(crate) title: String,
    pub(crate) channel_title: String,
    /// The channel's id (`UC…`): titles are not unique, ids are.
    pub(crate) channel_id: String,
    pub(crate) category_id: Option<String>,
    /// As the upstream sent it (RFC 3339).
    pub(crate) published_at: String,
    pub(crate) tags: Option<Vec<String>>,
    pub(crate) view_count: Option<i64>,
    pub(crate) like_count: Option<i64>,
    pub(crate) comment_count: Option<i64>,
    pub(crate) thumbnail_url: Option<String>,
    pub(crate) description: String,
    pub(crate) region: String,
    pub(crate) rank: u32,
    /// When this place's page was stored (unix seconds).
    pub(crate) fetched_at: i64,
    pub(crate) category_title: Option<String>,
    pub(crate) duration_s: Option<i64>,
    /// The category id of the chart; `None` for the overall chart.
    pub(crate) chart: Option<u32>,
    /// A follow-up found the video gone or private (and it has not charted since).
    pub(crate) removed: bool,
}

/// How many rows of a chart an export keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ExportGrain {
    /// Every place of every fetch.
    #[default]
    Fetch,
    /// One row per (video, region, chart, UTC day): the day's last fetch of the video,
    /// the grain of the public trending datasets.
    Day,
}

/// One sample of a video's counts, for `export --counts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountRow {
    pub(crate) video_id: String,
    /// Unix seconds.
    pub(crate) at: i64,
    pub(crate) views: Option<i64>,
    pub(crate) likes: Option<i64>,
    pub(crate) comments: Option<i64>,
    /// `chart`, `search` or `follow`.
    pub(crate) source: &'static str,
}

/// One place of a row of [`sql::EXPORT_REGION`] or [`sql::EXPORT_FETCH`], of `region`'s
/// chart `chart` (0: the overall chart).
fn place(row: &rusqlite::Row<'_>, region: &str, chart: u32) -> rusqlite::Result<ExportRow> {
    let tags = super::read::tags_at(row, 6)?;
    Ok(ExportRow {
        video_id: row.get(0)?,
        fetch_started_at: row.get(1)?,
        title: row.get(2)?,
        channel_title: row.get(3)?,
        channel_id: row.get(17)?,
        category_id: row.get(4)?,
        published_at: row.get(5)?,
        tags,
        view_count: row.get(7)?,
        like_count: row.get(8)?,
        comment_count: row.get(9)?,
        thumbnail_url: row.get(10)?,
        description: row.get(11)?,
        region: region.to_owned(),
        rank: row.get(12)?,
        fetched_at: row.get(13)?,
        category_title: row.get(14)?,
        duration_s: row.get(15)?,
        chart: (chart != 0).then_some(chart),
        removed: row.get::<_, Option<i64>>(16)?.is_some(),
    })
}

/// The UTC day of unix seconds, as a day number.
fn day_of(secs: i64) -> i64 {
    secs.div_euclid(86_400)
}

impl Store {
    /// Every region that has snapshots, by code.
    pub(crate) fn regions(&self) -> Result<Vec<String>, StoreError> {
        (|| {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT code FROM regions ORDER BY code")?;
            let rows = stmt.query_map([], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
        })()
        .map_err(self.err("listing the regions"))
    }

    #[cfg(test)]
    /// Hands each chart place of `regions` (in that order; each region's overall chart
    /// first, then its category charts by id; each chart's fetches oldest first, ranks
    /// in order) within `span` to `each`, and returns how many. Stops at the first
    /// error `each` returns.
    pub(crate) fn export<E: From<StoreError>>(
        &self,
        regions: &[String],
        span: ExportSpan,
        each: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        self.export_charts(regions, None, span, ExportGrain::Fetch, each)
    }

    /// The (search, chart) lists `region` has snapshots of.
    fn region_lists(&self, region: &str) -> Result<Vec<(i64, u32)>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::REGION_LISTS)?;
            let rows = stmt.query_map([region], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("listing the charts of {region}")))
    }

    /// The charts (0 for the overall chart, else a category id) that `regions` have
    /// fetches of, in order.
    pub(crate) fn charts_of(&self, regions: &[String]) -> Result<Vec<u32>, StoreError> {
        let mut charts = Vec::new();
        for region in regions {
            for (search, chart) in self.region_lists(region)? {
                if search == 0 && !charts.contains(&chart) {
                    charts.push(chart);
                }
            }
        }
        charts.sort_unstable();
        Ok(charts)
    }

    /// [`Store::export`] of the charts `charts` only (0 for the overall chart, else a
    /// category id; all when `None`), at `grain`.
    pub(crate) fn export_charts<E: From<StoreError>>(
        &self,
        regions: &[String],
        charts: Option<&[u32]>,
        span: ExportSpan,
        grain: ExportGrain,
        mut each: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut count = 0u64;
        for region in regions {
            let lists = self.region_lists(region)?;
            let wanted = lists
                .iter()
                .filter(|(search, chart)| *search == 0 && charts.is_none_or(|c| c.contains(chart)))
                .map(|(_, chart)| *chart);
            for chart in wanted {
                count += self.export_chart(region, chart, span, grain, &mut each)?;
            }
        }
        Ok(count)
    }

    fn export_chart<E: From<StoreError>>(
        &self,
        region: &str,
        chart: u32,
        span: ExportSpan,
        grain: ExportGrain,
        each: &mut impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let context = format!("exporting the chart places of {region}");
        let mut stmt = self
            .conn
            .prepare_cached(sql::EXPORT_REGION)
            .map_err(self.err(context.clone()))?;
        let mut rows = stmt
            .query(params![region, span.since, span.until, chart])
            .map_err(self.err(context.clone()))?;
        let mut count = 0u64;
        // Per day: the day being read, and each video's row of its last fetch so far.
        let mut day: Option<i64> = None;
        let mut kept: HashMap<String, ExportRow> = HashMap::new();
        let flush = |kept: &mut HashMap<String, ExportRow>,
                     each: &mut dyn FnMut(&ExportRow) -> Result<(), E>|
         -> Result<u64, E> {
            let mut rows: Vec<ExportRow> = kept.drain().map(|(_, r)| r).collect();
            rows.sort_by_key(|r| (r.fetch_started_at, r.rank));
            for row in &rows {
                each(row)?;
            }
            Ok(rows.len() as u64)
        };
        while let Some(row) = rows.next().map_err(self.err(context.clone()))? {
            let export = place(row, region, chart).map_err(self.err(context.clone()))?;
            match grain {
                ExportGrain::Fetch => {
                    each(&export)?;
                    count += 1;
                }
                ExportGrain::Day => {
                    let today = day_of(export.fetch_started_at);
                    if day.is_some_and(|d| d != today) {
                        count += flush(&mut kept, each)?;
                    }
                    day = Some(today);
                    // Fetches come oldest first: the last one of the day wins.
                    kept.insert(export.video_id.clone(), export);
                }
            }
        }
        count += flush(&mut kept, each)?;
        Ok(count)
    }

    /// Hands each place of the chart fetch `fetch` (a number of `fetches`) to `each`,
    /// rank by rank, as [`Store::export_charts`] writes it; returns how many.
    pub(crate) fn export_fetch<E: From<StoreError>>(
        &self,
        fetch: i64,
        region: &str,
        chart: u32,
        mut each: impl FnMut(&ExportRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let context = format!("exporting the chart places of fetch {fetch} of {region}");
        let mut stmt = self
            .conn
            .prepare_cached(sql::EXPORT_FETCH)
            .map_err(self.err(context.clone()))?;
        let mut rows = stmt
            .query(params![fetch, region])
            .map_err(self.err(context.clone()))?;
        let mut count = 0u64;
        while let Some(row) = rows.next().map_err(self.err(context.clone()))? {
            each(&place(row, region, chart).map_err(self.err(context.clone()))?)?;
            count += 1;
        }
        Ok(count)
    }

    /// Hands every counts sample within `span` to `each`, one per (video, time,
    /// source): the places of `regions`' charts and searches, oldest first, then the
    /// follow-ups of the videos seen in those regions. Returns how many.
    pub(crate) fn export_counts<E: From<StoreError>>(
        &self,
        regions: &[String],
        span: ExportSpan,
        mut each: impl FnMut(&CountRow) -> Result<(), E>,
    ) -> Result<u64, E> {
        let mut count = 0u64;
        let sample = |row: &rusqlite::Row<'_>, source: &'static str| {
            Ok(CountRow {
                video_id: row.get(0)?,
                at: row.get(1)?,
                views: row.get(2)?,
                likes: row.get(3)?,
                comments: row.get(4)?,
                source,
            })
        };
        let codes = serde_json::Value::from(regions.to_vec()).to_string();
        let context = "exporting the counts of the charts and searches";
        let mut stmt = self
            .conn
            .prepare_cached(sql::EXPORT_PLACE_COUNTS)
            .map_err(self.err(context))?;
        let mut rows = stmt
            .query(params![span.since, span.until, codes])
            .map_err(self.err(context))?;
        let mut last: Option<CountRow> = None;
        while let Some(row) = rows.next().map_err(self.err(context))? {
            let row = (|| {
                let source = match row.get::<_, String>(5)?.as_str() {
                    "search" => "search",
                    _ => "chart",
                };
                sample(row, source)
            })()
            .map_err(self.err(context))?;
            // The copies of one sample are adjacent: the first (its earliest fetch,
            // best rank) stands for them.
            if last.as_ref().is_some_and(|l| {
                l.at == row.at && l.source == row.source && l.video_id == row.video_id
            }) {
                continue;
            }
            each(&row)?;
            count += 1;
            last = Some(row);
        }
        let context = "exporting the follow-ups' counts";
        let mut stmt = self
            .conn
            .prepare_cached(sql::EXPORT_FOLLOW_COUNTS)
            .map_err(self.err(context))?;
        let mut rows = stmt
            .query(params![span.since, span.until, codes])
            .map_err(self.err(context))?;
        while let Some(row) = rows.next().map_err(self.err(context))? {
            let row = sample(row, "follow").map_err(self.err(context))?;
            each(&row)?;
            count += 1;
        }
        Ok(count)
    }
}
