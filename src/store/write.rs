//! The write API: each public method is exactly one `BEGIN IMMEDIATE` transaction.
//!
//! Immediate, because a deferred transaction that reads first and then writes can fail
//! with SQLITE_BUSY at the upgrade without the busy handler helping; taking the write
//! lock up front makes concurrent writers simply wait their turn.
//!
//! Times come in typed (`Secs`), and become the integers SQLite keeps only in the SQL.

use rusqlite::{Transaction, TransactionBehavior, params};

use super::{LeasedSlot, RunKind, RunOutcome, Store, StoreError, VideoRecord, compact, follow};
use crate::clock::Secs;
use crate::region_status::RegionStatus;

/// Which list a page of videos belongs to.
enum Listing<'a> {
    /// A chart: the overall one (`category` none) or a category's.
    Chart {
        category: Option<u32>,
    },
    Search {
        name: &'a str,
    },
}

impl Store {
    /// Starts a write transaction that rolls back unless committed.
    pub(super) fn write_tx(&self) -> rusqlite::Result<Transaction<'_>> {
        Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)
    }

    /// Records the start of a run (status `running`). Every page stored afterwards
    /// refers to `run_id`, so this comes first; a duplicate id is an error.
    pub fn begin_run(
        &self,
        run_id: &str,
        kind: RunKind,
        started_at: Secs,
    ) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "INSERT INTO runs (run_id, kind, started_at, status) VALUES (?1, ?2, ?3, ?4)",
                params![
                    run_id,
                    kind.as_str(),
                    started_at.as_i64(),
                    RegionStatus::Running
                ],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("recording the start of run {run_id}")))
    }

    /// Records how a run ended, then checkpoints the WAL ([`Store::checkpoint`]).
    /// [`StoreError::UnknownRun`] if it was never begun.
    pub fn finish_run(&self, run_id: &str, outcome: &RunOutcome) -> Result<(), StoreError> {
        let context = format!("recording the end of run {run_id}");
        let units = to_i64(outcome.units).map_err(self.err(context.clone()))?;
        let calls = to_i64(outcome.calls).map_err(self.err(context.clone()))?;
        let changed = (|| {
            let tx = self.write_tx()?;
            let changed = tx.execute(
                "UPDATE runs SET ended_at = ?2, status = ?3, units = ?4, calls = ?5, stop_reason = ?6,
                                 duration_us = ?7
                 WHERE run_id = ?1",
                params![
                    run_id,
                    outcome.ended_at.as_i64(),
                    outcome.status,
                    units,
                    calls,
                    outcome.stop_reason,
                    i64::try_from(outcome.duration_us).unwrap_or(i64::MAX)
                ],
            )?;
            tx.commit()?;
            Ok(changed)
        })()
        .map_err(self.err(context))?;
        if changed == 0 {
            return Err(StoreError::UnknownRun {
                path: self.path().to_path_buf(),
                run_id: run_id.to_string(),
            });
        }
        // The run's data is committed either way; a failed checkpoint only means the
        // WAL stays longer, which the next checkpoint or clean close fixes.
        if let Err(e) = self.checkpoint() {
            tracing::warn!(error = %crate::error::chain(&e), "WAL checkpoint after the run failed");
        }
        Ok(())
    }

    /// Stores one page of a region's trending chart: each video's latest metadata and
    /// its place in the region's fetch of this run (with the counts seen), at rank `first_rank + index` (ranks start
    /// at 1). Storing the same page again in the same run replaces its positions.
    /// Returns the number of videos stored.
    pub fn store_trending_page(
        &self,
        run_id: &str,
        region: &str,
        first_rank: u32,
        videos: &[VideoRecord],
        fetched_at: Secs,
    ) -> Result<usize, StoreError> {
        self.store_chart_page(run_id, region, None, first_rank, videos, fetched_at)
    }

    /// Stores one page of one of a region's charts: the overall chart (`category`
    /// none) or the chart of a category, each its own fetch in the run. Otherwise as
    /// [`Store::store_trending_page`].
    pub fn store_chart_page(
        &self,
        run_id: &str,
        region: &str,
        category: Option<u32>,
        first_rank: u32,
        videos: &[VideoRecord],
        fetched_at: Secs,
    ) -> Result<usize, StoreError> {
        self.store_chart_page_leased(
            run_id, region, category, first_rank, videos, fetched_at, None,
        )
    }

    /// [`Store::store_chart_page`] for a fetch made under `lease`, when given: its
    /// first page notes the slot (docs/schema.md, `fetch_slots`), in the same
    /// transaction, so that no page of it is ever current before its run finishes it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store_chart_page_leased(
        &self,
        run_id: &str,
        region: &str,
        category: Option<u32>,
        first_rank: u32,
        videos: &[VideoRecord],
        fetched_at: Secs,
        lease: Option<LeasedSlot>,
    ) -> Result<usize, StoreError> {
        let chart = match category {
            Some(c) => format!("category {c} chart"),
            None => "trending".to_owned(),
        };
        self.store_page(
            run_id,
            region,
            Listing::Chart { category },
            first_rank,
            videos,
            fetched_at.as_i64(),
            lease,
        )
        .map_err(self.err(format!(
            "storing {chart} page from rank {first_rank} of {region} for run {run_id}"
        )))
    }

    #[cfg(test)]
    /// Stores one page of a configured search's results, like
    /// [`Store::store_trending_page`] but into `search_results` under `search_name`.
    pub(crate) fn store_search_page(
        &self,
        run_id: &str,
        region: &str,
        search_name: &str,
        first_rank: u32,
        videos: &[VideoRecord],
        fetched_at: Secs,
    ) -> Result<usize, StoreError> {
        self.store_search_page_leased(
            run_id,
            region,
            search_name,
            first_rank,
            videos,
            fetched_at,
            None,
        )
    }

    /// [`Store::store_search_page`] for a fetch made under `lease`, when given, as
    /// [`Store::store_chart_page_leased`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store_search_page_leased(
        &self,
        run_id: &str,
        region: &str,
        search_name: &str,
        first_rank: u32,
        videos: &[VideoRecord],
        fetched_at: Secs,
        lease: Option<LeasedSlot>,
    ) -> Result<usize, StoreError> {
        let listing = Listing::Search { name: search_name };
        self.store_page(
            run_id,
            region,
            listing,
            first_rank,
            videos,
            fetched_at.as_i64(),
            lease,
        )
            .map_err(self.err(format!(
                "storing search {search_name:?} page from rank {first_rank} of {region} for run {run_id}"
            )))
    }

    /// Stores one page of `videos` from `first_rank` on, in one transaction: the
    /// fetch it belongs to (noting its slot when made under `lease`), then each video
    /// and its place.
    #[allow(clippy::too_many_arguments)]
    fn store_page(
        &self,
        run_id: &str,
        region: &str,
        listing: Listing<'_>,
        first_rank: u32,
        videos: &[VideoRecord],
        fetched_at: i64,
        lease: Option<LeasedSlot>,
    ) -> rusqlite::Result<usize> {
        let tx = self.write_tx()?;
        let fetch = open_fetch(&tx, run_id, region, listing, fetched_at)?;
        if let Some(lease) = &lease {
            super::fetch_slots::note_lease(&tx, fetch.num, lease)?;
        }
        for (index, video) in videos.iter().enumerate() {
            let num = upsert_video(&tx, video, fetched_at)?;
            let rank = i64::from(first_rank) + index as i64;
            place_video(&tx, &fetch, rank, num, video, fetched_at)?;
        }
        tx.commit()?;
        Ok(videos.len())
    }

    /// Replaces a region's category names (id, title) and notes when they were
    /// fetched, so the runner asks the upstream at most once a day.
    pub fn store_categories(
        &self,
        region: &str,
        categories: &[(String, String)],
        fetched_at: Secs,
    ) -> Result<(), StoreError> {
        let fetched_at = fetched_at.as_i64();
        (|| {
            let tx = self.write_tx()?;
            tx.execute("DELETE FROM categories WHERE region = ?1", [region])?;
            // New category names are when a chart the upstream lacked is asked again.
            tx.execute(
                "DELETE FROM missing_charts
                 WHERE region = (SELECT num FROM regions WHERE code = ?1)",
                [region],
            )?;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO categories (region, id, title, fetched_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (region, id) DO UPDATE SET title = excluded.title",
                )?;
                for (id, title) in categories {
                    insert.execute(params![region, id, title, fetched_at])?;
                }
            }
            tx.execute(
                "INSERT INTO region_state (region, categories_fetched_at) VALUES (?1, ?2)
                 ON CONFLICT (region) DO UPDATE SET categories_fetched_at = excluded.categories_fetched_at",
                params![region, fetched_at],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("storing the categories of {region}")))
    }

    /// Notes that the upstream has no chart for `category` in `region` (it answered
    /// `videoChartNotFound`), so that runs leave it out until the region's category
    /// names are next stored ([`Store::store_categories`]).
    pub(crate) fn mark_chart_missing(
        &self,
        region: &str,
        category: u32,
        at: Secs,
    ) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            let region_num = compact::region_num(&tx, region)?;
            tx.execute(
                "INSERT INTO missing_charts (region, category, since) VALUES (?1, ?2, ?3)
                 ON CONFLICT (region, category) DO NOTHING",
                params![region_num, category, at.as_i64()],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!(
            "noting that {region} has no chart of category {category}"
        )))
    }

    /// Notes that every planned page of `region` was stored at `at`: the last
    /// complete fetch, which orders regions in the next run, and a `complete` attempt.
    pub fn mark_region_complete(&self, region: &str, at: Secs) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "INSERT INTO region_state (region, last_complete_at, last_attempt_at, last_status)
                 VALUES (?1, ?2, ?2, ?3)
                 ON CONFLICT (region) DO UPDATE SET
                     last_complete_at = excluded.last_complete_at,
                     last_attempt_at = excluded.last_attempt_at,
                     last_status = excluded.last_status",
                params![region, at.as_i64(), RegionStatus::Complete],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("marking {region} complete")))
    }

    /// Notes an attempt at `region` that ended with `status` (e.g. `budget_exhausted`,
    /// `failed`), leaving its last complete fetch as it was.
    pub(crate) fn mark_region_attempt(
        &self,
        region: &str,
        at: Secs,
        status: RegionStatus,
    ) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "INSERT INTO region_state (region, last_attempt_at, last_status) VALUES (?1, ?2, ?3)
                 ON CONFLICT (region) DO UPDATE SET
                     last_attempt_at = excluded.last_attempt_at,
                     last_status = excluded.last_status",
                params![region, at.as_i64(), status],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("recording an attempt at {region}")))
    }
}

