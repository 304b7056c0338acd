//! The file's one schema against real files as older builds left them: whichever
//! opener comes first, nothing is lost; the limiter and the journal run only their own
//! step on a file the store has versioned, and once the store has opened it the file
//! is at the latest version with the layout of a new file; a newer file is refused by
//! every opener alike. A store's open makes the whole file, every owner's tables; the
//! file the store's own tests open is this list less the other owners' steps.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use super::*;
use crate::clock::{Clock, Secs, SystemClock};
use crate::error::chain;
use crate::quota::{Charge, EmbeddedLimiter, Journal, Limiter, Part, PolicyRef};
use crate::sqlite::user_version;
use crate::store::test_support::{self, raw, temp_db};
use crate::store::{RunKind, Store};

/// The limiter's tables exactly as every build before step 4 created them on open,
/// with its own version table.
const OLD_LIMITER: &str = "
CREATE TABLE IF NOT EXISTS quota_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS quota_entry (
    policy     TEXT    NOT NULL,   -- '<budget.key>:<policy>'
    member     TEXT    NOT NULL,   -- the charge id
    at_us      INTEGER NOT NULL,
    expires_us INTEGER NOT NULL,   -- at_us + the window it was charged under
    units      INTEGER NOT NULL,
    method     TEXT    NOT NULL,
    PRIMARY KEY (policy, member)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS quota_entry_by_time ON quota_entry (policy, at_us);
CREATE INDEX IF NOT EXISTS quota_entry_by_expiry ON quota_entry (expires_us);
CREATE TABLE IF NOT EXISTS quota_total (
    policy TEXT PRIMARY KEY,
    total  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS quota_block (
    budget   TEXT PRIMARY KEY,
    until_us INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO quota_schema (version) VALUES (1);
";

/// The journal exactly as builds before the ledger created it.
const PRE_LEDGER_JOURNAL: &str = "
CREATE TABLE IF NOT EXISTS quota_journal (
    charge_id  TEXT    PRIMARY KEY,
    budget     TEXT    NOT NULL,   -- budget.key: the pool the call spent from
    method     TEXT    NOT NULL,
    units      INTEGER NOT NULL,   -- units to the budget's own window
    parts      TEXT    NOT NULL CHECK (json_valid(parts)),  -- [{policy, window_us, max, units}]
    made_at_us INTEGER NOT NULL    -- this host's clock, when the call was let through
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS quota_journal_by_time ON quota_journal (budget, made_at_us);
";

const HOUR: Duration = Duration::from_secs(3600);
const HOUR_US: i64 = 3_600_000_000;

/// Units the old limiter's rows hold in budget `key1`'s hourly window.
const OLD_UNITS: u64 = 106;

/// What an older limiter and a journal from before the ledger left in a file: three
/// charges of budget `key1` still in its hourly window, and two calls made while the
/// limiter was down, waiting for a replay.
fn old_quota_rows(path: &Path) {
    let now = SystemClock.now().as_i64();
    let conn = raw(path);
    conn.execute_batch(OLD_LIMITER).expect("the old limiter");
    conn.execute_batch(PRE_LEDGER_JOURNAL)
        .expect("the old journal");
    for (member, units, ago_s) in [("c-1", 100, 600), ("c-2", 5, 300), ("c-3", 1, 60)] {
        let at = now - ago_s * 1_000_000;
        conn.execute(
            "INSERT INTO quota_entry VALUES ('key1:budget', ?1, ?2, ?3, ?4, 'videos.list')",
            rusqlite::params![member, at, at + HOUR_US, units],
        )
        .expect("an entry");
    }
    conn.execute(
        "INSERT INTO quota_total VALUES ('key1:budget', ?1)",
        [OLD_UNITS as i64],
    )
    .expect("a total");
    let parts = r#"[{"policy":"budget","window_us":3600000000,"max":9500,"units":1}]"#;
    for (id, ago_s) in [("down-1", 30), ("down-2", 20)] {
        conn.execute(
            "INSERT INTO quota_journal VALUES (?1, 'key1', 'videos.list', 1, ?2, ?3)",
            rusqlite::params![id, parts, now - ago_s * 1_000_000],
        )
        .expect("a journalled call");
    }
}

/// A file as the build that introduced store version 3 left it, with a run stored
/// (written in that layout's own SQL: this build's write path needs later steps).
fn store_v3(path: &Path) {
    let store = Store::open_with(path, &MIGRATIONS[..3]).expect("a version 3 store");
    store
        .begin_run("r1", RunKind::Run, Secs::new(100))
        .expect("a run");
    drop(store);
    raw(path)
        .execute_batch(
            "INSERT INTO videos (num, id, title, description, channel_id, channel_title,
                 published_at, view_count, first_seen_at, last_seen_at)
             VALUES (1, 'a', 'title of a', '', 'UCa', 'A', '2024-01-01T00:00:00Z', 7, 100, 100),
                    (2, 'b', 'title of b', '', 'UCb', 'B', '2024-01-01T00:00:00Z', 7, 100, 100);
             INSERT INTO run_nums (num, run_id) VALUES (1, 'r1');
             INSERT INTO regions (num, code) VALUES (1, 'US');
             INSERT INTO fetches (num, run, region, search, fetched_at) VALUES (1, 1, 1, 0, 100);
             INSERT INTO places (fetch, rank, video, offset_s, views) VALUES (1, 1, 1, 0, 7), (1, 2, 2, 0, 7);
             INSERT INTO video_regions (video, region) VALUES (1, 1), (2, 1);",
        )
        .expect("a page in the version 3 layout");
}

/// A file at store version 1 or 2 with rows in every table a version 1 reader knows.
fn store_v1_or_v2(path: &Path, version: usize) {
    drop(Store::open_with(path, &MIGRATIONS[..version]).expect("an old store"));
    raw(path)
        .execute_batch(
            "INSERT INTO runs VALUES ('r1', 'run', 100, 200, 'complete', 3, 3, NULL);
             INSERT INTO videos (num, id, title, description, channel_id, channel_title,
                 published_at, view_count, first_seen_at, last_seen_at)
             VALUES (1, 'a', 'one', '', 'UCa', 'A', '2024-01-01T00:00:00Z', 5, 100, 100),
                    (2, 'b', 'two', '', 'UCb', 'B', '2024-01-01T00:00:00Z', NULL, 100, 100);
             -- Version 1 wrote a stats row with every stored place, the search's too.
             INSERT INTO video_stats VALUES ('a', 100, 'r1', 5, NULL, NULL),
                                            ('b', 100, 'r1', NULL, NULL, NULL),
                                            ('b', 100, 'r1', NULL, NULL, NULL);
             INSERT INTO trending VALUES ('r1', 'US', 1, 'a', 100), ('r1', 'US', 2, 'b', 100);
             INSERT INTO search_results VALUES ('r1', 'US', 'news', 1, 'b', 100);
             INSERT INTO categories VALUES ('US', '10', 'Music', 100);
             INSERT INTO region_state VALUES ('US', 100, 100, 'complete', 100);",
        )
        .expect("version 1 rows");
}

/// Every table's and view's rows, counted, by name; the full-text index's tables
/// aside (their rows are the index's business, checked by the store's own tests).
fn counts(path: &Path) -> BTreeMap<String, i64> {
    let conn = raw(path);
    let names: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE 'videos\\_fts%' ESCAPE '\\'",
        )
        .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
        .expect("listing tables");
    names
        .into_iter()
        .map(|name| {
            let n = conn
                .query_row(&format!("SELECT count(*) FROM \"{name}\""), [], |r| {
                    r.get(0)
                })
                .expect("counting");
            (name, n)
        })
        .collect()
}

/// Every table and view with its columns in order, and every index by name: what a
/// file's schema is, whatever SQL text made it.
fn layout(path: &Path) -> Vec<String> {
    let conn = raw(path);
    conn.prepare(
        "SELECT s.type || ' ' || s.name || '(' || ifnull(
             (SELECT group_concat(c.name || ' ' || c.type || ' ' || c.\"notnull\" || ' ' ||
                 ifnull(c.dflt_value, '-') || ' ' || c.pk, ', ')
              FROM pragma_table_info(s.name) AS c), '') || ')'
         FROM sqlite_schema AS s WHERE s.name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
         ORDER BY s.type, s.name",
    )
    .and_then(|mut q| q.query_map([], |r| r.get(0))?.collect())
    .expect("reading the layout")
}

/// The layout of a file this build creates from nothing.
fn fresh_layout() -> Vec<String> {
    let (_dir, path) = temp_db();
    drop(Store::open(&path).expect("a new file"));
    layout(&path)
}

#[derive(Debug, Clone, Copy)]
enum Opener {
    Store,
    Limiter,
    Journal,
}

const OPENERS: [Opener; 3] = [Opener::Store, Opener::Limiter, Opener::Journal];

/// Opens `path` to write the way `opener` does in the product.
fn open(opener: Opener, path: &Path) -> Result<(), String> {
    match opener {
        Opener::Store => Store::open(path).map(drop).map_err(|e| chain(&e)),
        Opener::Limiter => EmbeddedLimiter::open(path, "key1", crate::clock::system(), None)
            .map(drop)
            .map_err(|e| chain(&e)),
        Opener::Journal => Journal::open(path, crate::clock::system())
            .map(drop)
            .map_err(|e| chain(&e)),
    }
}

/// The file is at the latest version with a new file's layout, and every table or
/// view it held before holds as many rows, but `quota_schema`, which is gone.
fn assert_carried_forward(path: &Path, before: &BTreeMap<String, i64>, what: &str) {
    let version = user_version(&raw(path)).expect("version");
    assert_eq!(version, latest_version(), "{what}");
    let after = counts(path);
    for (name, rows) in before {
        if name == "quota_schema" {
            assert!(!after.contains_key(name), "{what}: quota_schema stays");
        } else {
            assert_eq!(after.get(name), Some(rows), "{what}: rows of {name}");
        }
    }
    assert_eq!(
        layout(path),
        fresh_layout(),
        "{what}: the layout of a new file"
    );
}

/// The old rows read back through the product: the window's units, and the calls
/// journalled while the limiter was down as pending, not as the ledger.
async fn assert_old_quota_rows_read_back(path: &Path, what: &str) {
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open(path, "key1", crate::clock::system(), None).expect("limiter"),
    );
    let status = limiter
        .status(
            &[PolicyRef {
                kind: crate::quota::Kind::Bucket,
                methods: Vec::new(),
                name: "budget".into(),
                window: HOUR.into(),
            }],
            &[],
        )
        .await
        .expect("status");
    assert_eq!(status.policies[0].used, OLD_UNITS, "{what}");
    let journal = Journal::open(path, crate::clock::system()).expect("journal");
    let (pending, unreadable) = journal.pending("key1").expect("pending");
    assert_eq!((pending.len(), unreadable), (2, 0), "{what}");
    assert!(
        journal.ledger("key1").expect("ledger").0.is_empty(),
        "{what}"
    );
}

