//! Tests of the compact layout: the upgrade from version 1 loses nothing, every read
//! the product makes is answered from indexes, prune keeps the file consistent.

use std::path::Path;

use rusqlite::Connection;
use tempfile::TempDir;

use crate::clock::Secs;
use crate::store::test_support::{FILE, dump, latest, open, query_plan, temp_db, video};
use crate::store::{ExportSpan, RunKind, Store, StoreError, VideoRecord, sql};

/// A video seen with `views` (`None`: hidden) and a tenth as many likes.
fn seen(id: &str, title: &str, views: Option<i64>) -> VideoRecord {
    VideoRecord {
        view_count: views,
        like_count: views.map(|v| v / 10),
        // Some optional fields left out, as the upstream may: NULL must survive too.
        comment_count: None,
        default_language: None,
        default_audio_language: None,
        thumbnail_url: None,
        region_restriction: None,
        ..video(id, title)
    }
}

/// The version 1 file of this test: every kind of row, and the awkward cases (hidden
/// counts, a video in two regions in the same second with different counts, a page
/// stored twice, a run still running, a search, the budget's own table).
fn v1_file(path: &Path) {
    drop(Store::open_with(path, &FILE[..1]).unwrap());
    let conn = Connection::open(path).unwrap();
    conn.execute_batch(
        r#"
        INSERT INTO runs VALUES ('r1', 'run', 100, 200, 'complete', 12, 12, NULL);
        INSERT INTO runs VALUES ('r2', 'backfill', 300, NULL, 'running', NULL, NULL, NULL);
        INSERT INTO videos (num, id, title, description, channel_id, channel_title, published_at,
            category_id, tags, tags_text, default_language, default_audio_language, duration_s,
            live_broadcast_content, thumbnail_url, region_restriction, view_count, like_count,
            comment_count, first_seen_at, last_seen_at)
        VALUES
            (1, 'vidA', 'volcano erupts', 'lava', 'UCa', 'Geo', '2024-01-01T00:00:00Z', '28',
             '["geo","lava"]', 'geo lava', 'en', 'en-US', 60, 'none', 'https://i/a.jpg',
             '{"blocked":["DE"]}', 500, 50, 5, 100, 300),
            (2, 'vidB', 'hidden counts', '', 'UCb', 'Quiet', '2024-01-02T00:00:00+01:00', NULL,
             NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 101, 101),
            (3, 'vidC', 'searched only', 'found by a search', 'UCc', 'Seek', '2024-01-03T00:00:00Z',
             '10', '[]', '', NULL, NULL, 0, 'live', NULL, NULL, 7, 0, 0, 102, 102);
        INSERT INTO video_stats (video_id, fetched_at, run_id, view_count, like_count, comment_count) VALUES
            ('vidA', 100, 'r1', 400, 40, 4),
            ('vidA', 100, 'r1', 410, 41, NULL),
            ('vidB', 101, 'r1', NULL, NULL, NULL),
            ('vidB', 101, 'r1', NULL, 3, NULL),
            ('vidC', 102, 'r1', 7, 0, 0),
            ('vidA', 300, 'r2', 500, 50, 5);
        INSERT INTO trending VALUES
            ('r1', 'US', 1, 'vidA', 100),
            ('r1', 'US', 51, 'vidB', 101),
            ('r1', 'GB', 1, 'vidA', 100),
            ('r2', 'US', 1, 'vidA', 300);
        INSERT INTO search_results VALUES ('r1', 'DE', 'fresh', 1, 'vidC', 102);
        INSERT INTO categories VALUES ('US', '28', 'Science & Technology', 100), ('US', '10', 'Music', 100);
        INSERT INTO region_state VALUES ('US', 200, 300, 'running', 100), ('GB', 200, 200, 'complete', NULL);
        CREATE TABLE quota_probe (k TEXT PRIMARY KEY, v INTEGER);
        INSERT INTO quota_probe VALUES ('used', 42);
        "#,
    )
    .unwrap();
}