/// SQLite integers are signed; counts of units and calls never come near the limit, but
/// a wrapped value would be silently wrong, so refuse it.
fn to_i64(value: u64) -> rusqlite::Result<i64> {
    i64::try_from(value).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

/// The fetch a page joins, and what its places are stored under.
struct Fetch {
    num: i64,
    /// When the fetch began: places keep their own time as an offset from it.
    start: i64,
    region: i64,
    /// The search's number, or 0 for a chart.
    search: i64,
}

/// The fetch of this run, region and listing: the first page stored opens it; later
/// pages (and a retried page) join it.
fn open_fetch(
    tx: &Transaction<'_>,
    run_id: &str,
    region: &str,
    listing: Listing<'_>,
    fetched_at: i64,
) -> rusqlite::Result<Fetch> {
    let region_num = compact::region_num(tx, region)?;
    let (search, chart) = match listing {
        Listing::Chart { category } => (0, category.unwrap_or(0)),
        Listing::Search { name } => (compact::search_num(tx, region_num, name)?, 0),
    };
    let run = compact::run_num(tx, run_id)?;
    tx.prepare_cached(
        "INSERT INTO fetches (run, region, search, chart, fetched_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (run, region, search, chart) DO NOTHING",
    )?
    .execute(params![run, region_num, search, chart, fetched_at])?;
    let (num, start): (i64, i64) = tx
        .prepare_cached(
            "SELECT num, fetched_at FROM fetches
             WHERE run = ?1 AND region = ?2 AND search = ?3 AND chart = ?4",
        )?
        .query_row(params![run, region_num, search, chart], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    Ok(Fetch {
        num,
        start,
        region: region_num,
        search,
    })
}

/// Inserts or updates a video's latest metadata, and returns its number. Only the
/// newest fetch may overwrite it: two processes can store the same video out of order.
fn upsert_video(
    tx: &Transaction<'_>,
    video: &VideoRecord,
    fetched_at: i64,
) -> rusqlite::Result<i64> {
    let (tags, tags_text) = match &video.tags {
        Some(tags) => (
            Some(
                serde_json::to_string(tags)
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?,
            ),
            Some(tags.join(" ")),
        ),
        None => (None, None),
    };
    tx.prepare_cached(
        "INSERT INTO videos (
                     id, title, description, channel_id, channel_title, published_at,
                     category_id, tags, tags_text, default_language, default_audio_language,
                     duration_s, live_broadcast_content, thumbnail_url, region_restriction,
                     view_count, like_count, comment_count, first_seen_at, last_seen_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?19, ?9, ?10, ?11, ?12, ?13, ?14,
                         ?15, ?16, ?17, ?18, ?18)
                 ON CONFLICT (id) DO UPDATE SET
                     title = excluded.title,
                     description = excluded.description,
                     channel_id = excluded.channel_id,
                     channel_title = excluded.channel_title,
                     published_at = excluded.published_at,
                     category_id = excluded.category_id,
                     tags = excluded.tags,
                     tags_text = excluded.tags_text,
                     default_language = excluded.default_language,
                     default_audio_language = excluded.default_audio_language,
                     duration_s = excluded.duration_s,
                     live_broadcast_content = excluded.live_broadcast_content,
                     thumbnail_url = excluded.thumbnail_url,
                     region_restriction = excluded.region_restriction,
                     view_count = excluded.view_count,
                     like_count = excluded.like_count,
                     comment_count = excluded.comment_count,
                     last_seen_at = excluded.last_seen_at,
                     removed_at = NULL
                 WHERE excluded.last_seen_at >= videos.last_seen_at",
    )?
    .execute(params![
        video.id,
        video.title,
        video.description,
        video.channel_id,
        video.channel_title,
        video.published_at,
        video.category_id,
        tags,
        video.default_language,
        video.default_audio_language,
        video.duration_s,
        video.live_broadcast_content,
        video.thumbnail_url,
        video.region_restriction,
        video.view_count,
        video.like_count,
        video.comment_count,
        fetched_at,
        tags_text,
    ])?;
    tx.prepare_cached("SELECT num FROM videos WHERE id = ?1")?
        .query_row([&video.id], |r| r.get(0))
}

/// Stores video `num` at `rank` in `fetch` with its counts, notes the region saw it,
/// and tells the follow-ups. Storing a page again in the same run (a retry) replaces
/// its places.
fn place_video(
    tx: &Transaction<'_>,
    fetch: &Fetch,
    rank: i64,
    num: i64,
    video: &VideoRecord,
    fetched_at: i64,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO places (fetch, rank, video, offset_s, views, likes, comments)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (fetch, rank) DO UPDATE SET
             video = excluded.video, offset_s = excluded.offset_s,
             views = excluded.views, likes = excluded.likes, comments = excluded.comments",
    )?
    .execute(params![
        fetch.num,
        rank,
        num,
        fetched_at - fetch.start,
        video.view_count,
        video.like_count,
        video.comment_count,
    ])?;
    tx.prepare_cached(
        "INSERT INTO video_regions (video, region) VALUES (?1, ?2)
         ON CONFLICT (video, region) DO NOTHING",
    )?
    .execute(params![num, fetch.region])?;
    follow::seen(tx, num, fetched_at, fetch.search == 0)
}
