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
        "a second holder is refused, in the same process too"
    );
    assert!(
        try_lock(&db, "GB").expect("locking").is_some(),
        "other regions are independent"
    );
    drop(held);
    assert!(try_lock(&db, "US").expect("locking").is_some());
    assert_eq!(lock_path(db.path()), dir.path().join(".t.db.lock"));
}

/// Every region, the maintenance lock and the runs share one hidden file, each on a
/// byte of its own: after locking them all, the directory holds the database's one
/// lock file and nothing else.
#[test]
fn every_lock_is_a_byte_of_one_hidden_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = DbFiles::of(&dir.path().join("t.db"));
    let codes: Vec<String> = (b'A'..=b'Z')
        .flat_map(|a| (b'A'..=b'Z').map(move |b| String::from_utf8(vec![a, b]).unwrap_or_default()))
        .collect();
    let mut offsets: Vec<i64> = codes.iter().map(|c| Range::Region(c).offset()).collect();
    offsets.push(Range::Maintenance.offset());
    offsets.push(Range::Run("19a3c4f2b10-0badcafe").offset());
    let mut unique = offsets.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), offsets.len(), "no two share a byte");
    assert_eq!(Range::Region("us").offset(), Range::Region("US").offset());

    let held: Vec<RegionLock> = codes
        .iter()
        .map(|c| try_lock(&db, c).expect("locking").expect("free"))
        .collect();
    let run = lock_run(&db, "r1").expect("the run's lock");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("listing")
        .map(|e| e.expect("an entry").file_name())
        .collect();
    assert_eq!(names, [".t.db.lock"]);
    assert_eq!(
        std::fs::metadata(lock_path(db.path()))
            .expect("the file")
            .len(),
        0
    );
    drop((held, run));
}

/// Open-file-description semantics: a lock goes with the open file it was taken
/// through, not when any other descriptor of the file in the process is closed, as
/// classic POSIX record locks would.
#[test]
fn closing_another_descriptor_of_the_file_keeps_the_lock() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = DbFiles::of(&dir.path().join("t.db"));
    let held = try_lock(&db, "US").expect("locking").expect("free");
    drop(open(db.path()).expect("another descriptor"));
    assert!(run_is_alive(db.path(), "r1").is_ok());
    assert!(
        try_lock(&db, "US").expect("locking").is_none(),
        "still held after another descriptor was closed"
    );
    drop(held);
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
    assert!(lock_path(&db).exists(), "the one file stays, empty");
}

#[test]
fn only_a_run_whose_lock_is_free_is_marked_abandoned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    let store = Store::open(&db).expect("opening the store");
    let alive = lock_run(&DbFiles::of(&db), "alive").expect("locking");
    // "dead" took its lock too, and its process went with it.
    drop(lock_run(&DbFiles::of(&db), "dead").expect("locking"));
    for id in ["alive", "dead"] {
        store
            .begin_run(id, crate::store::RunKind::Run, Secs::new(1_700_000_000))
            .expect("beginning a run");
    }
    mark_abandoned(&store, &db);
    let running: Vec<String> = store
        .running_runs()
        .expect("running runs")
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    assert_eq!(running, ["alive"]);
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
    for target in [db.clone(), dir.path().join("t.db-wal")] {
        let _ = std::fs::remove_file(lock_path(&db));
        std::os::unix::fs::symlink(&target, lock_path(&db)).expect("a symlink");
        assert!(
            matches!(try_lock(&files, "US"), Err(LockError::Refused(_))),
            "{}",
            target.display()
        );
        assert!(matches!(lock_run(&files, "r1"), Err(LockError::Refused(_))));
    }
    assert!(!dir.path().join("t.db-wal").exists(), "no -wal created");
    assert_eq!(std::fs::read(&db).expect("the database"), b"data");
}