#[tokio::test]
async fn a_store_file_with_the_limiter_and_a_pre_ledger_journal_loses_nothing() {
    for opener in OPENERS {
        let what = format!("opened first by the {opener:?}");
        let (_dir, path) = temp_db();
        store_v3(&path);
        old_quota_rows(&path);
        let before = counts(&path);
        assert_eq!(before.get("quota_journal"), Some(&2), "the fixture");
        assert_eq!(before.get("quota_schema"), Some(&1), "the fixture");

        open(opener, &path).unwrap_or_else(|e| panic!("{what}: {e}"));
        if !matches!(opener, Opener::Store) {
            // Only the limiter's and the journal's step ran, ahead of the store's,
            // which wait for the store.
            assert_eq!(user_version(&raw(&path)).expect("version"), 3, "{what}");
            assert!(!counts(&path).contains_key("quota_schema"), "{what}");
            assert_old_quota_rows_read_back(&path, &what).await;
            drop(Store::open(&path).expect("store"));
        }
        assert_carried_forward(&path, &before, &what);
        assert_old_quota_rows_read_back(&path, &what).await;
        let store = Store::open(&path).expect("store");
        assert_eq!(store.trending_count("r1").expect("count"), 2, "{what}");
        assert!(store.integrity_check().expect("check"), "{what}");
    }
}

