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

/// A write that fails says what it was doing, in the words of the run's log.
#[tokio::test]
async fn a_failed_write_says_what_it_was_doing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = recorder(dir.path());
    let store = Arc::clone(&rec.store);
    let _ = std::thread::spawn(move || {
        let _held = store.lock();
        panic!("a region task panics while it holds the store");
    })
    .join();
    let cases = [
        (
            rec.region_complete("US").await,
            "marking region US complete: the database connection was poisoned by a panic in another task",
        ),
        (
            rec.chart_page("US", Some(10), 2, 51, Vec::new())
                .await
                .map(drop),
            "storing page 2 of the chart of category 10 of region US: the database connection was poisoned by a panic in another task",
        ),
        (
            rec.chart_page("US", None, 1, 1, Vec::new()).await.map(drop),
            "storing trending page 1 of region US: the database connection was poisoned by a panic in another task",
        ),
    ];
    for (got, want) in cases {
        let err = got.expect_err(want);
        assert_eq!(chain(&err), want);
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
