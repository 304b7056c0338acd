//! Unit tests of the store against real database files in temporary directories.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use tempfile::TempDir;

use super::*;
use crate::region_status::RegionStatus;
use crate::sqlite::{Migration, SchemaError};
use crate::store::test_support::{FILE, latest, open, open_read_only, raw, temp_db, video};

fn open_fresh() -> (TempDir, Store) {
    let (dir, path) = temp_db();
    let store = open(&path).unwrap();
    (dir, store)
}

fn ids(hits: &[SearchHit]) -> Vec<&str> {
    hits.iter().map(|h| h.video_id.as_str()).collect()
}

/// Rows in the FTS index itself (the docsize shadow table has one per indexed
/// document); `count(*)` on an external-content table would count the content instead.
fn fts_docs(store: &Store) -> i64 {
    store
        .conn
        .query_row("SELECT count(*) FROM videos_fts_docsize", [], |r| r.get(0))
        .unwrap()
}

// ---- opening and migrations ----

#[test]
fn fresh_open_migrates_to_latest_with_wal_and_foreign_keys() {
    let (dir, path) = temp_db();
    let store = open(&path).unwrap();
    assert!(path.exists());
    assert_eq!(crate::sqlite::user_version(&store.conn).unwrap(), latest());
    let mode: String = store
        .conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = store
        .conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
    // NORMAL = 1
    let sync: i64 = store
        .conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 1);
    for table in [
        "runs",
        "videos",
        "video_stats",
        "trending",
        "search_results",
        "categories",
        "region_state",
        "videos_fts",
    ] {
        let n: i64 = store
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = ?1",
                [table],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, 1, "table {table} missing");
    }
    assert!(store.integrity_check().unwrap());
    drop(dir);
}

#[test]
fn reopen_is_a_no_op_and_keeps_data() {
    let (_dir, path) = temp_db();
    {
        let store = open(&path).unwrap();
        store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
        store
            .store_trending_page("r1", "US", 1, &[video("a", "first")], Secs::new(100))
            .unwrap();
    }
    let schema_before: Vec<String> = {
        let conn = raw(&path);
        let mut stmt = conn
            .prepare("SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let store = open(&path).unwrap();
    assert_eq!(crate::sqlite::user_version(&store.conn).unwrap(), latest());
    let schema_after: Vec<String> = {
        let mut stmt = store
            .conn
            .prepare("SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(schema_before, schema_after);
    assert_eq!(store.videos_count().unwrap(), 1);
    assert_eq!(store.trending_count("r1").unwrap(), 1);
}

#[test]
fn newer_schema_is_refused_naming_file_and_versions() {
    let (_dir, path) = temp_db();
    drop(open(&path).unwrap());
    let newer = latest() + 3;
    raw(&path)
        .execute_batch(&format!("PRAGMA user_version = {newer}"))
        .unwrap();

    let err = open(&path).unwrap_err();
    match &err {
        StoreError::Schema(SchemaError::Newer {
            path: p,
            found,
            supported,
        }) => {
            assert_eq!(p, &path);
            assert_eq!(*found, newer);
            assert_eq!(*supported, latest());
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains(&format!("version {newer}")), "{message}");
    assert!(
        message.contains(&format!("at most version {}", latest())),
        "{message}"
    );
    assert!(message.contains("upgrade trendsync"), "{message}");

    // Refused read-only as well, and the refusal changed nothing.
    let err = open_read_only(&path).unwrap_err();
    assert!(matches!(err, StoreError::Schema(SchemaError::Newer { found, .. }) if found == newer));
    let v: u32 = raw(&path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, newer);
}

/// Several processes opening a fresh file at once race to switch it to WAL and to
/// migrate it. One round rarely loses the race, so run many: without the WAL retry
/// about a quarter of rounds failed with SQLITE_BUSY.
#[test]
fn concurrent_fresh_opens_all_succeed_and_can_write() {
    let threads = 8;
    for round in 0..30 {
        let (_dir, path) = temp_db();
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let path = path.clone();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    let store = open(&path)?;
                    let run = format!("run-{i}");
                    store.begin_run(&run, RunKind::Run, Secs::new(1000 + i as i64))?;
                    let page: Vec<_> = (0..20)
                        .map(|j| video(&format!("v{j}"), &format!("title {i} {j}")))
                        .collect();
                    store.store_trending_page(
                        &run,
                        &format!("R{i}"),
                        1,
                        &page,
                        Secs::new(1000 + i as i64),
                    )?;
                    Ok::<_, StoreError>(())
                })
            })
            .collect();
        for handle in handles {
            if let Err(e) = handle.join().unwrap() {
                panic!("round {round}: {e:?}");
            }
        }
        let store = open(&path).unwrap();
        assert_eq!(crate::sqlite::user_version(&store.conn).unwrap(), latest());
        assert_eq!(store.videos_count().unwrap(), 20);
        let stats: i64 = store
            .conn
            .query_row("SELECT count(*) FROM video_stats", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stats, 20 * threads as i64);
        assert_eq!(fts_docs(&store), 20);
        assert!(store.integrity_check().unwrap());
    }
}

/// A later migration runs on a populated file, and a failing one rolls back whole,
/// leaving the version where it was.
#[test]
fn forward_migration_applies_on_existing_data_and_failure_rolls_back() {
    let (_dir, path) = temp_db();
    {
        let store = open(&path).unwrap();
        store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
        store
            .store_trending_page("r1", "US", 1, &[video("a", "one")], Secs::new(1))
            .unwrap();
    }
    let latest = latest();

    let mut broken: Vec<Migration> = FILE.to_vec();
    broken.push(Migration {
        description: "half-broken step",
        sql: "CREATE TABLE extra (x INTEGER); INSERT INTO no_such_table VALUES (1);",
        data: None,
    });
    let err = Store::open_with(&path, &broken).unwrap_err();
    assert!(
        matches!(err, StoreError::Schema(SchemaError::Step { to_version, .. }) if to_version == latest + 1),
        "{err:?}"
    );
    let conn = raw(&path);
    let v: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, latest);
    let extra: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'extra'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(extra, 0, "the failed step must roll back entirely");
    drop(conn);

    let mut good: Vec<Migration> = FILE.to_vec();
    good.push(Migration {
        description: "test step",
        sql: "CREATE TABLE extra AS SELECT id FROM videos;",
        data: None,
    });
    let store = Store::open_with(&path, &good).unwrap();
    assert_eq!(
        crate::sqlite::user_version(&store.conn).unwrap(),
        latest + 1
    );
    let copied: String = store
        .conn
        .query_row("SELECT id FROM extra", [], |r| r.get(0))
        .unwrap();
    assert_eq!(copied, "a");

    // This build (without the step) now refuses the file as newer.
    drop(store);
    assert!(matches!(
        open(&path),
        Err(StoreError::Schema(SchemaError::Newer { found, supported, .. }))
            if found == latest + 1 && supported == latest
    ));
}