#[tokio::test]
async fn a_file_only_the_embedded_limiter_used_is_versioned_without_loss() {
    let (_dir, path) = temp_db();
    old_quota_rows(&path);
    let before = counts(&path);
    assert_eq!(user_version(&raw(&path)).expect("version"), 0);

    // Read-only opens take the file as it is and change nothing: the store finds
    // none of its tables, the budget reads the old limiter's window.
    assert!(Store::open_read_only(&path).expect("store").is_none());
    let limiter = Limiter::Embedded(
        EmbeddedLimiter::open_read_only(&path, "key1", crate::clock::system(), None)
            .expect("limiter"),
    );
    let window = [PolicyRef {
        kind: crate::quota::Kind::Bucket,
        methods: Vec::new(),
        name: "budget".into(),
        window: HOUR.into(),
    }];
    let status = limiter.status(&window, &[]).await.expect("status");
    assert_eq!(status.policies[0].used, OLD_UNITS);
    drop(limiter);
    assert_eq!(counts(&path), before, "a read-only open changed the file");
    assert_eq!(user_version(&raw(&path)).expect("version"), 0);

    // The journal finds the calls waiting for a replay; opening it to replay them
    // upgrades the file.
    let journal = Journal::open_if_pending(&path, crate::clock::system())
        .expect("journal")
        .expect("pending calls");
    assert_eq!(journal.pending("key1").expect("pending").0.len(), 2);
    drop(journal);
    assert_carried_forward(&path, &before, "opened by the journal");
    assert_old_quota_rows_read_back(&path, "after the upgrade").await;
    let store = Store::open_read_only(&path)
        .expect("store")
        .expect("the store's tables, empty");
    assert_eq!(store.videos_count().expect("count"), 0);
}