/// What a version 1 reader sees, through the same names in either layout.
const VIEWS: &[&str] = &[
    "SELECT run_id, region, rank, video_id, fetched_at FROM trending",
    "SELECT run_id, region, search_name, rank, video_id, fetched_at FROM search_results",
    "SELECT video_id, fetched_at, run_id, view_count, like_count, comment_count FROM video_stats",
    // Version 1's columns: later steps add their own.
    "SELECT num, id, title, description, channel_id, channel_title, published_at, category_id,
            tags, tags_text, default_language, default_audio_language, duration_s,
            live_broadcast_content, thumbnail_url, region_restriction, view_count, like_count,
            comment_count, first_seen_at, last_seen_at FROM videos",
    "SELECT run_id, kind, started_at, ended_at, status, units, calls, stop_reason FROM runs",
    "SELECT * FROM categories",
    "SELECT * FROM region_state",
    "SELECT * FROM quota_probe",
];

#[test]
fn a_v1_database_with_every_kind_of_row_upgrades_losslessly() {
    let (_dir, path) = temp_db();
    v1_file(&path);
    let before: Vec<Vec<String>> = {
        let conn = Connection::open(&path).unwrap();
        VIEWS.iter().map(|sql| dump(&conn, sql)).collect()
    };
    assert_eq!(before[2].len(), 6, "the fixture holds six stats rows");

    let store = open(&path).unwrap();
    assert_eq!(crate::sqlite::user_version(&store.conn).unwrap(), latest());
    for (sql, rows) in VIEWS.iter().zip(&before) {
        assert_eq!(&dump(&store.conn, sql), rows, "{sql}");
    }
    assert!(store.integrity_check().unwrap());
    let fk: Vec<String> = dump(&store.conn, "PRAGMA foreign_key_check");
    assert!(fk.is_empty(), "{fk:?}");

    // A place keeps the counts of the stats row written with it.
    let us = store.chart_at("US", 200).unwrap();
    assert_eq!(us.len(), 2);
    assert_eq!((us[1].rank, us[1].video_id.as_str()), (51, "vidB"));
    assert_eq!(us[1].view_count, None);
    assert_eq!(us[1].fetched_at, 101, "a later page keeps its own time");
    // The region summary and the search see the same as before.
    let hits = store.search("volcano", Some("GB"), 10).unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].regions, ["GB", "US"]);
    assert_eq!(store.search("searched", Some("DE"), 10).unwrap().len(), 1);
    assert!(store.search("searched", Some("US"), 10).unwrap().is_empty());
    // The upgrade vacuumed once and noted it.
    let pending: i64 = store
        .conn
        .query_row("SELECT count(*) FROM store_meta", [], |r| r.get(0))
        .unwrap();
    assert_eq!(pending, 0);

    // Storing goes on in the new layout and reads back through the old names.
    store
        .store_trending_page(
            "r2",
            "GB",
            1,
            &[seen("vidD", "new one", Some(9))],
            Secs::new(301),
        )
        .unwrap();
    assert_eq!(store.trending_count("r2").unwrap(), 2);
    assert_eq!(store.video_stats("vidA").unwrap().len(), 3);
    assert_eq!(
        store.video_stats("vidB").unwrap().len(),
        2,
        "the extra counts too"
    );
}

#[test]
fn a_v1_database_with_no_rows_upgrades_and_owes_no_vacuum() {
    let (_dir, path) = temp_db();
    drop(Store::open_with(&path, &FILE[..1]).unwrap());
    let store = open(&path).unwrap();
    assert_eq!(
        crate::sqlite::user_version(&store.conn).unwrap(),
        FILE.len() as u32
    );
    assert!(store.integrity_check().unwrap());
}

