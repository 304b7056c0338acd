//! The file as an analyst's tools read it (schema step 7): the full-text index
//! declared so that Datasette (and sqlite-utils, which shares its test) finds it for
//! the `videos` table, and views whose times are RFC 3339 UTC text, as the CSV has
//! them. The schema each analyst-facing table and view has, and which tables are
//! internal, is documented in `docs/schema.md`.
//!
//! Nothing trendsync reads changes shape here: the index has the same columns,
//! tokenizer and rows, and the views are only for people. So a read-only open does
//! not need this step (it is not among the store's own steps, `store::schema::STEPS`).
//!
//! Datasette looks for a virtual table whose `CREATE` text contains
//! `content="videos"` or `content=[videos]`; step 1 wrote `content = 'videos'`, which
//! FTS5 reads the same but that search does not match. An FTS5 table's options cannot
//! be changed in place, so the step drops the index and creates it again with the same
//! options spelled as Datasette looks for them, then indexes every video again, in
//! batches with a progress bar. The index is derived from `videos` alone (external
//! content; the triggers on `videos`, which name the index and not its options, stay
//! as they are), so nothing is lost: the rebuilt index holds what the old one did.
//!
//! Every time stored as Unix seconds in a table or view an analyst reads has a twin
//! view named `<name>_utc`: the same columns in the same order, each time column as
//! RFC 3339 UTC text (`2026-11-23T17:41:47Z`; NULL stays NULL), so a query is moved
//! to readable times by its table's name alone. The views of earlier steps keep their
//! columns: SQL written against them reads the same rows.

use rusqlite::Connection;

use crate::sqlite::StepError;

/// Step 7.
pub(crate) const CREATE: &str = r#"
DROP TABLE videos_fts;
-- As step 1 declared it, with `content` and `content_rowid` quoted the way Datasette's
-- detect_fts and sqlite-utils look for.
CREATE VIRTUAL TABLE videos_fts USING fts5 (
    title, description, tags_text, channel_title,
    content="videos",
    content_rowid="num",
    tokenize = 'unicode61 remove_diacritics 2'
);

-- Every sample of every video's counts, with where it came from: `source` is `chart`
-- (a trending or category chart; `chart` NULL for the overall chart, else the
-- category id), `search` (a configured search, `search_name`) or `follow` (a
-- follow-up after the charts, no place). The counts a version 1 file kept beyond its
-- places (a page stored twice in a run) are `chart` rows with no region or rank.
CREATE VIEW video_history (video_id, at, source, region, chart, search_name, rank,
                           view_count, like_count, comment_count, run_id) AS
SELECT v.id, f.fetched_at + p.offset_s,
       CASE WHEN f.search = 0 THEN 'chart' ELSE 'search' END,
       g.code, nullif(f.chart, 0), (SELECT s.name FROM searches AS s WHERE s.num = f.search),
       p.rank, p.views, p.likes, p.comments, r.run_id
FROM places AS p
JOIN fetches AS f ON f.num = p.fetch
JOIN videos AS v ON v.num = p.video
JOIN regions AS g ON g.num = f.region
JOIN run_nums AS r ON r.num = f.run
UNION ALL
SELECT v.id, e.fetched_at, 'chart', NULL, NULL, NULL, NULL, e.views, e.likes, e.comments,
       r.run_id
FROM extra_counts AS e
JOIN videos AS v ON v.num = e.video
JOIN run_nums AS r ON r.num = e.run
UNION ALL
SELECT v.id, c.at, 'follow', NULL, NULL, NULL, NULL, c.views, c.likes, c.comments, NULL
FROM follow_counts AS c
JOIN videos AS v ON v.num = c.video;

-- The twins with readable times: same columns, same order, times as RFC 3339 UTC.
CREATE VIEW trending_utc (run_id, region, rank, video_id, fetched_at) AS
SELECT run_id, region, rank, video_id,
       strftime('%Y-%m-%dT%H:%M:%SZ', fetched_at, 'unixepoch')
FROM trending;

