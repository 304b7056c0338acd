//! The reads the product makes of the snapshots, named, so that one test can ask
//! SQLite how it answers each (`EXPLAIN QUERY PLAN`) and hold that none of them scans
//! the snapshots.

/// The columns of one place of a chart's export row, in the order the store reads
/// them ([`EXPORT_REGION`], [`EXPORT_FETCH`]): `export` and the sink write the same
/// columns, so they are written once.
macro_rules! export_place_columns {
    () => {
        "
SELECT v.id, f.fetched_at, v.title, v.channel_title, v.category_id, v.published_at,
       v.tags, p.views, p.likes, p.comments, v.thumbnail_url, v.description,
       p.rank, f.fetched_at + p.offset_s, c.title, v.duration_s, v.removed_at, v.channel_id
"
    };
}

/// The condition that fetch `f` is data: no leased fetch but a `current` one
/// (`fetch_slots`, docs/schema.md). Every read of the snapshots for `export` and the
/// analysts' histories asks it in these words.
macro_rules! current_fetch {
    () => {
        "NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current')"
    };
}
pub(crate) use current_fetch;

#[cfg(test)]
/// A video's counts over time (`Store::video_stats`), oldest first.
pub(crate) const VIDEO_HISTORY: &str = "
SELECT at, run_id, views, likes, comments FROM (
    SELECT f.fetched_at + p.offset_s AS at, r.run_id, p.views, p.likes, p.comments,
           p.fetch AS k1, p.rank AS k2
    FROM videos AS v
    JOIN places AS p ON p.video = v.num
    JOIN fetches AS f ON f.num = p.fetch
    JOIN run_nums AS r ON r.num = f.run
    WHERE v.id = ?1
    UNION ALL
    SELECT e.fetched_at, r.run_id, e.views, e.likes, e.comments, 0, e.rowid
    FROM videos AS v
    JOIN extra_counts AS e ON e.video = v.num
    JOIN run_nums AS r ON r.num = e.run
    WHERE v.id = ?1)
ORDER BY at, k1, k2";

#[cfg(test)]
/// A video's places over time (`Store::video_places`): its rank history in every
/// chart and search, oldest first.
pub(crate) const VIDEO_PLACES: &str = "
SELECT f.fetched_at + p.offset_s, g.code,
       (SELECT s.name FROM searches AS s WHERE s.num = f.search), p.rank
FROM videos AS v
JOIN places AS p ON p.video = v.num
JOIN fetches AS f ON f.num = p.fetch
JOIN regions AS g ON g.num = f.region
WHERE v.id = ?1
ORDER BY f.fetched_at, p.fetch, p.rank";

#[cfg(test)]
/// A region's trending chart as it stood at a time: its newest fetch at or before ?2.
pub(crate) const CHART_AT: &str = "
SELECT p.rank, v.id, p.views, p.likes, p.comments, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.num = (SELECT f2.num FROM fetches AS f2
               WHERE f2.region = (SELECT num FROM regions WHERE code = ?1)
                 AND f2.search = 0 AND f2.chart = 0 AND f2.fetched_at <= ?2
               ORDER BY f2.fetched_at DESC LIMIT 1)
ORDER BY p.rank";

#[cfg(test)]
/// The newest trending fetch of every region.
pub(crate) const NEWEST_FETCHES: &str = "
SELECT g.code, (SELECT max(f.fetched_at) FROM fetches AS f
                WHERE f.region = g.num AND f.search = 0 AND f.chart = 0) AS newest
FROM regions AS g
ORDER BY g.code";

/// The best `?3` full-text matches, optionally only videos seen in region `?2`. The
/// region test goes through the `video_regions` summary, built once per query; the `+`
/// keeps FTS5 from being handed the rowid as an index constraint.
pub(crate) const SEARCH_RANK: &str = "
SELECT rowid FROM videos_fts
WHERE videos_fts MATCH ?1
  AND (?2 IS NULL
       OR +rowid IN (SELECT vr.video FROM video_regions AS vr
                     WHERE vr.region = (SELECT num FROM regions WHERE code = ?2)))