/// A fresh store with three hourly runs over two regions and a search.
fn history() -> (TempDir, Store) {
    let (dir, path) = temp_db();
    let store = open(&path).unwrap();
    for hour in 0..3i64 {
        let run = format!("run{hour}");
        let at = 1_000_000 + hour * 3600;
        store.begin_run(&run, RunKind::Run, Secs::new(at)).unwrap();
        // "old{hour}" appear only in their hour; "steady" in every hour.
        let page = vec![
            seen("steady", "steady climber", Some(100 + hour)),
            seen(&format!("old{hour}"), &format!("fleeting {hour}"), None),
        ];
        store
            .store_trending_page(&run, "US", 1, &page, Secs::new(at))
            .unwrap();
        store
            .store_trending_page(&run, "GB", 1, &page[..1], Secs::new(at + 5))
            .unwrap();
        store
            .store_search_page(&run, "FR", "fresh", 1, &page[1..], Secs::new(at + 9))
            .unwrap();
    }
    (dir, store)
}

#[test]
fn reads_of_charts_histories_and_newest_fetches() {
    let (_dir, store) = history();
    let chart = store.chart_at("US", 1_000_000 + 3600 + 10).unwrap();
    let ids: Vec<&str> = chart.iter().map(|p| p.video_id.as_str()).collect();
    assert_eq!(ids, ["steady", "old1"]);
    assert_eq!(chart[0].view_count, Some(101));
    assert!(store.chart_at("US", 999_999).unwrap().is_empty());
    let places = store.video_places("steady").unwrap();
    assert_eq!(places.len(), 6);
    assert_eq!(places[1].region, "GB");
    let old = store.video_places("old0").unwrap();
    assert_eq!(old[1].search_name.as_deref(), Some("fresh"));
    let newest = store.newest_fetches().unwrap();
    assert_eq!(
        newest,
        [
            ("FR".to_string(), None),
            ("GB".to_string(), Some(1_000_000 + 2 * 3600 + 5)),
            ("US".to_string(), Some(1_000_000 + 2 * 3600)),
        ]
    );
}

/// EXPLAIN QUERY PLAN of every read the product makes: no step may walk a whole table
/// or index of snapshots or videos; the scans allowed are FTS5's own MATCH and the
/// list of regions (one row per region) for "every region".
#[test]
fn every_product_read_is_answered_from_indexes() {
    let (_dir, store) = history();
    // Statistics as a grown database would have them, so the plan is the one a year
    // gets, not the one an almost empty file gets.
    store.conn.execute_batch("ANALYZE").unwrap();
    for (name, sql) in sql::ALL {
        let details = query_plan(&store.conn, sql);
        for detail in &details {
            let scan = detail.starts_with("SCAN ")
                && !detail.starts_with("SCAN videos_fts VIRTUAL TABLE")
                && !detail.starts_with("SCAN CONSTANT ROW")
                && !detail.contains("INDEX sqlite_autoindex_regions_1")
                && !detail.starts_with("SCAN (subquery");
            assert!(!scan, "{name} scans: {detail}\n{}", details.join("\n"));
        }
        assert!(!details.is_empty(), "{name}");
        if *name == "export region" {
            // Streamed in constant memory: no sort of the whole result.
            assert!(
                !details.iter().any(|d| d.contains("TEMP B-TREE")),
                "{}",
                details.join("\n")
            );
        }
    }
}

