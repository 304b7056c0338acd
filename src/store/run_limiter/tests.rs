//! Unit tests of `store/run_limiter.rs`.

use super::*;
use crate::store::schema::RUN_LIMITERS;
use crate::store::test_support::{open, steps_before, temp_db};

fn redis(fingerprint: &str) -> RunLimiter {
    RunLimiter {
        kind: LimiterKind::Redis.into(),
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
        .begin_run_on("r1", RunKind::Run, Secs::new(100), &redis("aaaa"))
        .expect("r1");
    // A run that recorded nothing does not hide the one before it.
    store
        .begin_run("r2", RunKind::Run, Secs::new(200))
        .expect("r2");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!((last.run_id.as_str(), last.limiter), ("r1", redis("aaaa")));
    let embedded = RunLimiter {
        kind: LimiterKind::Embedded.into(),
        url: None,
        costs_fingerprint: "bbbb".into(),
    };
    store
        .begin_run_on("r3", RunKind::Backfill, Secs::new(300), &embedded)
        .expect("r3");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!((last.run_id.as_str(), last.limiter), ("r3", embedded));
}

/// The latest is the one recorded last, whatever clock stamped the starts: a run on a
/// clock two days ahead does not outrank the runs recorded after it, before or after
/// `prune --vacuum` rebuilds the file.
#[test]
fn the_latest_run_is_the_one_recorded_last_whatever_its_start_says() {
    let (_dir, db) = temp_db();
    let store = open(&db).expect("a store");
    let embedded = RunLimiter {
        kind: LimiterKind::Embedded.into(),
        url: None,
        costs_fingerprint: "bbbb".into(),
    };
    let day = 86_400;
    store
        .begin_run_on(
            "ahead",
            RunKind::Run,
            Secs::new(1_000_000 + 2 * day),
            &embedded,
        )
        .expect("the run on the clock ahead");
    store
        .begin_run_on(
            "switched",
            RunKind::Run,
            Secs::new(1_000_000),
            &redis("aaaa"),
        )
        .expect("the switch, on the right clock");
    store
        .begin_run_on(
            "next",
            RunKind::Backfill,
            Secs::new(1_000_060),
            &redis("aaaa"),
        )
        .expect("the next run");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!(
        (last.run_id.as_str(), last.limiter),
        ("next", redis("aaaa"))
    );
    store.vacuum().expect("VACUUM");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!(last.run_id, "next", "VACUUM keeps the order of recording");
    store
        .begin_run_on("back", RunKind::Run, Secs::new(1_000_120), &embedded)
        .expect("a run after VACUUM");
    let last = store.last_run_limiter().expect("read").expect("a record");
    assert_eq!((last.run_id.as_str(), last.limiter), ("back", embedded));
}

#[test]
fn a_file_before_the_step_has_no_record() {
    let (_dir, db) = temp_db();
    let store = Store::open_with(&db, steps_before(&RUN_LIMITERS)).expect("an older file");
    store
        .begin_run("r1", RunKind::Run, Secs::new(100))
        .expect("r1");
    assert_eq!(store.last_run_limiter().expect("read"), None);
}
