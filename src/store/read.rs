//! Reads: region state for planning, full-text search, and small helpers for the
//! runner, metrics and tests.

use rusqlite::{OptionalExtension, params};

#[cfg(test)]
use super::StatsRow;
use super::sql;
use super::{RegionState, RunKind, RunRecord, SearchHit, Store, StoreError, VideoRecord};

impl Store {
    /// When `region`'s category names were last stored, if ever.
    pub(crate) fn categories_fetched_at(&self, region: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached("SELECT categories_fetched_at FROM region_state WHERE region = ?1")
            .and_then(|mut stmt| stmt.query_row([region], |row| row.get(0)).optional())
            .map(Option::flatten)
            .map_err(self.err(format!(
                "reading when the categories of {region} were fetched"
            )))
    }

    /// The categories of `region` whose chart the upstream said it does not have, since
    /// its category names were last stored ([`Store::mark_chart_missing`]).
    pub(crate) fn missing_charts(&self, region: &str) -> Result<Vec<u32>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT m.category FROM missing_charts AS m
                 JOIN regions AS g ON g.num = m.region
                 WHERE g.code = ?1 ORDER BY m.category",
            )?;
            let rows = stmt.query_map([region], |row| row.get(0))?;
            rows.collect::<rusqlite::Result<Vec<u32>>>()
        })()
        .map_err(self.err(format!("reading the missing charts of {region}")))
    }

    #[cfg(test)]
    /// The category names (id, title) stored for `region`, by id.
    pub(crate) fn categories(&self, region: &str) -> Result<Vec<(String, String)>, StoreError> {
        (|| {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT id, title FROM categories WHERE region = ?1 ORDER BY id")?;
            let rows = stmt.query_map([region], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the categories of {region}")))
    }

    /// Every region the store has seen, least recently completed first (never
    /// completed before all others), which is the order a run should take them in.
    pub(crate) fn region_states(&self) -> Result<Vec<RegionState>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT region, last_complete_at, last_attempt_at, last_status FROM region_state
                 ORDER BY last_complete_at IS NOT NULL, last_complete_at, region",
            )?;
            let rows = stmt.query_map([], |row| {
                Ok(RegionState {
                    region: row.get(0)?,
                    last_complete_at: row.get(1)?,
                    last_attempt_at: row.get(2)?,
                    last_status: row.get(3)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("reading region state"))
    }

    /// How many distinct videos are stored.
    pub fn videos_count(&self) -> Result<u64, StoreError> {
        self.count("SELECT count(*) FROM videos", [], "counting videos")
    }

    #[cfg(test)]
    /// How many trending positions `run_id` stored (all regions).
    pub(crate) fn trending_count(&self, run_id: &str) -> Result<u64, StoreError> {
        self.count(
            "SELECT count(*) FROM run_nums AS r
             JOIN fetches AS f ON f.run = r.num AND f.search = 0 AND f.chart = 0
             JOIN places AS p ON p.fetch = f.num
             WHERE r.run_id = ?1",
            [run_id],
            "counting trending positions",
        )
    }

    fn count<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        context: &str,
    ) -> Result<u64, StoreError> {
        self.conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.query_row(params, |row| row.get::<_, i64>(0)))
            // count(*) is never negative.
            .map(|n| n.max(0) as u64)
            .map_err(self.err(context))
    }

    #[cfg(test)]
    /// The most recently started run, if any.
    pub(crate) fn last_run(&self) -> Result<Option<RunRecord>, StoreError> {
        self.one_run(
            "SELECT run_id, kind, started_at, ended_at, status, units, calls, stop_reason,
                    duration_us
             FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1",
            [],
            "reading the last run",
        )
    }

    /// The run of `kind` that ended last, if any has ended.
    pub(crate) fn last_finished_run(&self, kind: RunKind) -> Result<Option<RunRecord>, StoreError> {
        self.one_run(
            "SELECT run_id, kind, started_at, ended_at, status, units, calls, stop_reason,
                    duration_us
             FROM runs WHERE kind = ?1 AND ended_at IS NOT NULL
             ORDER BY ended_at DESC, rowid DESC LIMIT 1",
            [kind.as_str()],
            "reading the last finished run",
        )
    }

    fn one_run<P: rusqlite::Params>(
        &self,
        sql: &str,
        params: P,
        context: &str,
    ) -> Result<Option<RunRecord>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql)?;
            stmt.query_row(params, |row| {
                let kind: String = row.get(1)?;
                Ok(RunRecord {
                    run_id: row.get(0)?,
                    // The CHECK constraint admits only the two words.
                    kind: RunKind::from_db(&kind).unwrap_or(RunKind::Run),
                    started_at: row.get(2)?,
                    ended_at: row.get(3)?,
                    status: row.get(4)?,
                    units: row.get::<_, Option<i64>>(5)?.map(|n| n.max(0) as u64),
                    calls: row.get::<_, Option<i64>>(6)?.map(|n| n.max(0) as u64),
                    stop_reason: row.get(7)?,
                    duration_us: row.get::<_, Option<i64>>(8)?.map(|n| n.max(0) as u64),
                })
            })
            .optional()
        })()
        .map_err(self.err(context))
    }

    /// The latest metadata stored for a video.
    pub fn video(&self, video_id: &str) -> Result<Option<VideoRecord>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT id, title, description, channel_id, channel_title, published_at,
                        category_id, tags, default_language, default_audio_language,
                        duration_s, live_broadcast_content, thumbnail_url, region_restriction,
                        view_count, like_count, comment_count
                 FROM videos WHERE id = ?1",
            )?;
            stmt.query_row([video_id], |row| {
                let tags = tags_at(row, 7)?;
                Ok(VideoRecord {
                    id: row.get(0)?,
                    title: row.get(1)?,
                    description: row.get(2)?,
                    channel_id: row.get(3)?,
                    channel_title: row.get(4)?,
                    published_at: row.get(5)?,
                    category_id: row.get(6)?,
                    tags,
                    default_language: row.get(8)?,
                    default_audio_language: row.get(9)?,
                    duration_s: row.get(10)?,
                    live_broadcast_content: row.get(11)?,
                    thumbnail_url: row.get(12)?,
                    region_restriction: row.get(13)?,
                    view_count: row.get(14)?,
                    like_count: row.get(15)?,
                    comment_count: row.get(16)?,
                })
            })
            .optional()
        })()
        .map_err(self.err(format!("reading video {video_id}")))
    }

    #[cfg(test)]
    /// A video's counts over time, oldest fetch first.
    pub(crate) fn video_stats(&self, video_id: &str) -> Result<Vec<StatsRow>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::VIDEO_HISTORY)?;
            let rows = stmt.query_map([video_id], |row| {
                Ok(StatsRow {
                    fetched_at: row.get(0)?,
                    run_id: row.get(1)?,
                    view_count: row.get(2)?,
                    like_count: row.get(3)?,
                    comment_count: row.get(4)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the counts of video {video_id}")))
    }

    /// Full-text search of the stored videos, best match first.
    ///
    /// `query` is FTS5 syntax: words (all must match), `"a phrase"`, `OR`, `NOT`,
    /// `prefix*`, `title:word`. Ranking is bm25 with a title match weighing most, then
    /// tags, channel, description. With `region`, only videos seen in that region's
    /// trending chart or searches. A query FTS5 cannot parse is
    /// [`StoreError::BadQuery`], so the CLI can answer with a usage error.
    pub fn search(
        &self,
        query: &str,
        region: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SearchHit>, StoreError> {
        self.search_with(query, region, limit, FEW_MATCHES, true)
    }

    /// [`Store::search`], with `few_matches` the number of matches below which the
    /// region test is done per match, and `use_lists` whether a common word may be
    /// ranked from its kept best matches (`store::best_matches`) instead of every match.
    pub(crate) fn search_with(
        &self,
        query: &str,
        region: Option<&str>,
        limit: u32,
        few_matches: i64,
        use_lists: bool,
    ) -> Result<Vec<SearchHit>, StoreError> {
        if query.trim().is_empty() {
            return Err(StoreError::BadQuery {
                query: query.to_string(),
                message: "the query is empty".to_string(),
            });
        }
        let context = format!("searching for {query:?}");
        // The statement prepared, so an SQLITE_ERROR while stepping comes from FTS5
        // parsing the MATCH expression: the person's query, not the database.
        let bad_query = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::Unknown) => StoreError::BadQuery {
                query: query.to_string(),
                message: fts_message(&e),
            },
            _ => self.err(context.clone())(e),
        };
        // Two steps: rank every match by bm25 and keep the best `limit` (only numbers
        // go through the sorter), then build the few hits shown. Computing snippets
        // and regions inside the ranking query would do it for every match.
        // With a region, a query matching few videos checks each match's regions;
        // one matching many filters through the region's video list, read once.
        // A common word alone: rank its kept best matches when they prove the answer.
        let best = match super::best_matches::single_word(query) {
            Some(word) if use_lists => super::best_matches::best(&self.conn, &word, region, limit)
                .map_err(self.err(context.clone()))?,
            _ => None,
        };
        if let Some(nums) = best {
            return self.search_hits(query, nums, &bad_query);
        }
        let rank_sql = match region {
            Some(_) => {
                let matches: i64 = self
                    .conn
                    .prepare_cached(sql::SEARCH_MATCHES_UP_TO)
                    .map_err(self.err(context.clone()))?
                    .query_row(params![query, few_matches], |r| r.get(0))
                    .map_err(bad_query)?;
                if matches < few_matches {
                    sql::SEARCH_RANK_FEW
                } else {
                    sql::SEARCH_RANK
                }
            }
            None => sql::SEARCH_RANK,
        };
        let nums: Vec<i64> = {
            let mut stmt = self
                .conn
                .prepare_cached(rank_sql)
                .map_err(self.err(context.clone()))?;
            let mut rows = stmt
                .query(params![query, region, i64::from(limit)])
                .map_err(bad_query)?;
            let mut nums = Vec::new();
            while let Some(row) = rows.next().map_err(bad_query)? {
                nums.push(row.get(0).map_err(self.err(context.clone()))?);
            }
            nums
        };
        self.search_hits(query, nums, &bad_query)
    }

    /// The hits shown for the ranked videos `nums` of a search for `query`.
    fn search_hits(
        &self,
        query: &str,
        nums: Vec<i64>,
        bad_query: &dyn Fn(rusqlite::Error) -> StoreError,
    ) -> Result<Vec<SearchHit>, StoreError> {
        let context = format!("searching for {query:?}");
        let mut stmt = self
            .conn
            .prepare_cached(sql::SEARCH_HIT)
            .map_err(self.err(context.clone()))?;
        let mut hits = Vec::with_capacity(nums.len());
        for num in nums {
            let hit = stmt
                .query_row(params![query, num], |row| {
                    let regions: Option<String> = row.get(6)?;
                    Ok(SearchHit {
                        video_id: row.get(0)?,
                        title: row.get(1)?,
                        channel_title: row.get(2)?,
                        snippet: row.get::<_, Option<String>>(3)?.unwrap_or_default(),
                        view_count: row.get(4)?,
                        published_at: row.get(5)?,
                        regions: regions
                            .map(|r| r.split(',').map(str::to_string).collect())
                            .unwrap_or_default(),
                    })
                })
                .map_err(bad_query)?;
            hits.push(hit);
        }
        Ok(hits)
    }
}

/// Below this many matches, `search --region` looks each match's regions up rather
/// than reading the region's video list (tens of thousands of rows on a year): where
/// the two cost about the same, at about a microsecond a seek against a tenth of one
/// per listed video.
const FEW_MATCHES: i64 = 2_000;

/// The text of an FTS5 error without rusqlite's wrapping, e.g.
/// `fts5: syntax error near "OR"`.
fn fts_message(e: &rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(_, Some(message)) => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
/// One place of a chart as [`Store::chart_at`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChartPlace {
    pub(crate) rank: u32,
    pub(crate) video_id: String,
    pub(crate) view_count: Option<i64>,
    pub(crate) like_count: Option<i64>,
    pub(crate) comment_count: Option<i64>,
    /// Unix seconds.
    pub(crate) fetched_at: i64,
}

#[cfg(test)]
/// One place of a video in a chart or a search, as [`Store::video_places`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VideoPlace {
    /// Unix seconds.
    pub(crate) fetched_at: i64,
    pub(crate) region: String,
    /// The configured search's name; `None` for the trending chart.
    pub(crate) search_name: Option<String>,
    pub(crate) rank: u32,
}

