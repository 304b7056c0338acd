//! The file as analysts read it (schema step 7): the full-text index declared as
//! Datasette looks for it, with the same matches after an upgrade; the `_utc` twins;
//! `video_history`; and the shipped Datasette canned queries answered from indexes.

use rusqlite::{Connection, types::Value};

use crate::clock::Secs;
use crate::sqlite::Migration;
use crate::store::schema::ANALYSTS;
use crate::store::test_support::{FILE, latest, open, query_plan, steps_before, temp_db, video};
use crate::store::{FollowCounts, RunKind, Store, VideoRecord};

/// A file as the build before step 7 left the store's tables.
fn before_step_7() -> &'static [Migration] {
    steps_before(&ANALYSTS)
}

/// A video of this file's channel: its channel's name and its description hold words
/// [`matches`] looks for, and it was seen with ten views.
fn tagged(id: &str, title: &str, tags: &[&str]) -> VideoRecord {
    VideoRecord {
        description: format!("all about {id}"),
        channel_title: "Harbour Light".to_string(),
        tags: (!tags.is_empty()).then(|| tags.iter().map(|t| t.to_string()).collect()),
        view_count: Some(10),
        ..video(id, title)
    }
}

/// Two runs of charts, a category chart, a search and a follow-up.
fn fill(store: &Store) {
    store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
    let page = [
        tagged("a", "Volcano eruption", &["lava"]),
        tagged("b", "Café crème", &[]),
        tagged("c", "Tide tables", &["lighthouse", "coast"]),
    ];
    store
        .store_trending_page("r1", "US", 1, &page, Secs::new(100))
        .unwrap();
    store
        .store_chart_page("r1", "US", Some(17), 1, &page[2..], Secs::new(101))
        .unwrap();
    store
        .store_search_page("r1", "GB", "fresh", 1, &page[..1], Secs::new(102))
        .unwrap();
    store.mark_region_complete("US", Secs::new(103)).unwrap();
    // As a run of a version 6 file's day ended it: `finish_run` writes columns of
    // later steps (the duration, step 9).
    store
        .conn
        .execute(
            "UPDATE runs SET ended_at = 104, status = 'complete', units = 3, calls = 3
             WHERE run_id = 'r1'",
            [],
        )
        .unwrap();
    store
        .begin_run("r2", RunKind::Run, Secs::new(3700))
        .unwrap();
    store
        .begin_run_regions("r2", Secs::new(3700), &["US".to_string()])
        .unwrap();
    store
        .store_trending_page("r2", "US", 1, &page[1..], Secs::new(3700))
        .unwrap();
    store
        .store_follow_ups(
            &["a".to_string()],
            &[FollowCounts {
                video_id: "a".to_string(),
                view_count: Some(99),
                like_count: None,
                comment_count: Some(2),
            }],
            Secs::new(3800),
        )
        .unwrap();
}

fn rows(conn: &Connection, sql: &str) -> Vec<Vec<Value>> {
    let mut stmt = conn.prepare(sql).unwrap();
    let n = stmt.column_count();
    stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect())
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn text(v: &Value) -> String {
    match v {
        Value::Text(s) => s.clone(),
        Value::Null => "NULL".to_string(),
        Value::Integer(i) => i.to_string(),
        other => format!("{other:?}"),
    }
}

/// The matches of a few queries, as `trendsync search` finds them.
fn matches(store: &Store) -> Vec<Vec<String>> {
    [
        "volcano",
        "cafe",
        "lighthouse",
        "harbour",
        "about",
        "tide OR lava",
    ]
    .iter()
    .map(|q| {
        let mut ids: Vec<String> = store
            .search(q, None, 50)
            .unwrap()
            .into_iter()
            .map(|h| h.video_id)
            .collect();
        ids.sort();
        ids
    })
    .collect()
}

