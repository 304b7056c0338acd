//! Unit tests of `store/charts.rs`.

use std::path::Path;

use rusqlite::Connection;

use crate::clock::Secs;
use crate::store::schema::CHARTS;
use crate::store::test_support::{dump, open, steps_before, temp_db};
use crate::store::{Store, VideoRecord};

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

/// A file as version 4 left the store's tables (the steps before charts): two runs of two regions, a search, a retried page's extra
/// counts, hidden counts, and gaps in the fetch numbers (a prune was here).
fn v4_file(path: &Path) {
    drop(Store::open_with(path, steps_before(&CHARTS)).unwrap());
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
    let (dir, path) = temp_db();
    v4_file(&path);
    let before = v4_picture(&path);
    let store = open(&path).unwrap();
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
    drop(open(&new).unwrap());
    assert_eq!(layout(&path), layout(&new));

    // A category chart in the same run is a fetch of its own, beside the overall one.
    store
        .store_chart_page(
            "r2",
            "US",
            Some(17),
            1,
            &[VideoRecord::bare("c")],
            Secs::new(205),
        )
        .unwrap();
    let us_r2 = dump(
        &conn,
        "SELECT chart, rank, video_id FROM chart_places WHERE run_id = 'r2' AND region = 'US'",
    );
    assert_eq!(
        us_r2,
        [
            "Null|Integer(1)|Text(\"b\")",
            "Null|Integer(2)|Text(\"a\")",
            "Text(\"17\")|Integer(1)|Text(\"c\")",
        ]
    );
    assert_eq!(store.trending_count("r2").unwrap(), 3);
}

#[test]
fn a_missing_chart_is_forgotten_when_the_category_names_are_stored_again() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    store.mark_chart_missing("US", 17, Secs::new(10)).unwrap();
    store.mark_chart_missing("US", 17, Secs::new(11)).unwrap();
    store.mark_chart_missing("GB", 20, Secs::new(10)).unwrap();
    assert_eq!(store.missing_charts("US").unwrap(), [17]);
    store
        .store_categories("US", &[("17".into(), "Sports".into())], Secs::new(20))
        .unwrap();
    assert!(store.missing_charts("US").unwrap().is_empty());
    assert_eq!(store.missing_charts("GB").unwrap(), [20]);
}