#[test]
fn prune_deletes_old_snapshots_and_only_videos_nothing_refers_to() {
    let (_dir, store) = history();
    let cutoff = 1_000_000 + 3600; // hour 0 goes
    let dry = store.prune(cutoff, true, false).unwrap();
    let before = store.videos_count().unwrap();
    assert_eq!(
        store.videos_count().unwrap(),
        before,
        "a dry run deletes nothing"
    );
    let done = store.prune(cutoff, false, false).unwrap();
    assert_eq!(dry.deleted, done.deleted);
    assert_eq!(dry.videos_deleted, done.videos_deleted);
    // Hour 0: 3 fetches (US, GB, FR search), 4 places; "old0" only appeared there.
    assert_eq!(
        done.deleted,
        [
            ("fetches", 3),
            ("places", 4),
            ("extra_counts", 0),
            ("follow_counts", 0)
        ]
    );
    assert_eq!(done.videos_deleted, 1);
    assert!(store.video("old0").unwrap().is_none());
    for kept in ["steady", "old1", "old2"] {
        assert!(store.video(kept).unwrap().is_some(), "{kept}");
    }
    assert!(store.integrity_check().unwrap(), "integrity and FTS checks");
    let fk = dump(&store.conn, "PRAGMA foreign_key_check");
    assert!(fk.is_empty(), "{fk:?}");
    assert!(store.search("fleeting", None, 10).unwrap().len() == 2);

    // Everything older than hour 2 goes; "steady" is still in hour 2's charts.
    let done = store.prune(1_000_000 + 2 * 3600, false, true).unwrap();
    assert_eq!(done.videos_deleted, 1);
    assert!(done.bytes_freed > 0 || store.file_bytes().unwrap() > 0);
    assert!(store.video("steady").unwrap().is_some());
    assert_eq!(store.video_places("steady").unwrap().len(), 2);
    assert!(store.integrity_check().unwrap());
    // The region summary follows: "old2" was only ever in US and FR.
    assert!(store.search("fleeting", Some("GB"), 10).unwrap().is_empty());
    assert_eq!(store.search("fleeting", Some("FR"), 10).unwrap().len(), 1);
}

#[test]
fn prune_leaves_the_budget_tables_alone() {
    let (_dir, store) = history();
    store
        .conn
        .execute_batch("CREATE TABLE quota_probe (x INTEGER); INSERT INTO quota_probe VALUES (1);")
        .unwrap();
    store.prune(i64::MAX, false, true).unwrap();
    assert_eq!(store.videos_count().unwrap(), 0);
    let n: i64 = store
        .conn
        .query_row("SELECT count(*) FROM quota_probe", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    assert!(store.integrity_check().unwrap());
}

#[test]
fn export_streams_each_place_with_the_counts_of_its_fetch() {
    let (_dir, store) = history();
    let span = ExportSpan {
        since: i64::MIN,
        until: i64::MAX,
    };
    let mut rows = Vec::new();
    let n = store
        .export(&["US".to_string(), "FR".to_string()], span, |row| {
            rows.push(row.clone());
            Ok::<(), StoreError>(())
        })
        .unwrap();
    assert_eq!(n, 6, "FR has only a search, which is not a trending place");
    assert_eq!(rows.len(), 6);
    let steady: Vec<Option<i64>> = rows
        .iter()
        .filter(|r| r.video_id == "steady")
        .map(|r| r.view_count)
        .collect();
    assert_eq!(steady, [Some(100), Some(101), Some(102)]);
    assert!(
        rows.iter()
            .filter(|r| r.video_id != "steady")
            .all(|r| r.view_count.is_none())
    );
    let late = ExportSpan {
        since: 1_000_000 + 3600,
        until: 1_000_000 + 3600,
    };
    let n = store
        .export(&["US".to_string()], late, |_| Ok::<(), StoreError>(()))
        .unwrap();
    assert_eq!(n, 2);
}

#[test]
fn search_by_region_answers_the_same_by_either_route() {
    let (_dir, store) = history();
    for (query, region) in [
        ("fleeting", "US"),
        ("fleeting", "FR"),
        ("fleeting", "GB"),
        ("steady", "GB"),
        ("steady", "FR"),
        ("steady", "XX"),
    ] {
        // Every query counts as many matches, then as few.
        let listed = store.search_with(query, Some(region), 10, 0, true).unwrap();
        let sought = store
            .search_with(query, Some(region), 10, i64::MAX, true)
            .unwrap();
        assert_eq!(listed, sought, "{query} in {region}");
    }
    assert_eq!(
        store
            .search_with("fleeting", Some("US"), 10, 0, true)
            .unwrap()
            .len(),
        3
    );
    assert!(
        store
            .search_with("steady", Some("FR"), 10, i64::MAX, true)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .search_with("steady", Some("GB"), 10, 0, true)
            .unwrap()
            .len(),
        1
    );
}