ORDER BY bm25(videos_fts, 10.0, 1.0, 4.0, 2.0), rowid
LIMIT ?3";

/// [`SEARCH_RANK`] for a query with few matches: each match looks its region up in
/// the summary (one seek each), instead of reading the region's whole video list
/// first, which costs more than the search itself when only a handful match.
pub(crate) const SEARCH_RANK_FEW: &str = "
SELECT rowid FROM videos_fts
WHERE videos_fts MATCH ?1
  AND EXISTS (SELECT 1 FROM video_regions AS vr
              WHERE vr.video = videos_fts.rowid
                AND vr.region = (SELECT num FROM regions WHERE code = ?2))
ORDER BY bm25(videos_fts, 10.0, 1.0, 4.0, 2.0), rowid
LIMIT ?3";

/// A common word's kept best matches (`frontier` 0) and the frontier of the rest (1):
/// see `store::best_matches`.
pub(crate) const BEST_MATCHES_OF: &str = "
SELECT frontier, video FROM best_matches WHERE term = ?1";

/// The bm25 of the matches of ?1 among the videos of the JSON array ?2 and those
/// above num ?4, and whether each was seen in region ?3 (any region when NULL). One
/// walk of the word's matches: the `+` keeps the rowid tests from FTS5, which would
/// start the query afresh (and count the word's matches again for bm25) per rowid. bm25
/// is computed only for the rows kept.
pub(crate) const BEST_MATCHES_SCORE: &str = "
SELECT rowid, bm25(videos_fts, 10.0, 1.0, 4.0, 2.0),
       ?3 IS NULL OR EXISTS (SELECT 1 FROM video_regions AS vr
                             WHERE vr.video = videos_fts.rowid
                               AND vr.region = (SELECT num FROM regions WHERE code = ?3))
FROM videos_fts
WHERE videos_fts MATCH ?1
  AND (+rowid IN (SELECT value FROM json_each(?2)) OR +rowid > ?4)";

/// A common word's kept best matches and frontier (schema 17) with what bm25 knows of
/// each: weighted occurrences and length in tokens.
pub(crate) const BEST_MATCHES_COUNTS_OF: &str = "
SELECT frontier, video, occurrences, tokens FROM best_matches WHERE term = ?1";

/// FTS5's averages record: the rows of the index and their tokens per column.
pub(crate) const FTS_AVERAGES: &str = "
SELECT block FROM videos_fts_data WHERE id = 1";

/// The matches of ?1 with a num above ?2 and at most ?3, at most ?4 of them, with their
/// occurrences per column and their lengths, for bm25 outside FTS5: the videos added
/// since the lists were built, or (?2 = ?3 - 1) one video whose text changed. FTS5
/// seeks to ?2 and computes no bm25 (which would count every match of the word
/// first). highlight() adds one byte, char(1), per occurrence: its length less the
/// text's is the count.
pub(crate) const BEST_MATCHES_FRESH: &str = "
SELECT rowid,
       ifnull(length(CAST(highlight(videos_fts, 0, char(1), '') AS BLOB))
              - length(CAST(title AS BLOB)), 0),
       ifnull(length(CAST(highlight(videos_fts, 1, char(1), '') AS BLOB))
              - length(CAST(description AS BLOB)), 0),
       ifnull(length(CAST(highlight(videos_fts, 2, char(1), '') AS BLOB))
              - length(CAST(tags_text AS BLOB)), 0),
       ifnull(length(CAST(highlight(videos_fts, 3, char(1), '') AS BLOB))
              - length(CAST(channel_title AS BLOB)), 0),
       (SELECT d.sz FROM videos_fts_docsize AS d WHERE d.id = videos_fts.rowid)
