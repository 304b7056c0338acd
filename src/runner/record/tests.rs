//! Unit tests of `runner/record.rs`.

use super::*;
use crate::clock::ManualClock;
use crate::error::chain;

fn recorder(dir: &std::path::Path) -> Recorder {
    let store = Store::open(dir.join("t.db")).expect("the store");
    Recorder::new(
        store,
        "r1".into(),
        Arc::new(ManualClock::starting_at(crate::clock::Micros::new(0))),
    )
}

/// A write that fails says what it was doing, in the words of the run's log, then the
/// store's cause.
#[tokio::test]
async fn a_failed_write_says_what_it_was_doing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    drop(Store::open(&path).expect("the store"));
    // A connection that may only read: every write fails.
    let db = crate::sqlite::Db::open_for_reading(&path).expect("the database");
    let store = crate::store::Store::read_on(&db)
        .expect("readable")
        .expect("a store");
    let rec = Recorder::new(
        store,
        "r1".into(),
        Arc::new(ManualClock::starting_at(crate::clock::Micros::new(0))),
    );
    let cases = [
        (
            rec.region_complete("US").await,
            "marking region US complete: ",
        ),
        (
            rec.chart_page("US", Some(10), 2, 51, Vec::new(), None)
                .await
                .map(drop),
            "storing page 2 of the chart of category 10 of region US: ",
        ),
        (
            rec.chart_page("US", None, 1, 1, Vec::new(), None)
                .await
                .map(drop),
            "storing trending page 1 of region US: ",
        ),
    ];
    for (got, want) in cases {
        let text = chain(&got.expect_err(want));
        assert!(text.starts_with(want), "{text}");
        assert!(text.contains("readonly database"), "{text}");
    }
}

/// What the run writes reads back: a run begun, a region's state.
#[tokio::test]
async fn writes_reach_the_store() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = recorder(dir.path());
    rec.begin_run(RunKind::Run, crate::clock::Secs::new(0), None)
        .await
        .expect("begun");
    rec.begin_regions(crate::clock::Secs::new(0), vec!["US".into()])
        .await
        .expect("regions");
    rec.categories("US", vec![("10".into(), "Music".into())])
        .await
        .expect("categories");
    rec.region_complete("US").await.expect("complete");
    let fresh = rec.freshness().await.expect("read");
    let us = fresh.get("US").expect("US is known");
    assert_eq!(
        (us.last_complete_at, us.categories_fetched_at),
        (Some(0), Some(0))
    );
}