impl Store {
    #[cfg(test)]
    /// `region`'s trending chart as it stood at `at` (unix seconds): its newest fetch
    /// at or before then, by rank. Empty when there is none.
    pub(crate) fn chart_at(&self, region: &str, at: i64) -> Result<Vec<ChartPlace>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::CHART_AT)?;
            let rows = stmt.query_map(params![region, at], |row| {
                Ok(ChartPlace {
                    rank: row.get(0)?,
                    video_id: row.get(1)?,
                    view_count: row.get(2)?,
                    like_count: row.get(3)?,
                    comment_count: row.get(4)?,
                    fetched_at: row.get(5)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the chart of {region}")))
    }

    #[cfg(test)]
    /// A video's rank history: every place it took in a chart or a search, oldest
    /// first.
    pub(crate) fn video_places(&self, video_id: &str) -> Result<Vec<VideoPlace>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::VIDEO_PLACES)?;
            let rows = stmt.query_map([video_id], |row| {
                Ok(VideoPlace {
                    fetched_at: row.get(0)?,
                    region: row.get(1)?,
                    search_name: row.get(2)?,
                    rank: row.get(3)?,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the places of video {video_id}")))
    }

    #[cfg(test)]
    /// Every region with its newest trending fetch (unix seconds; `None` when it has
    /// only searches), by region code.
    pub(crate) fn newest_fetches(&self) -> Result<Vec<(String, Option<i64>)>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::NEWEST_FETCHES)?;
            let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err("reading the newest fetch of each region"))
    }
}

/// A video's places in one chart of one region, as [`Store::video_chart_places`]
/// reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartSpan {
    pub region: String,
    /// The category id; `None` for the overall chart.
    pub chart: Option<u32>,
    /// Unix seconds.
    pub first_seen: i64,
    pub last_seen: i64,
    pub best_rank: u32,
    /// Fetches of the chart that held the video.
    pub fetches: u64,
}

