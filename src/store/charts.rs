//! Category charts in the store (schema step 5): each fetch says which chart it is
//! (the overall chart, or a category's, docs/upstream.md), and the categories
//! whose chart the upstream does not have are remembered per region.
//!
//! The fetch's chart is part of what makes a fetch one (a run fetches a region's
//! overall chart and its category charts), so it joins `fetches`' unique key. SQLite
//! cannot change a table's constraints in place: the step builds the new `fetches`
//! beside the old one, copies every row with its number (so `places` keeps referring
//! to the same fetches), drops the old table and gives the new one its name. A fetch
//! is one row, so this is a copy of one row per fetch, not of the places.

use rusqlite::{Connection, params};

use crate::sqlite::StepError;

/// The new tables, created beside the version 4 ones before the data step copies
/// `fetches` into `fetches_charted` ([`FINISH`] then swaps them).
pub(crate) const CREATE: &str = r#"
-- One fetch of one list of one region in one run: a chart (`search` = 0; `chart` = 0
-- for the overall chart, else the category id) or a configured search (`search` =
-- searches.num, `chart` = 0). `fetched_at` is when its first stored page arrived.
CREATE TABLE fetches_charted (
    num        INTEGER PRIMARY KEY,
    run        INTEGER NOT NULL REFERENCES run_nums (num),
    region     INTEGER NOT NULL REFERENCES regions (num),
    search     INTEGER NOT NULL,
    chart      INTEGER NOT NULL DEFAULT 0 CHECK (chart >= 0),
    fetched_at INTEGER NOT NULL,
    UNIQUE (run, region, search, chart)
) STRICT;

-- A category whose chart the upstream answered videoChartNotFound for, in a region,
-- since when: not asked again until the region's category names are next fetched
-- (which deletes the region's rows).
CREATE TABLE missing_charts (
    region   INTEGER NOT NULL REFERENCES regions (num),
    category INTEGER NOT NULL CHECK (category >= 1),
    since    INTEGER NOT NULL,
    PRIMARY KEY (region, category)
) STRICT, WITHOUT ROWID;
"#;

/// Once the rows are copied: the views that read `fetches` go with the old table and
/// come back reading the new one. `trending` stays the overall chart (as in version
/// 1, one row per run, region and rank); `chart_places` shows every chart.
const FINISH: &str = r#"
DROP VIEW trending;
DROP VIEW search_results;
DROP VIEW video_stats;
DROP TABLE fetches;
ALTER TABLE fetches_charted RENAME TO fetches;
CREATE INDEX fetches_by_chart_time ON fetches (region, search, chart, fetched_at);

CREATE VIEW trending (run_id, region, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.search = 0 AND f.chart = 0;

-- Every chart's places; `chart` is NULL for the overall chart, else the category id.
CREATE VIEW chart_places (run_id, region, chart, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, nullif(f.chart, 0), p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.search = 0;

CREATE VIEW search_results (run_id, region, search_name, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, s.name, p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN searches AS s ON s.num = f.search
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video;

CREATE VIEW video_stats (video_id, fetched_at, run_id, view_count, like_count, comment_count) AS
SELECT v.id, f.fetched_at + p.offset_s, r.run_id, p.views, p.likes, p.comments
FROM places AS p
JOIN fetches AS f ON f.num = p.fetch
JOIN run_nums AS r ON r.num = f.run
JOIN videos AS v ON v.num = p.video
UNION ALL
SELECT v.id, e.fetched_at, r.run_id, e.views, e.likes, e.comments
FROM extra_counts AS e
JOIN run_nums AS r ON r.num = e.run
JOIN videos AS v ON v.num = e.video;
"#;

/// Fetches copied per statement: the progress bar moves between batches.
const BATCH: i64 = 8192;

/// Runs `sql`, whose `?1` and `?2` bound a range of `num` of `table` (above ?1, up to
/// ?2), over every row of `table` in ranges of `batch`, with an "upgrading the
/// database" progress bar moved by the rows each range wrote. Returns the bar (for
/// the caller to finish when its step is done) and how many rows `table` has.
pub(crate) fn in_batches(
    conn: &Connection,
    table: &str,
    sql: &str,
    batch: i64,
) -> rusqlite::Result<(crate::output::progress::Task, i64)> {
    let (total, last): (i64, i64) = conn.query_row(
        &format!("SELECT count(*), ifnull(max(num), 0) FROM {table}"),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let bar = crate::output::progress::Task::new("upgrading the database", total.max(0) as u64);
    let mut run = conn.prepare(sql)?;
    let mut from = 0i64;
    while from < last {
        let to = from.saturating_add(batch);
        let wrote = run.execute(params![from, to])?;
        bar.inc(wrote as u64);
        from = to;
    }
    Ok((bar, total))
}

/// Copies every fetch into the new table as the overall chart or a search (all a
/// version 4 file holds), then swaps the tables. Runs inside the migration's
/// transaction, with foreign keys off ([`crate::sqlite::migrate`]), so dropping the
/// old table deletes no place; a kill at any moment rolls all of it back.
pub(crate) fn migrate_to_charts(conn: &Connection) -> Result<(), StepError> {
    let (bar, total) = in_batches(
        conn,
        "fetches",
        "INSERT INTO fetches_charted (num, run, region, search, chart, fetched_at)
         SELECT num, run, region, search, 0, fetched_at FROM fetches
         WHERE num > ?1 AND num <= ?2 ORDER BY num",
        BATCH,
    )?;
    let copied: i64 = conn.query_row("SELECT count(*) FROM fetches_charted", [], |r| r.get(0))?;
    if copied != total {
        // Cannot happen with `num` the rowid; refusing beats dropping what was missed.
        return Err(StepError::Refused(format!(
            "copied {copied} of {total} fetches into the new layout; nothing was changed"
        )));
    }
    conn.execute_batch(FINISH)?;
    bar.finish();
    Ok(())
}

#[cfg(test)]
mod tests;