CREATE VIEW chart_places_utc (run_id, region, chart, rank, video_id, fetched_at) AS
SELECT run_id, region, chart, rank, video_id,
       strftime('%Y-%m-%dT%H:%M:%SZ', fetched_at, 'unixepoch')
FROM chart_places;

CREATE VIEW search_results_utc (run_id, region, search_name, rank, video_id, fetched_at) AS
SELECT run_id, region, search_name, rank, video_id,
       strftime('%Y-%m-%dT%H:%M:%SZ', fetched_at, 'unixepoch')
FROM search_results;

CREATE VIEW video_stats_utc (video_id, fetched_at, run_id, view_count, like_count,
                             comment_count) AS
SELECT video_id, strftime('%Y-%m-%dT%H:%M:%SZ', fetched_at, 'unixepoch'), run_id,
       view_count, like_count, comment_count
FROM video_stats;

CREATE VIEW video_history_utc (video_id, at, source, region, chart, search_name, rank,
                               view_count, like_count, comment_count, run_id) AS
SELECT video_id, strftime('%Y-%m-%dT%H:%M:%SZ', at, 'unixepoch'), source, region, chart,
       search_name, rank, view_count, like_count, comment_count, run_id
FROM video_history;

CREATE VIEW videos_utc (num, id, title, description, channel_id, channel_title,
                        published_at, category_id, tags, tags_text, default_language,
                        default_audio_language, duration_s, live_broadcast_content,
                        thumbnail_url, region_restriction, view_count, like_count,
                        comment_count, first_seen_at, last_seen_at, removed_at) AS
SELECT num, id, title, description, channel_id, channel_title, published_at, category_id,
       tags, tags_text, default_language, default_audio_language, duration_s,
       live_broadcast_content, thumbnail_url, region_restriction, view_count, like_count,
       comment_count,
       strftime('%Y-%m-%dT%H:%M:%SZ', first_seen_at, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', last_seen_at, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', removed_at, 'unixepoch')
FROM videos;

CREATE VIEW runs_utc (run_id, kind, started_at, ended_at, status, units, calls,
                      stop_reason) AS
SELECT run_id, kind,
       strftime('%Y-%m-%dT%H:%M:%SZ', started_at, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', ended_at, 'unixepoch'),
       status, units, calls, stop_reason
FROM runs;

CREATE VIEW run_regions_utc (run_id, region, started_at, status, pages, videos, units,
                             reason) AS
SELECT run_id, region, strftime('%Y-%m-%dT%H:%M:%SZ', started_at, 'unixepoch'), status,
       pages, videos, units, reason
FROM run_regions;

CREATE VIEW categories_utc (region, id, title, fetched_at) AS
SELECT region, id, title, strftime('%Y-%m-%dT%H:%M:%SZ', fetched_at, 'unixepoch')
FROM categories;

CREATE VIEW region_state_utc (region, last_complete_at, last_attempt_at, last_status,
                              categories_fetched_at) AS
SELECT region,
       strftime('%Y-%m-%dT%H:%M:%SZ', last_complete_at, 'unixepoch'),
       strftime('%Y-%m-%dT%H:%M:%SZ', last_attempt_at, 'unixepoch'),
       last_status,
       strftime('%Y-%m-%dT%H:%M:%SZ', categories_fetched_at, 'unixepoch')
FROM region_state;
"#;

/// Videos indexed per statement: the progress bar moves between batches.
const BATCH: i64 = 4096;

/// Indexes every video again into the index [`CREATE`] made, in `num` order, as
/// FTS5's `rebuild` would (it reads the same columns of the same rows), but in
/// batches, so a year's file shows progress. Inside the step's transaction: a kill
/// at any moment leaves the old index as it was.
pub(crate) fn reindex(conn: &Connection) -> Result<(), StepError> {
    let (bar, _) = super::charts::in_batches(
        conn,
        "videos",
        "INSERT INTO videos_fts (rowid, title, description, tags_text, channel_title)
         SELECT num, title, description, tags_text, channel_title FROM videos
         WHERE num > ?1 AND num <= ?2 ORDER BY num",
        BATCH,
    )?;
    bar.finish();
    Ok(())
}

#[cfg(test)]
mod tests;