/// Versions 1 and 2 need step 3, the store's long data step (it rewrites every
/// snapshot). The limiter and the journal, which open the file inside `budget charge`,
/// run only their own step and leave the store's to the store.
#[test]
fn older_store_files_are_left_to_the_store_by_the_limiter_and_the_journal() {
    for (version, opener) in [
        (1, Opener::Limiter),
        (2, Opener::Journal),
        (1, Opener::Journal),
        (2, Opener::Limiter),
    ] {
        let what = format!("version {version} opened first by the {opener:?}");
        let (_dir, path) = temp_db();
        store_v1_or_v2(&path, version);
        let before = counts(&path);
        assert_eq!(before.get("trending"), Some(&2), "the fixture");

        open(opener, &path).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(
            user_version(&raw(&path)).expect("version") as usize,
            version,
            "{what}"
        );
        let after = counts(&path);
        for (name, rows) in &before {
            assert_eq!(after.get(name), Some(rows), "{what}: rows of {name}");
        }
        for table in ["quota_entry", "quota_journal"] {
            assert_eq!(after.get(table), Some(&0), "{what}: {table}");
        }
        assert!(!after.contains_key("places"), "{what}: step 3 ran");

        let store = Store::open(&path).expect("store");
        drop(store);
        assert_carried_forward(&path, &before, &what);
        // The store finishes what the upgrade left it (its VACUUM) and reads the runs.
        let store = Store::open(&path).expect("store");
        assert_eq!(store.trending_count("r1").expect("count"), 2, "{what}");
        assert!(store.integrity_check().expect("check"), "{what}");
    }
}

