//! Unit tests of `runner/lock.rs`.

use super::*;
use crate::clock::Secs;

#[test]
fn a_held_lock_is_refused_until_released() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = DbFiles::of(&dir.path().join("t.db"));
    let held = try_lock(&db, "US").expect("locking").expect("free");
    assert!(
        try_lock(&db, "US").expect("locking").is_none(),
        "a second holder is refused"
    );
    assert!(
        try_lock(&db, "GB").expect("locking").is_some(),
        "other regions are independent"
    );
    drop(held);
    assert!(try_lock(&db, "US").expect("locking").is_some());
    assert_eq!(lock_path(db.path(), "US"), dir.path().join("t.db.US.lock"));
}

#[test]
fn a_run_is_alive_while_its_lock_is_held() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    assert!(!run_is_alive(&db, "r1").expect("checking"), "no file: dead");
    let held = lock_run(&DbFiles::of(&db), "r1").expect("locking");
    assert!(run_is_alive(&db, "r1").expect("checking"));
    assert!(!run_is_alive(&db, "r2").expect("checking"));
    drop(held);
    assert!(!run_is_alive(&db, "r1").expect("checking"));
    assert!(!run_lock_path(&db, "r1").exists(), "removed when released");
    // A file left by a killed process, its lock gone with it.
    std::fs::write(run_lock_path(&db, "r3"), b"").expect("writing");
    assert!(!run_is_alive(&db, "r3").expect("checking"));
}

#[test]
fn only_a_run_whose_lock_is_free_is_marked_abandoned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    let store = Store::open(&db).expect("opening the store");
    let alive = lock_run(&DbFiles::of(&db), "alive").expect("locking");
    for id in ["alive", "dead"] {
        store
            .begin_run(id, crate::store::RunKind::Run, Secs::new(1_700_000_000))
            .expect("beginning a run");
    }
    // What a killed process leaves: its lock file, no longer locked.
    std::fs::write(run_lock_path(&db, "dead"), b"").expect("writing");
    mark_abandoned(&store, &db);
    let running: Vec<String> = store
        .running_runs()
        .expect("running runs")
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(running, ["alive"]);
    assert!(
        !run_lock_path(&db, "dead").exists(),
        "the dead lock is removed"
    );
    assert!(run_lock_path(&db, "alive").exists());
    drop(alive);
}

/// A lock file someone made a link to the database (or its -wal) is not opened, which
/// would write to the file it points at.
#[cfg(unix)]
#[test]
fn a_lock_file_that_links_to_the_database_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    std::fs::write(&db, b"data").expect("a database");
    let files = DbFiles::of(&db);
    std::os::unix::fs::symlink(&db, lock_path(&db, "US")).expect("a symlink");
    std::os::unix::fs::symlink(dir.path().join("t.db-wal"), lock_path(&db, "GB"))
        .expect("a symlink");
    std::os::unix::fs::symlink(&db, run_lock_path(&db, "r1")).expect("a symlink");
    for region in ["US", "GB"] {
        assert!(
            matches!(try_lock(&files, region), Err(LockError::Refused(_))),
            "{region}"
        );
    }
    assert!(matches!(lock_run(&files, "r1"), Err(LockError::Refused(_))));
    assert!(!dir.path().join("t.db-wal").exists(), "no -wal created");
    assert_eq!(std::fs::read(&db).expect("the database"), b"data");
}
