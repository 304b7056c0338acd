//! Unit tests of `store/run_limiter.rs`.

use super::*;
use crate::store::schema::RUN_LIMITERS;
use crate::store::test_support::{open, steps_before, temp_db};

fn redis(fingerprint: &str) -> RunLimiter {
    RunLimiter {
        kind: "redis".into(),
        url: Some("redis://:***@h:6379/0".into()),
        costs_fingerprint: fingerprint.into(),
    }
}

#[test]
fn the_latest_run_that_recorded_its_limiter_is_read_back() {
    let (_dir, db) = temp_db();
    let store = open(&db).expect("a store");
    assert_eq!(store.last_run_limiter().expect("read"), None);
    store
        .begin_run_on("r1", RunKind::Run, 100, &redis("aaaa"))
        .expect("r1");
    // A run that recorded nothing does not hide the one before it, nor does one that
    // started earlier and was recorded later.
    store.begin_run("r2", RunKind::Run, 200).expect("r2");
    let embedded = RunLimiter {
        kind: "embedded".into(),
        url: None,
        costs_fingerprint: "bbbb".into(),
    };
    store
        .begin_run_on("r3", RunKind::Backfill, 50, &embedded)
        .expect("r3");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!((last.run_id.as_str(), last.limiter), ("r1", redis("aaaa")));
    store
        .begin_run_on("r4", RunKind::Run, 300, &embedded)
        .expect("r4");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!((last.run_id.as_str(), last.limiter), ("r4", embedded));
}

#[test]
fn a_file_before_the_step_has_no_record() {
    let (_dir, db) = temp_db();
    let store = Store::open_with(&db, steps_before(&RUN_LIMITERS)).expect("an older file");
    store.begin_run("r1", RunKind::Run, 100).expect("r1");
    assert_eq!(store.last_run_limiter().expect("read"), None);
}