/// Where a point of a video's counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountSource {
    Chart,
    Search,
    Follow,
}

impl CountSource {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CountSource::Chart => "chart",
            CountSource::Search => "search",
            CountSource::Follow => "follow",
        }
    }
}

/// One point of a video's counts over time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountPoint {
    /// Unix seconds.
    pub at: i64,
    pub views: Option<i64>,
    pub likes: Option<i64>,
    pub comments: Option<i64>,
    pub source: CountSource,
}

impl Store {
    /// A video's places per region and chart (the overall chart first in each
    /// region, then categories by id): first and last seen, best rank, fetches.
    pub fn video_chart_places(&self, video_id: &str) -> Result<Vec<ChartSpan>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::VIDEO_CHART_PLACES)?;
            let rows = stmt.query_map([video_id], |row| {
                let chart: u32 = row.get(1)?;
                Ok(ChartSpan {
                    region: row.get(0)?,
                    chart: (chart != 0).then_some(chart),
                    first_seen: row.get(2)?,
                    last_seen: row.get(3)?,
                    best_rank: row.get(4)?,
                    fetches: row.get::<_, i64>(5)?.max(0) as u64,
                })
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the chart places of video {video_id}")))
    }

    /// A video's counts over time, oldest first, each with its source.
    pub fn video_counts(&self, video_id: &str) -> Result<Vec<CountPoint>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(sql::VIDEO_COUNTS)?;
            let rows = stmt.query_map([video_id], |row| {
                let source: String = row.get(4)?;
                Ok(CountPoint {
                    at: row.get(0)?,
                    views: row.get(1)?,
                    likes: row.get(2)?,
                    comments: row.get(3)?,
                    source: match source.as_str() {
                        "search" => CountSource::Search,
                        "follow" => CountSource::Follow,
                        _ => CountSource::Chart,
                    },
                })
            })?;
            let mut points = rows.collect::<rusqlite::Result<Vec<CountPoint>>>()?;
            // One sample per (time, source): a fetch that placed the video on several
            // charts, or regions fetched in the same second, saw it once. The rows come
            // by time, so the copies of a sample share a run of equal times.
            let mut kept: Vec<CountPoint> = Vec::with_capacity(points.len());
            for point in points.drain(..) {
                let copy = kept
                    .iter()
                    .rev()
                    .take_while(|k| k.at == point.at)
                    .any(|k| k.source == point.source);
                if !copy {
                    kept.push(point);
                }
            }
            Ok(kept)
        })()
        .map_err(self.err(format!("reading the counts of video {video_id}")))
    }

    /// When a follow-up last found `video_id` missing upstream (gone or private), if
    /// it is marked so.
    pub fn video_removed_at(&self, video_id: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached("SELECT removed_at FROM videos WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([video_id], |row| row.get(0)).optional())
            .map(Option::flatten)
            .map_err(self.err(format!("reading whether video {video_id} was removed")))
    }
}

/// The JSON array of tags in column `idx` (NULL when the upstream sent none).
pub(super) fn tags_at(
    row: &rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<Vec<String>>> {
    let Some(json) = row.get::<_, Option<String>>(idx)? else {
        return Ok(None);
    };
    serde_json::from_str(&json).map(Some).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, Box::new(e))
    })
}
