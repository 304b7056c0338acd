use crate::clock::Secs;
use crate::store::test_support::{open, temp_db, video};
use crate::store::{QueuedSlot, RunKind, SinkBacklog, SlotFetch, Store};

/// A run `run` that began at `at` and stored a chart page and a search page of each
/// region.
fn fetched(store: &Store, run: &str, at: i64, regions: &[&str]) {
    store.begin_run(run, RunKind::Run, Secs::new(at)).unwrap();
    for region in regions {
        let page = [video(&format!("{run}{region}"), "a video")];
        store
            .store_chart_page(run, region, None, 1, &page, Secs::new(at))
            .unwrap();
        store
            .store_chart_page(run, region, Some(10), 1, &page, Secs::new(at))
            .unwrap();
        store
            .store_search_page(run, region, "s", 1, &page, Secs::new(at))
            .unwrap();
    }
}

fn fetch_count(store: &Store) -> i64 {
    store
        .conn
        .query_row("SELECT count(*) FROM fetches", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_queued_slot_waits_until_shipped_and_queuing_twice_keeps_one() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    assert_eq!(store.sink_backlog().unwrap(), SinkBacklog::default());
    fetched(&store, "r1", 7_200, &["US", "GB"]);
    store.queue_for_sink("r1", "US", 7_200, 3600, None).unwrap();
    store
        .queue_for_sink("r1", "US", 7_200, 3600, Some(9))
        .unwrap();
    store
        .queue_for_sink("r1", "GB", 7_200, 3600, Some(5))
        .unwrap();
    let pending = store.sink_pending().unwrap();
    assert_eq!(
        pending,
        vec![
            QueuedSlot {
                run_id: "r1".into(),
                region: "GB".into(),
                slot_start: 7_200,
                slot_secs: 3600,
                token: Some(5),
                queued_at: 7_200,
                attempts: 0,
            },
            QueuedSlot {
                run_id: "r1".into(),
                region: "US".into(),
                slot_start: 7_200,
                slot_secs: 3600,
                token: None,
                queued_at: 7_200,
                attempts: 0,
            },
        ]
    );
    assert_eq!(
        store.sink_backlog().unwrap(),
        SinkBacklog {
            slots: 2,
            oldest_queued_at: Some(7_200)
        }
    );
    store
        .record_sink_error("r1", "US", "the sink said no")
        .unwrap();
    let us = store.sink_pending().unwrap().pop().unwrap();
    assert_eq!(us.attempts, 1);
    store.mark_shipped("r1", "US", Secs::new(8_000)).unwrap();
    store.mark_shipped("r1", "GB", Secs::new(8_000)).unwrap();
    assert!(store.sink_pending().unwrap().is_empty());
    assert_eq!(store.sink_backlog().unwrap(), SinkBacklog::default());
    // A shipped slot queued again (a retry of the queuing) stays shipped.
    store.queue_for_sink("r1", "US", 7_200, 3600, None).unwrap();
    assert!(store.sink_pending().unwrap().is_empty());
}

#[test]
fn a_slots_fetches_are_its_charts_not_its_searches() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    fetched(&store, "r1", 100, &["US", "GB"]);
    fetched(&store, "r2", 200, &["US"]);
    let charts: Vec<u32> = store
        .slot_fetches("r1", "US")
        .unwrap()
        .iter()
        .map(|f: &SlotFetch| f.chart)
        .collect();
    assert_eq!(charts, [0, 10]);
    assert!(store.slot_fetches("r3", "US").unwrap().is_empty());
}

/// The rows of a slot the sink has not shipped are its only copy: prune keeps them,
/// dry run included, and deletes them once shipped.
#[test]
fn prune_keeps_every_fetch_of_a_slot_not_yet_shipped() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    fetched(&store, "old", 100, &["US", "GB"]);
    fetched(&store, "new", 100_000, &["US"]);
    store.queue_for_sink("old", "US", 0, 3600, None).unwrap();
    assert_eq!(fetch_count(&store), 9);

    let dry = store.prune(50_000, true, false).unwrap();
    assert_eq!(dry.deleted[0], ("fetches", 3), "{dry:?}");
    let report = store.prune(50_000, false, false).unwrap();
    assert_eq!(report.deleted[0], ("fetches", 3), "{report:?}");
    // The old run's US fetches (3) and the new run's (3) are left.
    assert_eq!(fetch_count(&store), 6);
    assert_eq!(store.slot_fetches("old", "US").unwrap().len(), 2);

    store.mark_shipped("old", "US", Secs::new(100_001)).unwrap();
    let report = store.prune(50_000, false, false).unwrap();
    assert_eq!(report.deleted[0], ("fetches", 3), "{report:?}");
    assert_eq!(fetch_count(&store), 3);
}
