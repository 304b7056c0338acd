//! Schema step 12: a chart's id is text in every view an analyst reads, as a category
//! id is in `videos.category_id` and `categories.id`, so that joining the places with
//! the categories needs no cast (pandas refuses to merge an integer column with a text
//! one). The overall chart stays NULL.
//!
//! Only the views change: `fetches.chart` stays the internal integer key (0 for the
//! overall chart) that the store's own reads and indexes use, and no row is rewritten,
//! so the step is one transaction of DDL that a kill either applies whole or not at
//! all. The `_utc` twins and `video_history_marked` read these views by name and follow
//! them unchanged.

use crate::sqlite::Migration;

/// Step 12.
pub(crate) const STEP: Migration = Migration {
    description: "chart ids as text in every view, as category ids are",
    sql: SQL,
    data: None,
};

const SQL: &str = "
DROP VIEW chart_places;
CREATE VIEW chart_places (run_id, region, chart, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, CAST(nullif(f.chart, 0) AS TEXT), p.rank, v.id,
       f.fetched_at + p.offset_s
FROM fetches AS f
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.search = 0;

DROP VIEW video_history;
CREATE VIEW video_history (video_id, at, source, region, chart, search_name, rank,
                           view_count, like_count, comment_count, run_id) AS
SELECT v.id, f.fetched_at + p.offset_s,
       CASE WHEN f.search = 0 THEN 'chart' ELSE 'search' END,
       g.code, CAST(nullif(f.chart, 0) AS TEXT),
       (SELECT s.name FROM searches AS s WHERE s.num = f.search),
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
";

#[cfg(test)]
mod tests;