/// Threads of one process stand in for processes here: each has its own connection,
/// and SQLite's locks between connections are the same. Real processes are in the
/// integration tests.
#[test]
fn openers_of_every_kind_on_a_fresh_file_together_all_succeed() {
    let fresh = fresh_layout();
    let per_kind = 3;
    for round in 0..5 {
        let (_dir, path) = temp_db();
        let barrier = Arc::new(Barrier::new(per_kind * OPENERS.len()));
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..per_kind)
                .flat_map(|i| OPENERS.map(|opener| (i, opener)))
                .map(|(i, opener)| {
                    let (path, barrier) = (&path, Arc::clone(&barrier));
                    s.spawn(move || {
                        barrier.wait();
                        // Each writes something once open, so that a table missing
                        // or a migration applied twice shows.
                        match opener {
                            Opener::Store => {
                                let store = Store::open(path).map_err(|e| chain(&e))?;
                                store
                                    .begin_run(&format!("r{i}"), RunKind::Run, Secs::new(1))
                                    .map_err(|e| chain(&e))
                            }
                            Opener::Journal => {
                                let journal = Journal::open(path, crate::clock::system())
                                    .map_err(|e| chain(&e))?;
                                let charge = Charge {
                                    calls: 1,
                                    bucket: "budget".into(),
                                    id: format!("j{i}"),
                                    method: "videos.list".into(),
                                    units: 1,
                                    parts: vec![Part {
                                        kind: crate::quota::Kind::Bucket,
                                        policy: "budget".into(),
                                        window: HOUR.into(),
                                        max: 10,
                                        units: 1,
                                    }],
                                };
                                journal.record_at("key1", &charge, 1).map_err(|e| chain(&e))
                            }
                            Opener::Limiter => open(Opener::Limiter, path),
                        }
                    })
                })
                .collect();
            for handle in handles {
                if let Err(e) = handle.join().expect("no panic") {
                    panic!("round {round}: {e}");
                }
            }
        });
        assert_eq!(
            user_version(&raw(&path)).expect("version"),
            latest_version()
        );
        assert_eq!(layout(&path), fresh, "round {round}");
        let rows = counts(&path);
        assert_eq!(rows.get("runs"), Some(&(per_kind as i64)), "round {round}");
        assert_eq!(
            rows.get("quota_journal"),
            Some(&(per_kind as i64)),
            "round {round}"
        );
    }
}

#[test]
fn a_newer_file_is_refused_alike_by_every_opener_and_left_alone() {
    let (_dir, path) = temp_db();
    store_v3(&path);
    old_quota_rows(&path);
    drop(Journal::open(&path, crate::clock::system()).expect("upgrading"));
    let newer = latest_version() + 1;
    raw(&path)
        .execute_batch(&format!("PRAGMA user_version = {newer}"))
        .expect("a newer version");
    let before = (layout(&path), counts(&path));

    let refused: Vec<(&str, Result<(), String>)> = vec![
        ("store", open(Opener::Store, &path)),
        ("limiter", open(Opener::Limiter, &path)),
        ("journal", open(Opener::Journal, &path)),
        (
            "store, read-only",
            Store::open_read_only(&path)
                .map(drop)
                .map_err(|e| chain(&e)),
        ),
        (
            "limiter, read-only",
            EmbeddedLimiter::open_read_only(&path, "key1", crate::clock::system(), None)
                .map(drop)
                .map_err(|e| chain(&e)),
        ),
        (
            "journal, if pending",
            Journal::open_if_pending(&path, crate::clock::system())
                .map(drop)
                .map_err(|e| chain(&e)),
        ),
        (
            "journal, if any",
            Journal::open_if_any(&path, crate::clock::system())
                .map(drop)
                .map_err(|e| chain(&e)),
        ),
    ];
    let sentence = format!(
        "the database {} has schema version {newer}, but this build of trendsync supports \
         at most version {}; upgrade trendsync to use this database",
        path.display(),
        latest_version()
    );
    for (who, result) in refused {
        let message = result.err().unwrap_or_else(|| panic!("{who} opened it"));
        assert!(message.contains(&sentence), "{who}: {message}");
    }
    assert_eq!((layout(&path), counts(&path)), before, "the file changed");
    assert_eq!(user_version(&raw(&path)).expect("version"), newer);
}

#[test]
fn a_limiter_version_no_build_wrote_is_refused_and_nothing_is_lost() {
    let (_dir, path) = temp_db();
    old_quota_rows(&path);
    raw(&path)
        .execute_batch("UPDATE quota_schema SET version = 2")
        .expect("an unknown limiter version");
    let before = (layout(&path), counts(&path));
    for opener in OPENERS {
        let message = open(opener, &path)
            .err()
            .unwrap_or_else(|| panic!("the {opener:?} opened it"));
        assert!(
            message.contains("cannot upgrade the database")
                && message.contains("quota_schema")
                && message.contains("version 2"),
            "{opener:?}: {message}"
        );
    }
    // A command that goes on without the journal logs its error's chain: that says
    // why too.
    let logged = Journal::open(&path, crate::clock::system())
        .map(drop)
        .map_err(|e| chain(&e))
        .expect_err("refused");
    assert!(logged.contains("quota_schema"), "{logged}");
    assert_eq!((layout(&path), counts(&path)), before, "the file changed");
    assert_eq!(user_version(&raw(&path)).expect("version"), 0);
}