/// The index's declaration, as Datasette's detect_fts reads it.
fn declaration(conn: &Connection) -> String {
    conn.query_row(
        "SELECT sql FROM sqlite_schema WHERE name = 'videos_fts'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_file_from_before_step_7_gets_an_index_datasette_finds_with_the_same_matches() {
    let (_dir, path) = temp_db();
    let old = Store::open_with(&path, before_step_7()).unwrap();
    fill(&old);
    let before = matches(&old);
    assert!(
        !declaration(&old.conn).contains(r#"content="videos""#),
        "step 1 did not quote it so"
    );
    assert_eq!(before[0], ["a"]);
    assert_eq!(before[1], ["b"]);
    drop(old);

    let store = open(&path).unwrap();
    assert_eq!(crate::sqlite::user_version(&store.conn).unwrap(), latest());
    let sql = declaration(&store.conn);
    assert!(sql.contains(r#"content="videos""#), "{sql}");
    assert!(sql.contains(r#"content_rowid="num""#), "{sql}");
    assert!(sql.contains("remove_diacritics 2"), "{sql}");
    assert_eq!(matches(&store), before);
    assert!(store.integrity_check().unwrap());
    // The triggers on videos keep the new index in step.
    store
        .begin_run("r3", RunKind::Run, Secs::new(7300))
        .unwrap();
    store
        .store_trending_page(
            "r3",
            "US",
            1,
            &[
                tagged("a", "Glacier calving", &["lava"]),
                tagged("d", "Volcano", &[]),
            ],
            Secs::new(7300),
        )
        .unwrap();
    let volcano: Vec<String> = store
        .search("volcano", None, 10)
        .unwrap()
        .into_iter()
        .map(|h| h.video_id)
        .collect();
    assert_eq!(volcano, ["d"]);
    assert!(store.integrity_check().unwrap());

    // A new file declares it the same way as an upgraded one.
    let (_dir2, path2) = temp_db();
    let fresh = open(&path2).unwrap();
    assert_eq!(declaration(&fresh.conn), sql);
}

/// Each twin, its table or view, and the columns that are times.
const TWINS: &[(&str, &str, &[&str])] = &[
    ("trending_utc", "trending", &["fetched_at"]),
    ("chart_places_utc", "chart_places", &["fetched_at"]),
    ("search_results_utc", "search_results", &["fetched_at"]),
    ("video_stats_utc", "video_stats", &["fetched_at"]),
    ("video_history_utc", "video_history", &["at"]),
    ("video_history_marked_utc", "video_history_marked", &["at"]),
    (
        "upstream_changes_utc",
        "upstream_changes",
        &["effective_at"],
    ),
    (
        "chart_history_utc",
        "chart_history",
        &["first_seen", "last_seen", "best_rank_at"],
    ),
    (
        "videos_utc",
        "videos",
        &["first_seen_at", "last_seen_at", "removed_at"],
    ),
    ("runs_utc", "runs", &["started_at", "ended_at"]),
    ("run_regions_utc", "run_regions", &["started_at"]),
    ("categories_utc", "categories", &["fetched_at"]),
    (
        "region_state_utc",
        "region_state",
        &[
            "last_complete_at",
            "last_attempt_at",
            "categories_fetched_at",
        ],
    ),
];

fn columns(conn: &Connection, table: &str) -> Vec<String> {
    rows(
        conn,
        &format!("SELECT name FROM pragma_table_info('{table}')"),
    )
    .iter()
    .map(|r| text(&r[0]))
    .collect()
}

#[test]
fn every_twin_has_its_tables_columns_and_rows_with_readable_times() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    fill(&store);
    store
        .store_categories(
            "US",
            &[("17".to_string(), "Sports".to_string())],
            Secs::new(105),
        )
        .unwrap();
    let conn = &store.conn;
    // Every view of the file with a time in Unix seconds has a twin.
    let views: Vec<String> = rows(
        conn,
        "SELECT name FROM sqlite_schema WHERE type = 'view' AND name NOT LIKE '%_utc'",
    )
    .iter()
    .map(|r| text(&r[0]))
    .collect();
    for view in &views {
        assert!(
            TWINS.iter().any(|(_, base, _)| base == view),
            "view {view} has no _utc twin"
        );
    }
    for (twin, base, times) in TWINS {
        let names = columns(conn, base);
        assert_eq!(columns(conn, twin), names, "{twin}");
        for time in *times {
            assert!(names.iter().any(|n| n == time), "{base}.{time}");
        }
        // Row for row, the base with its times written out is the twin.
        let converted: Vec<String> = names
            .iter()
            .map(|n| {
                if times.contains(&n.as_str()) {
                    format!("strftime('%Y-%m-%dT%H:%M:%SZ', {n}, 'unixepoch')")
                } else {
                    n.clone()
                }
            })
            .collect();
        let count = |sql: &str| rows(conn, sql)[0][0].clone();
        let n = count(&format!("SELECT count(*) FROM {base}"));
        assert_ne!(n, Value::Integer(0), "{base} is empty in the fixture");
        assert_eq!(count(&format!("SELECT count(*) FROM {twin}")), n, "{twin}");
        let differ = format!(
            "SELECT count(*) FROM (SELECT {} FROM {base} EXCEPT SELECT * FROM {twin})",
            converted.join(", ")
        );
        assert_eq!(count(&differ), Value::Integer(0), "{twin}");
    }
    // What the times look like, and that NULL stays NULL.
    let runs = rows(
        conn,
        "SELECT run_id, started_at, ended_at FROM runs_utc ORDER BY run_id",
    );
    let runs: Vec<Vec<String>> = runs.iter().map(|r| r.iter().map(text).collect()).collect();
    assert_eq!(
        runs,
        [
            ["r1", "1970-01-01T00:01:40Z", "1970-01-01T00:01:44Z"],
            ["r2", "1970-01-01T01:01:40Z", "NULL"]
        ]
    );
}

#[test]
fn video_history_has_every_sample_with_where_it_was() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    fill(&store);
    let got: Vec<String> = rows(
        &store.conn,
        "SELECT at, source, region, chart, search_name, rank, view_count, run_id
         FROM video_history_utc WHERE video_id = 'a' ORDER BY at",
    )
    .iter()
    .map(|r| r.iter().map(text).collect::<Vec<_>>().join(" "))
    .collect();
    assert_eq!(
        got,
        [
            "1970-01-01T00:01:40Z chart US NULL NULL 1 10 r1",
            "1970-01-01T00:01:42Z search GB NULL fresh 1 10 r1",
            "1970-01-01T01:03:20Z follow NULL NULL NULL NULL 99 NULL",
        ]
    );
    let category: Vec<String> = rows(
        &store.conn,
        "SELECT chart, rank FROM video_history WHERE video_id = 'c' AND chart IS NOT NULL",
    )
    .iter()
    .map(|r| r.iter().map(text).collect::<Vec<_>>().join(" "))
    .collect();
    assert_eq!(category, ["17 1"]);
}

/// The canned queries of the shipped Datasette metadata, and the view they read,
/// answered from indexes like the product's own reads: a year's file must not make
/// them walk the snapshots.
#[test]
fn the_canned_queries_are_answered_from_indexes() {
    let metadata: serde_json::Value =
        serde_json::from_str(include_str!("../../../contrib/datasette/metadata.json")).unwrap();
    let queries = metadata["databases"]["trendsync"]["queries"]
        .as_object()
        .unwrap();
    assert!(queries.contains_key("chart_at") && queries.contains_key("video_history"));
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    fill(&store);
    store.conn.execute_batch("ANALYZE").unwrap();
    for (name, query) in queries {
        let sql = query["sql"].as_str().unwrap();
        let details = query_plan(&store.conn, sql);
        // A view that is a UNION ALL runs as a co-routine, which yields only the rows
        // its own index searches found: reading those back is not a scan of a table.
        let coroutines: Vec<&str> = details
            .iter()
            .filter_map(|d| d.strip_prefix("CO-ROUTINE "))
            .collect();
        for detail in &details {
            let scan = detail.strip_prefix("SCAN ").is_some_and(|what| {
                // The upstream's changes of meaning are a fixed handful of rows,
                // not a table that grows with the history.
                what != "CONSTANT ROW" && what != "upstream_changes" && !coroutines.contains(&what)
            });
            assert!(!scan, "{name} scans: {detail}\n{}", details.join("\n"));
        }
        assert!(!details.is_empty(), "{name}");
    }
}

/// Step 7 changes nothing trendsync reads: `status` and `search` of the build that
/// brought it (whose last step it was) read a file from before it as it is, before
/// any writer upgrades it. (This build's readers need step 9, a store step, as well.)
#[test]
fn a_read_only_open_reads_a_file_from_before_step_7_without_it() {
    let (_dir, path) = temp_db();
    let old = Store::open_with(&path, before_step_7()).unwrap();
    fill(&old);
    let before = matches(&old);
    drop(old);
    let read = Store::open_read_only_with(&path, &FILE[..=before_step_7().len()])
        .unwrap()
        .expect("the store's tables are there");
    assert_eq!(matches(&read), before);
    assert_eq!(
        crate::sqlite::user_version(&read.conn).unwrap() as usize,
        before_step_7().len()
    );
}