FROM videos_fts
WHERE videos_fts MATCH ?1 AND rowid > ?2 AND rowid <= ?3
LIMIT ?4";

/// Whether video ?1 was seen in region ?2 (a code).
pub(crate) const VIDEO_IN_REGION: &str = "
SELECT EXISTS (SELECT 1 FROM video_regions AS vr
               WHERE vr.video = ?1
                 AND vr.region = (SELECT num FROM regions WHERE code = ?2))";

/// How many matches a query has, counted up to `?2` (cheap: no ranking).
pub(crate) const SEARCH_MATCHES_UP_TO: &str = "
SELECT count(*) FROM (SELECT 1 FROM videos_fts WHERE videos_fts MATCH ?1 LIMIT ?2)";

/// One hit of a search, shown: the video, an excerpt around the match, its regions.
pub(crate) const SEARCH_HIT: &str = "
SELECT v.id, v.title, v.channel_title,
       snippet(videos_fts, -1, '[', ']', '...', 16),
       v.view_count, v.published_at,
       (SELECT group_concat(g.code, ',' ORDER BY g.code)
        FROM video_regions AS vr JOIN regions AS g ON g.num = vr.region
        WHERE vr.video = v.num)
FROM videos_fts
JOIN videos AS v ON v.num = videos_fts.rowid
WHERE videos_fts MATCH ?1 AND videos_fts.rowid = ?2";

/// The lists a region has snapshots of: (search, chart), each one walk of the fetch
/// index, for the exports that go list by list.
pub(crate) const REGION_LISTS: &str = "
SELECT DISTINCT f.search, f.chart FROM fetches AS f
WHERE f.region = (SELECT num FROM regions WHERE code = ?1)
ORDER BY f.search, f.chart";

/// One chart of a region (?4: 0 for the overall chart, else the category id): its
/// places between two times (inclusive), fetch by fetch and rank by rank, for
/// `export`: current fetches only (`fetch_slots`, docs/schema.md).
pub(crate) const EXPORT_REGION: &str = concat!(
    export_place_columns!(),
    "FROM fetches AS f
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
LEFT JOIN categories AS c ON c.region = ?1 AND c.id = v.category_id
WHERE f.region = (SELECT num FROM regions WHERE code = ?1)
  AND f.search = 0 AND f.chart = ?4 AND f.fetched_at >= ?2 AND f.fetched_at <= ?3
  AND ",
    current_fetch!(),
    "
ORDER BY f.fetched_at, f.num, p.rank"
);

/// One chart fetch (?1, a number of `fetches`, of the region whose code is ?2): its
/// places rank by rank, with the columns of [`EXPORT_REGION`], for the sink.
pub(crate) const EXPORT_FETCH: &str = concat!(
    export_place_columns!(),
    "FROM fetches AS f
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
LEFT JOIN categories AS c ON c.region = ?2 AND c.id = v.category_id
WHERE f.num = ?1
ORDER BY p.rank"
);

/// The counts samples of the charts and searches of the regions of the JSON array ?3
/// between two times, ordered so that the samples of one (video, time, source) are
/// adjacent: a video on the overall chart and on two category charts of one fetch, or
/// in two regions fetched in the same second, is one sample, not three
/// (`export --counts`). The order costs a sort, so this one is not in [`ALL`] either.
pub(crate) const EXPORT_PLACE_COUNTS: &str = concat!(
    "
SELECT v.id, f.fetched_at + p.offset_s AS at, p.views, p.likes, p.comments,
       CASE WHEN f.search = 0 THEN 'chart' ELSE 'search' END AS source
FROM fetches AS f
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.region IN (SELECT g.num FROM regions AS g JOIN json_each(?3) AS j ON g.code = j.value)
  AND f.fetched_at >= ?1 AND f.fetched_at <= ?2
  AND ",
    current_fetch!(),
    "
ORDER BY at, v.id, source, f.num, p.rank"
);