#[test]
fn contents_tell_trendsync_files_from_empty_and_foreign_ones() {
    let of = |fill: &dyn Fn(&Path)| {
        let (_dir, path) = temp_db();
        fill(&path);
        contents(&raw(&path)).expect("reading the file")
    };
    assert_eq!(
        of(&|p| drop(Store::open(p).expect("a store"))),
        Contents::Trendsync
    );
    assert_eq!(
        of(&old_quota_rows),
        Contents::Trendsync,
        "an older limiter's file"
    );
    assert_eq!(
        of(&|p| raw(p).execute_batch(PRE_LEDGER_JOURNAL).expect("a journal")),
        Contents::Trendsync,
        "an older journal's file"
    );
    assert_eq!(
        of(&|p| {
            drop(Store::open(p).expect("a store"));
            raw(p)
                .execute_batch("PRAGMA user_version = 99")
                .expect("newer");
        }),
        Contents::Trendsync,
        "a newer build's file, refused later by the open"
    );
    assert_eq!(
        of(&|p| raw(p)
            .execute_batch("CREATE TABLE notes (t TEXT); PRAGMA user_version = 99")
            .expect("another program's")),
        Contents::Foreign,
        "a version proves nothing: another program's file may set any"
    );
    assert_eq!(
        of(&|p| raw(p).execute_batch("VACUUM").expect("an empty database")),
        Contents::Empty
    );
    assert_eq!(
        of(&|p| raw(p)
            .execute_batch("CREATE TABLE notes (body TEXT)")
            .expect("a table")),
        Contents::Foreign
    );
    assert_eq!(
        of(&|p| {
            raw(p)
                .execute_batch("CREATE TABLE runs (id); PRAGMA user_version = 0")
                .expect("a table named like ours");
        }),
        Contents::Foreign,
        "a `runs` table in an unversioned file is someone else's"
    );
}

/// The file has one schema: a store's open brings a new file to this build's version,
/// the last of the list, with the limiter's and the journal's tables beside the
/// store's, and no second version table.
#[test]
fn a_stores_open_makes_the_whole_file_every_owners_tables_included() {
    let (_dir, path) = temp_db();
    let store = Store::open(&path).expect("a new file");
    assert_eq!(
        user_version(&raw(&path)).expect("version"),
        latest_version()
    );
    assert_eq!(latest_version(), MIGRATIONS.len() as u32);
    assert!(latest_version() >= 1);
    let conn = raw(&path);
    let named = |name: &str| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = ?1",
            [name],
            |r| r.get(0),
        )
        .expect("counting")
    };
    for table in [
        "runs",
        "videos",
        "quota_entry",
        "quota_total",
        "quota_block",
        "quota_journal",
        "quota_epoch",
    ] {
        assert_eq!(named(table), 1, "table {table} missing");
    }
    assert_eq!(named("quota_schema"), 0, "no second version table");
    assert!(store.integrity_check().expect("check"));
}

/// The store's tests open files of the store's steps alone
/// ([`test_support::FILE`]): those must be this file's steps less the other owners',
/// in the same order, or they would test a file no build makes.
#[test]
fn the_store_tests_file_is_this_files_list_less_the_other_owners_steps() {
    let others = crate::quota::schema::STEPS;
    let theirs = |m: &Migration| others.iter().any(|o| o.description == m.description);
    let store_steps: Vec<&str> = MIGRATIONS
        .iter()
        .filter(|m| !theirs(m))
        .map(|m| m.description)
        .collect();
    let tested: Vec<&str> = test_support::FILE.iter().map(|m| m.description).collect();
    assert_eq!(tested, store_steps);
}