// ---- writing ----

#[test]
fn absent_counts_stay_null_in_videos_and_stats() {
    let (_dir, store) = open_fresh();
    store.begin_run("r1", RunKind::Run, Secs::new(10)).unwrap();
    let mut v = video("hidden", "likes hidden");
    v.view_count = None;
    v.like_count = None;
    v.comment_count = None;
    v.tags = None;
    v.default_language = None;
    v.region_restriction = None;
    let mut zero = video("zero", "really zero");
    zero.view_count = Some(0);
    zero.tags = Some(vec![]);
    store
        .store_trending_page("r1", "US", 1, &[v.clone(), zero.clone()], Secs::new(10))
        .unwrap();

    assert_eq!(store.video("hidden").unwrap().unwrap(), v);
    assert_eq!(store.video("zero").unwrap().unwrap(), zero);
    let stats = store.video_stats("hidden").unwrap();
    assert_eq!(
        stats,
        vec![StatsRow {
            fetched_at: 10,
            run_id: "r1".to_string(),
            view_count: None,
            like_count: None,
            comment_count: None,
        }]
    );
    let types: (String, String, String, String) = store
        .conn
        .query_row(
            "SELECT typeof(view_count), typeof(like_count), typeof(comment_count), typeof(tags)
             FROM videos WHERE id = 'hidden'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        types,
        ("null".into(), "null".into(), "null".into(), "null".into())
    );
    let stat_types: (String, String, String) = store
        .conn
        .query_row(
            "SELECT typeof(view_count), typeof(like_count), typeof(comment_count)
             FROM video_stats WHERE video_id = 'hidden'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(stat_types, ("null".into(), "null".into(), "null".into()));
    let (zero_views, zero_tags): (i64, String) = store
        .conn
        .query_row(
            "SELECT view_count, tags FROM videos WHERE id = 'zero'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((zero_views, zero_tags.as_str()), (0, "[]"));
}

#[test]
fn upsert_updates_latest_metadata_and_appends_stats_per_fetch() {
    let (_dir, store) = open_fresh();
    store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
    store
        .begin_run("r2", RunKind::Backfill, Secs::new(200))
        .unwrap();
    let first = video("a", "old title");
    store
        .store_trending_page("r1", "US", 1, std::slice::from_ref(&first), Secs::new(100))
        .unwrap();

    let mut second = first.clone();
    second.title = "new title".to_string();
    second.view_count = Some(5000);
    second.like_count = None; // hidden since
    store
        .store_trending_page("r2", "GB", 1, std::slice::from_ref(&second), Secs::new(200))
        .unwrap();

    // An older fetch stored late (another process) adds its counts but does not
    // overwrite the newer metadata.
    let mut stale = first.clone();
    stale.title = "stale title".to_string();
    stale.view_count = Some(3000);
    store
        .store_trending_page("r1", "DE", 1, std::slice::from_ref(&stale), Secs::new(150))
        .unwrap();

    assert_eq!(store.videos_count().unwrap(), 1);
    assert_eq!(store.video("a").unwrap().unwrap(), second);
    let views: Vec<(i64, Option<i64>, Option<i64>)> = store
        .video_stats("a")
        .unwrap()
        .into_iter()
        .map(|s| (s.fetched_at, s.view_count, s.like_count))
        .collect();
    assert_eq!(
        views,
        vec![
            (100, Some(1000), Some(100)),
            (150, Some(3000), Some(100)),
            (200, Some(5000), None)
        ]
    );
    let (first_seen, last_seen): (i64, i64) = store
        .conn
        .query_row(
            "SELECT first_seen_at, last_seen_at FROM videos WHERE id = 'a'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((first_seen, last_seen), (100, 200));
}

#[test]
fn trending_ranks_start_at_first_rank_in_page_order() {
    let (_dir, store) = open_fresh();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
    let page1: Vec<_> = (0..50).map(|i| video(&format!("p1-{i}"), "t")).collect();
    let page2: Vec<_> = (0..3).map(|i| video(&format!("p2-{i}"), "t")).collect();
    assert_eq!(
        store
            .store_trending_page("r1", "US", 1, &page1, Secs::new(1))
            .unwrap(),
        50
    );
    assert_eq!(
        store
            .store_trending_page("r1", "US", 51, &page2, Secs::new(2))
            .unwrap(),
        3
    );
    let mut stmt = store
        .conn
        .prepare("SELECT rank, video_id, fetched_at FROM trending WHERE region = 'US' AND rank >= 49 ORDER BY rank")
        .unwrap();
    let rows: Vec<(i64, String, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        vec![
            (49, "p1-48".to_string(), 1),
            (50, "p1-49".to_string(), 1),
            (51, "p2-0".to_string(), 2),
            (52, "p2-1".to_string(), 2),
            (53, "p2-2".to_string(), 2),
        ]
    );
    let min_rank: i64 = store
        .conn
        .query_row("SELECT min(rank) FROM trending", [], |r| r.get(0))
        .unwrap();
    assert_eq!(min_rank, 1);
    assert_eq!(store.trending_count("r1").unwrap(), 53);
    assert_eq!(store.trending_count("other").unwrap(), 0);

    // Storing the same page again in the run (a retry) replaces, not duplicates.
    store
        .store_trending_page("r1", "US", 51, &page2, Secs::new(3))
        .unwrap();
    assert_eq!(store.trending_count("r1").unwrap(), 53);
}

#[test]
fn search_pages_record_name_and_ranks() {
    let (_dir, store) = open_fresh();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
    let page: Vec<_> = ["x", "y"].iter().map(|id| video(id, "found")).collect();
    assert_eq!(
        store
            .store_search_page("r1", "FR", "fresh", 1, &page, Secs::new(7))
            .unwrap(),
        2
    );
    let mut stmt = store
        .conn
        .prepare("SELECT region, search_name, rank, video_id, fetched_at FROM search_results ORDER BY rank")
        .unwrap();
    let rows: Vec<(String, String, i64, String, i64)> = stmt
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        rows,
        vec![
            ("FR".into(), "fresh".into(), 1, "x".into(), 7),
            ("FR".into(), "fresh".into(), 2, "y".into(), 7),
        ]
    );
    assert_eq!(store.trending_count("r1").unwrap(), 0);
    assert_eq!(store.video_stats("x").unwrap().len(), 1);
}

#[test]
fn pages_need_a_begun_run_and_fail_whole() {
    let (_dir, store) = open_fresh();
    let err = store
        .store_trending_page("never-begun", "US", 1, &[video("a", "t")], Secs::new(1))
        .unwrap_err();
    assert!(matches!(err, StoreError::Sqlite { .. }), "{err:?}");
    assert!(err.to_string().contains("never-begun"), "{err}");
    // Nothing of the failed page is left behind.
    assert_eq!(store.videos_count().unwrap(), 0);
    assert_eq!(fts_docs(&store), 0);
}

#[test]
fn the_last_finished_run_of_each_kind() {
    let (_dir, store) = open_fresh();
    assert_eq!(store.last_finished_run(RunKind::Run).unwrap(), None);
    let ended = |status: RegionStatus, at: i64| RunOutcome {
        status,
        units: 3,
        calls: 3,
        stop_reason: None,
        ended_at: Secs::new(at),
        duration_us: 9_600_000,
    };
    store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
    store
        .finish_run("r1", &ended(RegionStatus::Complete, 110))
        .unwrap();
    store
        .begin_run("b1", RunKind::Backfill, Secs::new(120))
        .unwrap();
    store
        .finish_run("b1", &ended(RegionStatus::BudgetExhausted, 130))
        .unwrap();
    // Started later but still running: not finished, so not the last finished one.
    store.begin_run("r2", RunKind::Run, Secs::new(140)).unwrap();
    let run = store.last_finished_run(RunKind::Run).unwrap().unwrap();
    assert_eq!((run.run_id.as_str(), run.ended_at), ("r1", Some(110)));
    let backfill = store.last_finished_run(RunKind::Backfill).unwrap().unwrap();
    assert_eq!(
        (backfill.run_id.as_str(), backfill.status.known()),
        ("b1", Some(RegionStatus::BudgetExhausted))
    );
    store
        .finish_run("r2", &ended(RegionStatus::Failed, 150))
        .unwrap();
    let run = store.last_finished_run(RunKind::Run).unwrap().unwrap();
    assert_eq!(
        (run.run_id.as_str(), run.status.known()),
        ("r2", Some(RegionStatus::Failed))
    );
}

#[test]
fn runs_begin_finish_and_last_run() {
    let (_dir, store) = open_fresh();
    assert_eq!(store.last_run().unwrap(), None);
    store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
    store
        .begin_run("r2", RunKind::Backfill, Secs::new(200))
        .unwrap();
    assert_eq!(
        store.last_run().unwrap(),
        Some(RunRecord {
            run_id: "r2".into(),
            kind: RunKind::Backfill,
            started_at: 200,
            ended_at: None,
            status: RegionStatus::Running.into(),
            units: None,
            calls: None,
            stop_reason: None,
            duration_us: None,
        })
    );
    let outcome = RunOutcome {
        status: RegionStatus::BudgetExhausted,
        units: 9500,
        calls: 120,
        stop_reason: Some("ceiling 9500 reached".into()),
        ended_at: Secs::new(260),
        duration_us: 59_750_001,
    };
    store.finish_run("r2", &outcome).unwrap();
    let last = store.last_run().unwrap().unwrap();
    assert_eq!(last.status, RegionStatus::BudgetExhausted);
    assert_eq!(last.ended_at, Some(260));
    assert_eq!(last.units, Some(9500));
    assert_eq!(last.calls, Some(120));
    assert_eq!(last.stop_reason.as_deref(), Some("ceiling 9500 reached"));
    assert_eq!(last.duration_us, Some(59_750_001));

    assert!(matches!(
        store.finish_run("nope", &outcome),
        Err(StoreError::UnknownRun { run_id, .. }) if run_id == "nope"
    ));
    assert!(store.begin_run("r1", RunKind::Run, Secs::new(300)).is_err());
    let huge = RunOutcome {
        units: u64::MAX,
        ..outcome
    };
    assert!(store.finish_run("r1", &huge).is_err());
}

/// Pages stay in the WAL while a run stores them (no checkpoint on the page path);
/// finish_run copies them into the database file.
#[test]
fn finish_run_checkpoints_what_the_pages_wrote() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
    for page in 0..5u32 {
        let videos: Vec<_> = (0..50)
            .map(|i| {
                let mut v = video(&format!("p{page}-{i}"), "a title");
                v.description = "words ".repeat(300);
                v
            })
            .collect();
        store
            .store_trending_page("r1", "US", 1 + page * 50, &videos, Secs::new(1))
            .unwrap();
    }
    let before = std::fs::metadata(&path).unwrap().len();
    store
        .finish_run(
            "r1",
            &RunOutcome {
                status: RegionStatus::Complete,
                units: 5,
                calls: 5,
                stop_reason: None,
                ended_at: Secs::new(2),
                duration_us: 1_000_000,
            },
        )
        .unwrap();
    let after = std::fs::metadata(&path).unwrap().len();
    // 250 videos with ~1.8 KB descriptions: far more than the empty schema.
    assert!(
        after > before + 250 * 1500,
        "database file {before} -> {after} bytes"
    );
}

#[test]
fn region_state_and_categories() {
    let (_dir, store) = open_fresh();
    assert_eq!(store.region_states().unwrap(), vec![]);
    assert_eq!(store.categories_fetched_at("US").unwrap(), None);

    store.mark_region_complete("US", Secs::new(500)).unwrap();
    store.mark_region_complete("GB", Secs::new(300)).unwrap();
    store
        .mark_region_attempt("DE", Secs::new(400), RegionStatus::BudgetExhausted)
        .unwrap();
    store
        .mark_region_attempt("US", Secs::new(600), RegionStatus::Failed)
        .unwrap();
    let states = store.region_states().unwrap();
    assert_eq!(
        states,
        vec![
            RegionState {
                region: "DE".into(),
                last_complete_at: None,
                last_attempt_at: Some(400),
                last_status: Some(RegionStatus::BudgetExhausted.into()),
            },
            RegionState {
                region: "GB".into(),
                last_complete_at: Some(300),
                last_attempt_at: Some(300),
                last_status: Some(RegionStatus::Complete.into()),
            },
            RegionState {
                region: "US".into(),
                last_complete_at: Some(500),
                last_attempt_at: Some(600),
                last_status: Some(RegionStatus::Failed.into()),
            },
        ]
    );

    let cats = vec![
        ("1".to_string(), "Film & Animation".to_string()),
        ("10".to_string(), "Music".to_string()),
    ];
    store.store_categories("US", &cats, Secs::new(700)).unwrap();
    assert_eq!(store.categories_fetched_at("US").unwrap(), Some(700));
    assert_eq!(store.categories("US").unwrap(), cats);
    // Replaces the region's set; other regions untouched.
    store.store_categories("GB", &cats, Secs::new(710)).unwrap();
    let fewer = vec![("20".to_string(), "Gaming".to_string())];
    store
        .store_categories("US", &fewer, Secs::new(800))
        .unwrap();
    assert_eq!(store.categories("US").unwrap(), fewer);
    assert_eq!(store.categories("GB").unwrap(), cats);
    assert_eq!(store.categories_fetched_at("US").unwrap(), Some(800));
    // Storing categories left the fetch state alone.
    assert_eq!(
        store.region_states().unwrap()[2].last_complete_at,
        Some(500)
    );
}

// ---- full-text search ----

fn search_fixture() -> (TempDir, Store) {
    let (dir, store) = open_fresh();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();

    let mut in_title = video("title-hit", "Volcano eruption filmed up close");
    in_title.description = "A long trip to the mountains.".into();
    in_title.view_count = Some(42);

    let mut in_description = video("desc-hit", "Travel diary day 3");
    in_description.description =
        "We walked for hours and finally saw the volcano in the distance.".into();

    let mut in_tags = video("tag-hit", "Cooking pasta");
    in_tags.tags = Some(vec!["italian".into(), "carbonara".into()]);

    let mut in_channel = video("channel-hit", "Weekly news");
    in_channel.channel_title = "Zephyrine Broadcasting".into();

    let mut accented = video("accent-hit", "Café crème tutorial");
    accented.tags = None;

    let mut cats = video("cats", "My cat reacts to a video of birds");
    cats.description = "funny".into();

    store
        .store_trending_page(
            "r1",
            "US",
            1,
            &[in_title, in_description, in_tags, accented, cats],
            Secs::new(1),
        )
        .unwrap();
    store
        .store_search_page("r1", "GB", "fresh", 1, &[in_channel], Secs::new(1))
        .unwrap();
    store
        .store_trending_page(
            "r1",
            "DE",
            1,
            &[video("cats", "My cat reacts to a video of birds")],
            Secs::new(1),
        )
        .unwrap();
    (dir, store)
}

#[test]
fn search_finds_words_in_every_indexed_column() {
    let (_dir, store) = search_fixture();
    assert_eq!(
        ids(&store.search("eruption", None, 10).unwrap()),
        ["title-hit"]
    );
    assert_eq!(
        ids(&store.search("distance", None, 10).unwrap()),
        ["desc-hit"]
    );
    assert_eq!(
        ids(&store.search("carbonara", None, 10).unwrap()),
        ["tag-hit"]
    );
    assert_eq!(
        ids(&store.search("zephyrine", None, 10).unwrap()),
        ["channel-hit"]
    );
    // remove_diacritics: plain letters find accented words and back.
    assert_eq!(
        ids(&store.search("cafe creme", None, 10).unwrap()),
        ["accent-hit"]
    );
    // A plain multi-word query means all words.
    assert_eq!(ids(&store.search("cat video", None, 10).unwrap()), ["cats"]);
    assert!(store.search("cat volcano", None, 10).unwrap().is_empty());
    assert!(
        store
            .search("nonexistentword", None, 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn search_ranks_title_above_description_and_fills_hits() {
    let (_dir, store) = search_fixture();
    let hits = store.search("volcano", None, 10).unwrap();
    assert_eq!(ids(&hits), ["title-hit", "desc-hit"]);
    let top = &hits[0];
    assert_eq!(top.title, "Volcano eruption filmed up close");
    assert_eq!(top.channel_title, "Some Channel");
    assert_eq!(top.view_count, Some(42));
    assert_eq!(top.published_at, "2024-05-01T12:00:00Z");
    assert_eq!(top.regions, ["US"]);
    assert!(top.snippet.contains("[Volcano]"), "{}", top.snippet);
    assert!(hits[1].snippet.contains("[volcano]"), "{}", hits[1].snippet);

    assert_eq!(store.search("volcano", None, 1).unwrap().len(), 1);
    let cats = store.search("birds", None, 10).unwrap();
    assert_eq!(cats[0].regions, ["DE", "US"]);
}

#[test]
fn search_region_filter_uses_where_the_video_was_seen() {
    let (_dir, store) = search_fixture();
    assert_eq!(
        ids(&store.search("volcano", Some("US"), 10).unwrap()),
        ["title-hit", "desc-hit"]
    );
    assert!(store.search("volcano", Some("DE"), 10).unwrap().is_empty());
    assert_eq!(
        ids(&store.search("birds", Some("DE"), 10).unwrap()),
        ["cats"]
    );
    // Seen only through a regional search.
    assert_eq!(
        ids(&store.search("zephyrine", Some("GB"), 10).unwrap()),
        ["channel-hit"]
    );
    assert!(
        store
            .search("zephyrine", Some("US"), 10)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn updated_title_replaces_its_indexed_terms() {
    let (_dir, store) = search_fixture();
    store.begin_run("r2", RunKind::Run, Secs::new(2)).unwrap();
    let mut renamed = store.video("title-hit").unwrap().unwrap();
    renamed.title = "Glacier calving filmed up close".into();
    renamed.tags = Some(vec!["ice".into()]);
    store
        .store_trending_page("r2", "US", 1, &[renamed], Secs::new(2))
        .unwrap();
    assert!(store.search("eruption", None, 10).unwrap().is_empty());
    assert!(
        store
            .search("music", Some("US"), 10)
            .unwrap()
            .iter()
            .all(|h| h.video_id != "title-hit")
    );
    assert_eq!(
        ids(&store.search("glacier", None, 10).unwrap()),
        ["title-hit"]
    );
    assert_eq!(ids(&store.search("ice", None, 10).unwrap()), ["title-hit"]);
    // A count-only refresh leaves the index as it was.
    store.begin_run("r3", RunKind::Run, Secs::new(3)).unwrap();
    let mut recount = store.video("title-hit").unwrap().unwrap();
    recount.view_count = Some(1);
    store
        .store_trending_page("r3", "US", 1, &[recount], Secs::new(3))
        .unwrap();
    assert_eq!(
        ids(&store.search("glacier", None, 10).unwrap()),
        ["title-hit"]
    );
    assert_eq!(fts_docs(&store), store.videos_count().unwrap() as i64);
    assert!(store.integrity_check().unwrap());
}

#[test]
fn deleted_video_leaves_the_index() {
    let (_dir, store) = search_fixture();
    assert_eq!(store.search("carbonara", None, 10).unwrap().len(), 1);
    store
        .conn
        .execute("DELETE FROM videos WHERE id = 'tag-hit'", [])
        .unwrap();
    assert!(store.search("carbonara", None, 10).unwrap().is_empty());
    assert!(store.search("pasta", None, 10).unwrap().is_empty());
    assert_eq!(fts_docs(&store), store.videos_count().unwrap() as i64);
    // Its stats and chart positions went with it.
    assert!(store.video_stats("tag-hit").unwrap().is_empty());
    assert!(store.integrity_check().unwrap());
}

#[test]
fn bad_fts_syntax_is_a_bad_query_that_explains_quoting() {
    let (_dir, store) = search_fixture();
    for query in ["\"unbalanced", "AND OR", "volcano AND", "(", "   "] {
        match store.search(query, None, 10) {
            Err(StoreError::BadQuery { query: q, message }) => {
                assert_eq!(q, query);
                assert!(!message.is_empty());
            }
            other => panic!("{query:?}: expected BadQuery, got {other:?}"),
        }
    }
    let message = store.search("AND OR", None, 10).unwrap_err().to_string();
    assert!(message.contains("\"AND OR\""), "{message}");
    // How to quote is the tip shown beside it.
    assert!(super::QUERY_TIP.contains("double quote"));
    // Quoting as the message says makes it work.
    assert_eq!(
        ids(&store.search("\"volcano eruption\"", None, 10).unwrap()),
        ["title-hit"]
    );
}

#[test]
fn integrity_check_notices_an_index_out_of_step() {
    let (_dir, store) = search_fixture();
    assert!(store.integrity_check().unwrap());
    // An index entry with no video behind it, as a broken trigger would leave.
    store
        .conn
        .execute(
            "INSERT INTO videos_fts (rowid, title, description, tags_text, channel_title)
             VALUES (9999, 'ghost', '', '', '')",
            [],
        )
        .unwrap();
    assert!(!store.integrity_check().unwrap());
}

// ---- read-only open (dry run) ----

fn populated(path: &Path) -> Store {
    let store = open(path).unwrap();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
    store
        .store_trending_page("r1", "US", 1, &[video("a", "volcano")], Secs::new(1))
        .unwrap();
    store.mark_region_complete("US", Secs::new(1)).unwrap();
    store
}

fn companions(path: &Path) -> (PathBuf, PathBuf) {
    let wal = PathBuf::from(format!("{}-wal", path.display()));
    let shm = PathBuf::from(format!("{}-shm", path.display()));
    (wal, shm)
}

fn assert_cannot_write(store: &Store) {
    let err = store
        .begin_run("dry", RunKind::Run, Secs::new(9))
        .unwrap_err();
    match &err {
        StoreError::Sqlite { source, .. } => assert_eq!(
            source.sqlite_error_code(),
            Some(rusqlite::ErrorCode::ReadOnly),
            "{err:?}"
        ),
        other => panic!("expected a read-only failure, got {other:?}"),
    }
    assert!(store.mark_region_complete("US", Secs::new(9)).is_err());
    assert!(
        store
            .store_trending_page("r1", "US", 1, &[video("b", "x")], Secs::new(9))
            .is_err()
    );
}

#[test]
fn read_only_open_of_a_missing_file_creates_nothing() {
    let (dir, path) = temp_db();
    assert!(open_read_only(&path).unwrap().is_none());
    assert!(!path.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn read_only_open_while_a_writer_has_the_wal_open() {
    let (_dir, path) = temp_db();
    let writer = populated(&path);
    let (wal, _) = companions(&path);
    assert!(wal.exists());

    let reader = open_read_only(&path).unwrap().unwrap();
    assert!(reader.is_read_only());
    assert_eq!(reader.videos_count().unwrap(), 1);
    assert_eq!(ids(&reader.search("volcano", None, 5).unwrap()), ["a"]);
    assert_eq!(reader.region_states().unwrap()[0].last_complete_at, Some(1));
    assert!(reader.integrity_check().unwrap());
    assert_cannot_write(&reader);

    // The reader sees what the writer commits afterwards.
    writer.mark_region_complete("GB", Secs::new(2)).unwrap();
    assert_eq!(reader.region_states().unwrap().len(), 2);
    assert_eq!(writer.region_states().unwrap().len(), 2);
}

#[test]
fn read_only_open_of_a_cleanly_closed_wal_database() {
    let (_dir, path) = temp_db();
    drop(populated(&path));
    let (wal, shm) = companions(&path);
    assert!(
        !wal.exists() && !shm.exists(),
        "a clean close removes -wal and -shm"
    );
    let before = std::fs::read(&path).unwrap();

    let reader = open_read_only(&path).unwrap().unwrap();
    assert_eq!(reader.videos_count().unwrap(), 1);
    assert_eq!(reader.last_run().unwrap().unwrap().run_id, "r1");
    assert_eq!(ids(&reader.search("volcano", None, 5).unwrap()), ["a"]);
    assert_cannot_write(&reader);
    drop(reader);

    // The database itself is byte for byte what it was; at most SQLite's empty WAL and
    // its index were left beside it (documented on open_read_only).
    assert_eq!(std::fs::read(&path).unwrap(), before);
    if wal.exists() {
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0);
    }
    // And a writer can still use the file afterwards.
    let store = open(&path).unwrap();
    store.mark_region_complete("GB", Secs::new(5)).unwrap();
    assert!(store.integrity_check().unwrap());
}

#[test]
fn read_only_open_of_an_unmigrated_or_older_file() {
    let (_dir, path) = temp_db();
    // A file with no trendsync schema (e.g. only another module's tables).
    raw(&path)
        .execute_batch("CREATE TABLE quota_example (x INTEGER);")
        .unwrap();
    assert!(open_read_only(&path).unwrap().is_none());
    let v: u32 = raw(&path)
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 0, "a read-only open must not migrate");

    // An older schema than this build's: a clear error, no migration.
    let (_dir2, path2) = temp_db();
    drop(populated(&path2));
    let future = Migration {
        description: "future step",
        sql: "CREATE TABLE later (x INTEGER);",
        data: None,
    };
    let mut longer: Vec<Migration> = FILE.to_vec();
    longer.push(future);
    let mut own: Vec<Migration> = schema::STEPS.to_vec();
    own.push(future);
    let db = crate::sqlite::Db::open_for_reading(&path2).expect("the database");
    let err = Store::reading(&db, &longer, &own).unwrap_err();
    match &err {
        StoreError::OlderSchema {
            found, supported, ..
        } => {
            assert_eq!(*found, latest());
            assert_eq!(*supported, latest() + 1);
        }
        other => panic!("expected OlderSchema, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains(&format!("trendsync --db {} prune", path2.display())),
        "{err}"
    );
}

#[test]
fn read_only_open_needs_only_the_steps_that_shape_the_stores_tables() {
    // A file as this build's store steps leave it, before a later step of the
    // limiter's: what an upgraded trendsync finds until its first writing command.
    // `status` must read it. (This build's last step may be the store's own; a
    // limiter's step after it is made up.)
    let mut migrations: Vec<Migration> = FILE.to_vec();
    migrations.push(Migration {
        description: "a later step of the limiter's",
        sql: "CREATE TABLE quota_later (x INTEGER);",
        data: None,
    });
    let store_steps = crate::sqlite::version_after(&migrations, schema::STEPS) as usize;
    assert!(
        store_steps < migrations.len(),
        "a later step is another owner's"
    );
    let (_dir, path) = temp_db();
    let store = Store::open_with(&path, &migrations[..store_steps]).unwrap();
    store.begin_run("r1", RunKind::Run, Secs::new(1)).unwrap();
    drop(store);
    let read = Store::open_read_only_with(&path, &migrations)
        .unwrap()
        .expect("the store's tables are there");
    let runs: i64 = read
        .conn
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 1);
    assert_eq!(
        crate::sqlite::user_version(&read.conn).unwrap() as usize,
        store_steps,
        "a read-only open must not migrate"
    );

    // One store step fewer is a file whose store tables are older: refused.
    let (_dir2, path2) = temp_db();
    drop(Store::open_with(&path2, &migrations[..store_steps - 1]).unwrap());
    assert!(matches!(
        Store::open_read_only_with(&path2, &migrations),
        Err(StoreError::OlderSchema { .. })
    ));
}

#[test]
fn read_only_open_of_something_that_is_not_a_database() {
    let (_dir, path) = temp_db();
    std::fs::write(
        &path,
        b"this is not sqlite, just text long enough to have a header....",
    )
    .unwrap();
    let err = open_read_only(&path).unwrap_err();
    assert!(matches!(err, StoreError::Open { .. }), "{err:?}");
    assert!(err.to_string().contains(&path.display().to_string()));
    assert!(matches!(open(&path), Err(StoreError::Open { .. })));
}

// ---- property: the index follows the table ----

mod property {
    use proptest::prelude::*;

    use super::*;

    const WORDS: &[&str] = &[
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];

    #[derive(Debug, Clone)]
    struct Op {
        search: bool,
        videos: Vec<(u8, u8, u8, Option<u8>)>, // id, title word, description word, tag word
    }

    fn op() -> impl Strategy<Value = Op> {
        (
            any::<bool>(),
            prop::collection::vec((0u8..12, 0u8..8, 0u8..8, prop::option::of(0u8..8)), 0..8),
        )
            .prop_map(|(search, videos)| Op { search, videos })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        #[test]
        fn index_rows_match_videos_after_any_page_sequence(ops in prop::collection::vec(op(), 1..12)) {
            let (_dir, store) = open_fresh();
            store.begin_run("r", RunKind::Run, Secs::new(0)).unwrap();
            let mut latest_title = std::collections::HashMap::new();
            for (i, op) in ops.iter().enumerate() {
                let page: Vec<VideoRecord> = op
                    .videos
                    .iter()
                    .map(|&(id, t, d, tag)| {
                        let mut v = video(&format!("v{id}"), WORDS[t as usize]);
                        v.description = WORDS[d as usize].to_string();
                        v.tags = tag.map(|w| vec![WORDS[w as usize].to_string()]);
                        v
                    })
                    .collect();
                for v in &page {
                    latest_title.insert(v.id.clone(), v.title.clone());
                }
                let at = i as i64 + 1;
                if op.search {
                    store.store_search_page("r", "US", "s", 1, &page, Secs::new(at)).unwrap();
                } else {
                    store.store_trending_page("r", "US", 1, &page, Secs::new(at)).unwrap();
                }
            }
            prop_assert_eq!(fts_docs(&store), store.videos_count().unwrap() as i64);
            prop_assert_eq!(store.videos_count().unwrap() as usize, latest_title.len());
            prop_assert!(store.integrity_check().unwrap());
            for (id, title) in &latest_title {
                let hits = store.search(&format!("title:{title}"), None, 100).unwrap();
                prop_assert!(hits.iter().any(|h| &h.video_id == id), "{} not found by its title {}", id, title);
                for hit in &hits {
                    prop_assert_eq!(&latest_title[&hit.video_id], title);
                }
            }
        }
    }
}
