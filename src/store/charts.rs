//! Category charts in the store (schema step 5): each fetch says which chart it is
//! (the overall chart, or a category's, DESIGN.md section 5), and the categories
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
) -> rusqlite::Result<(crate::progress::Task, i64)> {
    let (total, last): (i64, i64) = conn.query_row(
        &format!("SELECT count(*), ifnull(max(num), 0) FROM {table}"),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let bar = crate::progress::Task::new("upgrading the database", total.max(0) as u64);
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
mod tests {
    use std::path::Path;

    use rusqlite::Connection;

    use crate::schema::MIGRATIONS;
    use crate::store::{Store, VideoRecord};

    /// Every row `sql` yields, each as its cells' debug text, sorted.
    fn dump(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        let n = stmt.column_count();
        let mut rows: Vec<String> = stmt
            .query_map([], |row| {
                (0..n)
                    .map(|i| {
                        row.get::<_, rusqlite::types::Value>(i)
                            .map(|v| format!("{v:?}"))
                    })
                    .collect::<rusqlite::Result<Vec<_>>>()
                    .map(|cells| cells.join("|"))
            })
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        rows.sort();
        rows
    }

    /// What a reader of the version 4 layout sees, table by table and view by view.
    fn v4_picture(path: &Path) -> Vec<Vec<String>> {
        let conn = Connection::open(path).unwrap();
        [
            "SELECT num, run, region, search, fetched_at FROM fetches",
            "SELECT * FROM places",
            "SELECT * FROM extra_counts",
            "SELECT * FROM video_regions",
            "SELECT * FROM trending",
            "SELECT * FROM search_results",
            "SELECT * FROM video_stats",
            "SELECT num, id, view_count FROM videos",
        ]
        .iter()
        .map(|sql| dump(&conn, sql))
        .collect()
    }

    /// A version 4 file: two runs of two regions, a search, a retried page's extra
    /// counts, hidden counts, and gaps in the fetch numbers (a prune was here).
    fn v4_file(path: &Path) {
        drop(Store::open_with(path, &MIGRATIONS[..4]).unwrap());
        let conn = Connection::open(path).unwrap();
        conn.execute_batch(
            "INSERT INTO runs (run_id, kind, started_at, status) VALUES
                 ('r1', 'run', 100, 'complete'), ('r2', 'run', 200, 'running');
             INSERT INTO run_nums (num, run_id) VALUES (1, 'r1'), (2, 'r2');
             INSERT INTO regions (num, code) VALUES (1, 'US'), (2, 'GB');
             INSERT INTO searches (num, region, name) VALUES (1, 1, 'fresh');
             INSERT INTO videos (num, id, title, description, channel_id, channel_title,
                 published_at, view_count, first_seen_at, last_seen_at) VALUES
                 (1, 'a', 'A', '', 'UC', 'C', '2024-01-01T00:00:00Z', 10, 100, 200),
                 (2, 'b', 'B', '', 'UC', 'C', '2024-01-01T00:00:00Z', NULL, 100, 200);
             INSERT INTO fetches (num, run, region, search, fetched_at) VALUES
                 (3, 1, 1, 0, 100), (4, 1, 2, 0, 101), (5, 1, 1, 1, 102),
                 (9, 2, 1, 0, 200), (12, 2, 2, 0, 201);
             INSERT INTO places (fetch, rank, video, offset_s, views, likes, comments) VALUES
                 (3, 1, 1, 0, 10, 1, NULL), (3, 2, 2, 1, NULL, NULL, NULL),
                 (4, 1, 2, 0, NULL, 3, NULL), (5, 1, 1, 0, 11, NULL, NULL),
                 (9, 1, 2, 0, NULL, NULL, NULL), (9, 2, 1, 2, 12, 2, 1),
                 (12, 1, 1, 0, 13, NULL, 0);
             INSERT INTO extra_counts (video, run, fetched_at, views) VALUES (1, 1, 100, 9);
             INSERT INTO video_regions (video, region) VALUES (1, 1), (2, 1), (1, 2), (2, 2);",
        )
        .unwrap();
    }

    #[test]
    fn the_upgrade_keeps_every_fetch_and_place_as_the_overall_chart_or_a_search() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trendsync.db");
        v4_file(&path);
        let before = v4_picture(&path);
        let store = Store::open(&path).unwrap();
        assert_eq!(before, v4_picture(&path));
        let conn = Connection::open(&path).unwrap();
        let charts = dump(&conn, "SELECT DISTINCT chart FROM fetches");
        assert_eq!(charts, ["Integer(0)"]);
        let check = dump(&conn, "PRAGMA foreign_key_check");
        assert!(check.is_empty(), "{check:?}");
        let fk: bool = store
            .conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert!(fk, "foreign keys are enforced again after the upgrade");

        // The upgraded file has the layout of a new one.
        let layout = |p: &Path| {
            dump(
                &Connection::open(p).unwrap(),
                "SELECT type, name, sql FROM sqlite_schema",
            )
        };
        let new = dir.path().join("new.db");
        drop(Store::open(&new).unwrap());
        assert_eq!(layout(&path), layout(&new));

        // A category chart in the same run is a fetch of its own, beside the overall one.
        store
            .store_chart_page("r2", "US", Some(17), 1, &[VideoRecord::bare("c")], 205)
            .unwrap();
        let us_r2 = dump(
            &conn,
            "SELECT chart, rank, video_id FROM chart_places WHERE run_id = 'r2' AND region = 'US'",
        );
        assert_eq!(
            us_r2,
            [
                "Integer(17)|Integer(1)|Text(\"c\")",
                "Null|Integer(1)|Text(\"b\")",
                "Null|Integer(2)|Text(\"a\")",
            ]
        );
        assert_eq!(store.trending_count("r2").unwrap(), 3);
    }

    #[test]
    fn a_missing_chart_is_forgotten_when_the_category_names_are_stored_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("trendsync.db")).unwrap();
        store.mark_chart_missing("US", 17, 10).unwrap();
        store.mark_chart_missing("US", 17, 11).unwrap();
        store.mark_chart_missing("GB", 20, 10).unwrap();
        assert_eq!(store.missing_charts("US").unwrap(), [17]);
        store
            .store_categories("US", &[("17".into(), "Sports".into())], 20)
            .unwrap();
        assert!(store.missing_charts("US").unwrap().is_empty());
        assert_eq!(store.missing_charts("GB").unwrap(), [20]);
    }
}