/// The follow-ups' samples between two times, video by video, of the videos seen in
/// any of the regions of the JSON array ?3. Exporting every sample reads the whole
/// series, so this one walks the table (in key order, streamed) and is not in
/// [`ALL`].
pub(crate) const EXPORT_FOLLOW_COUNTS: &str = "
SELECT v.id, c.at, c.views, c.likes, c.comments
FROM follow_counts AS c
JOIN videos AS v ON v.num = c.video
WHERE c.at >= ?1 AND c.at <= ?2
  AND EXISTS (SELECT 1 FROM video_regions AS vr
              WHERE vr.video = c.video
                AND vr.region IN (SELECT g.num FROM regions AS g
                                  JOIN json_each(?3) AS j ON g.code = j.value))
ORDER BY c.video, c.at";

/// A video's places per (region, chart) for `trendsync video`: first and last seen,
/// best rank, number of fetches. Charts only (a search is not a chart).
pub(crate) const VIDEO_CHART_PLACES: &str = "
SELECT g.code, f.chart, min(f.fetched_at + p.offset_s), max(f.fetched_at + p.offset_s),
       min(p.rank), count(DISTINCT p.fetch)
FROM videos AS v
JOIN places AS p ON p.video = v.num
JOIN fetches AS f ON f.num = p.fetch
JOIN regions AS g ON g.num = f.region
WHERE v.id = ?1 AND f.search = 0
GROUP BY g.code, f.chart
ORDER BY g.code, f.chart";

/// A video's counts over time with their source (`chart`, `search`, `follow`), oldest
/// first. The counts a version 1 file kept beyond its places (a page stored twice)
/// came from the trending chart or a search; they are shown as `chart`.
pub(crate) const VIDEO_COUNTS: &str = "
SELECT at, views, likes, comments, source FROM (
    SELECT f.fetched_at + p.offset_s AS at, p.views, p.likes, p.comments,
           CASE WHEN f.search = 0 THEN 'chart' ELSE 'search' END AS source,
           p.fetch AS k1, p.rank AS k2
    FROM videos AS v
    JOIN places AS p ON p.video = v.num
    JOIN fetches AS f ON f.num = p.fetch
    WHERE v.id = ?1
    UNION ALL
    SELECT e.fetched_at, e.views, e.likes, e.comments, 'chart', 0, e.rowid
    FROM videos AS v
    JOIN extra_counts AS e ON e.video = v.num
    WHERE v.id = ?1
    UNION ALL
    -- A run's follow-ups come after its charts: last within the same second.
    SELECT c.at, c.views, c.likes, c.comments, 'follow', 9223372036854775807, 0
    FROM videos AS v
    JOIN follow_counts AS c ON c.video = v.num
    WHERE v.id = ?1)
ORDER BY at, k1, k2";

/// Every product read above, with a name, for the query-plan test.
#[cfg(test)]
pub(crate) const ALL: &[(&str, &str)] = &[
    ("video history", VIDEO_HISTORY),
    ("video places", VIDEO_PLACES),
    ("chart at a time", CHART_AT),
    ("newest fetches", NEWEST_FETCHES),
    ("search rank", SEARCH_RANK),
    ("search rank, few matches", SEARCH_RANK_FEW),
    ("search matches", SEARCH_MATCHES_UP_TO),
    ("search hit", SEARCH_HIT),
    ("best matches with counts", BEST_MATCHES_COUNTS_OF),
    ("fts averages", FTS_AVERAGES),
    ("best matches, fresh videos", BEST_MATCHES_FRESH),
    ("video in region", VIDEO_IN_REGION),
    ("region lists", REGION_LISTS),
    ("export region", EXPORT_REGION),
    ("export fetch", EXPORT_FETCH),
    ("video chart places", VIDEO_CHART_PLACES),
    ("video counts", VIDEO_COUNTS),
];
