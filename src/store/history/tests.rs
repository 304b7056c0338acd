//! Unit tests of `store/history.rs`.

use super::super::RunOutcome;
use super::*;
use crate::store::test_support::{FILE, latest, open, temp_db};

fn outcome(region: &str, status: RegionStatus, reason: Option<&str>) -> RegionOutcome {
    RegionOutcome {
        region: region.into(),
        status: status.into(),
        pages: 2,
        videos: 100,
        units: 3,
        reason: reason.map(str::to_owned),
    }
}

fn finish(store: &Store, run_id: &str, status: RegionStatus, at: i64) {
    store
        .finish_run(
            run_id,
            &RunOutcome {
                status,
                units: 6,
                calls: 6,
                stop_reason: None,
                ended_at: Secs::new(at),
                duration_us: 1_000_000,
            },
        )
        .expect("finishing");
}

/// A completed region never shows the run's stop reason, which may be another
/// region's failure; a region the stop cut short is explained by it.
#[test]
fn a_completed_region_never_shows_someone_elses_failure() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("opening");
    let regions = ["US".to_owned(), "GB".to_owned(), "DE".to_owned()];
    store
        .begin_run("r1", RunKind::Run, Secs::new(100))
        .expect("begin");
    store
        .begin_run_regions("r1", Secs::new(100), &regions)
        .expect("regions");
    store
        .record_run_details(
            "r1",
            &[
                outcome("US", RegionStatus::Complete, None),
                outcome("GB", RegionStatus::Failed, Some("GB: videoChartNotFound")),
                outcome("DE", RegionStatus::NotAttempted, None),
            ],
            &[],
        )
        .expect("details");
    store
        .finish_run(
            "r1",
            &RunOutcome {
                status: RegionStatus::Failed,
                units: 6,
                calls: 6,
                stop_reason: Some("GB: videoChartNotFound".into()),
                ended_at: Secs::new(140),
                duration_us: 40_000_000,
            },
        )
        .expect("finishing");
    let reasons = |rows: Vec<HistoryRow>| -> Vec<(String, Option<String>)> {
        rows.into_iter()
            .map(|h| (h.region.unwrap_or_default(), h.reason))
            .collect()
    };
    let want = vec![
        ("DE".to_owned(), Some("GB: videoChartNotFound".to_owned())),
        ("GB".to_owned(), Some("GB: videoChartNotFound".to_owned())),
        ("US".to_owned(), None),
    ];
    let history = store
        .history(&HistoryFilter {
            limit: 10,
            ..HistoryFilter::default()
        })
        .expect("history");
    assert_eq!(reasons(history), want);
    assert_eq!(reasons(store.last_attempts().expect("last attempts")), want);
}

#[test]
fn an_abandoned_run_abandons_its_regions_still_going_and_no_other() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("opening");
    store
        .begin_run("r", RunKind::Run, Secs::new(100))
        .expect("begin");
    let regions = ["US".to_owned(), "GB".to_owned()];
    store
        .begin_run_regions("r", Secs::new(100), &regions)
        .expect("regions");
    store
        .mark_region("r", "US", RegionStatus::Running)
        .expect("running");
    let statuses = |store: &Store| -> Vec<Recorded<RegionStatus>> {
        let rows = store.run_regions("r").expect("regions");
        rows.into_iter().map(|r| r.status).collect()
    };
    assert_eq!(
        statuses(&store),
        [RegionStatus::Queued, RegionStatus::Running]
    );
    store
        .mark_region("r", "GB", RegionStatus::Complete)
        .expect("ended");
    store
        .mark_region("r", "GB", RegionStatus::Running)
        .expect("left alone");
    assert_eq!(
        statuses(&store),
        [RegionStatus::Complete, RegionStatus::Running]
    );
    store
        .mark_region("r", "GB", RegionStatus::Queued)
        .expect("left alone");
    assert!(store.abandon_run("r").expect("abandoning"));
    assert_eq!(
        statuses(&store),
        [RegionStatus::Complete, RegionStatus::Abandoned]
    );
}

#[test]
fn the_history_says_which_region_failed_and_why() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("opening");
    let regions = ["US".to_owned(), "GB".to_owned()];
    store
        .begin_run("r1", RunKind::Run, Secs::new(100))
        .expect("begin");
    store
        .begin_run_regions("r1", Secs::new(100), &regions)
        .expect("regions");
    let calls = [CallCount {
        method: "videos.list".into(),
        outcome: CallOutcome::Ok.into(),
        calls: 5,
    }];
    store
        .record_run_details(
            "r1",
            &[
                outcome("US", RegionStatus::Complete, None),
                outcome("GB", RegionStatus::Failed, Some("videoChartNotFound")),
            ],
            &calls,
        )
        .expect("details");
    finish(&store, "r1", RegionStatus::Failed, 140);
    // A later run still going, and a run with no region at all.
    store
        .begin_run("r2", RunKind::Run, Secs::new(200))
        .expect("begin");
    store
        .begin_run_regions("r2", Secs::new(200), &regions[..1])
        .expect("regions");
    assert_eq!(
        store.run_regions("r2").expect("regions")[0].status,
        RegionStatus::Queued
    );
    store
        .mark_region("r2", "US", RegionStatus::Running)
        .expect("running");
    store
        .begin_run("b3", RunKind::Backfill, Secs::new(300))
        .expect("begin");
    let more = [CallCount {
        method: "videos.list".into(),
        outcome: CallOutcome::Ok.into(),
        calls: 2,
    }];
    store.record_run_details("b3", &[], &more).expect("details");
    finish(&store, "b3", RegionStatus::Complete, 301);

    let all = store
        .history(&HistoryFilter {
            limit: 100,
            ..HistoryFilter::default()
        })
        .expect("history");
    let lines: Vec<(&str, Option<&str>, Option<RegionStatus>)> = all
        .iter()
        .map(|h| (h.run_id.as_str(), h.region.as_deref(), h.status.known()))
        .collect();
    assert_eq!(
        lines,
        [
            ("b3", None, Some(RegionStatus::Complete)),
            ("r2", Some("US"), Some(RegionStatus::Running)),
            ("r1", Some("GB"), Some(RegionStatus::Failed)),
            ("r1", Some("US"), Some(RegionStatus::Complete)),
        ]
    );
    let failed = store
        .history(&HistoryFilter {
            status: Some(RegionStatus::Failed),
            regions: vec!["GB".into(), "FR".into()],
            since: Some(100),
            limit: 10,
        })
        .expect("history");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].reason.as_deref(), Some("videoChartNotFound"));
    assert_eq!(failed[0].ended_at, Some(140));
    assert!(
        store
            .history(&HistoryFilter {
                since: Some(301),
                limit: 10,
                ..HistoryFilter::default()
            })
            .expect("history")
            .is_empty()
    );

    let last: Vec<(String, Option<RegionStatus>)> = store
        .last_attempts()
        .expect("last")
        .into_iter()
        .map(|h| (h.region.unwrap_or_default(), h.status.known()))
        .collect();
    assert_eq!(
        last,
        [
            ("GB".to_owned(), Some(RegionStatus::Failed)),
            ("US".to_owned(), Some(RegionStatus::Running))
        ]
    );
    assert_eq!(store.call_counts(Some("r1")).expect("calls"), calls);
    assert_eq!(store.call_counts(Some("b3")).expect("calls"), more);
    assert_eq!(
        store.call_counts(None).expect("calls"),
        [CallCount {
            method: "videos.list".into(),
            outcome: CallOutcome::Ok.into(),
            calls: 7,
        }],
        "every run's calls added up"
    );
    assert_eq!(store.call_counts(Some("r2")).expect("calls"), []);

    // Only a run still running can be abandoned, with its regions still going.
    assert!(!store.abandon_run("r1").expect("abandoning"));
    assert!(store.abandon_run("r2").expect("abandoning"));
    assert!(!store.abandon_run("r2").expect("abandoning"), "once");
    assert_eq!(store.running_runs().expect("running"), []);
    let abandoned = store.abandoned_runs(0).expect("abandoned");
    assert_eq!(abandoned.len(), 1);
    assert_eq!(abandoned[0].run_id, "r2");
    assert_eq!(
        store.run_regions("r2").expect("regions")[0].status,
        RegionStatus::Abandoned
    );
    assert_eq!(
        store.run_regions("r1").expect("regions")[1].status,
        RegionStatus::Complete
    );
}

/// A file written by a trendsync with words this build does not know still reads:
/// each row keeps its word, shown as it is, and is none of the known statuses.
#[test]
fn words_this_build_does_not_know_still_read() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("opening");
    store
        .begin_run("r", RunKind::Run, Secs::new(100))
        .expect("begin");
    store
        .begin_run_regions("r", Secs::new(100), &["US".to_owned()])
        .expect("regions");
    store
        .mark_region_complete("US", Secs::new(100))
        .expect("state");
    store
        .conn
        .execute_batch(
            "UPDATE runs SET status = 'partial', ended_at = 120 WHERE run_id = 'r';
                 UPDATE run_regions SET status = 'paused' WHERE run_id = 'r';
                 UPDATE region_state SET last_status = 'paused' WHERE region = 'US';
                 INSERT INTO run_calls (run_id, method, outcome, calls)
                     VALUES ('r', 'videos.list', 'throttled', 2);
                 INSERT INTO call_totals (method, outcome, calls)
                     VALUES ('videos.list', 'throttled', 2);",
        )
        .expect("writing words of another build");
    let paused = Recorded::<RegionStatus>::Unknown("paused".to_owned());
    let regions = store.run_regions("r").expect("regions");
    assert_eq!(regions[0].status, paused);
    assert_eq!(regions[0].status.to_string(), "paused");
    let history = store
        .history(&HistoryFilter {
            limit: 10,
            ..HistoryFilter::default()
        })
        .expect("history");
    assert_eq!(history[0].status, paused);
    assert_eq!(store.last_attempts().expect("last")[0].status, paused);
    let run = store.last_run().expect("last run").expect("a run");
    assert_eq!(run.status.to_string(), "partial");
    assert!(RegionStatus::ALL.iter().all(|s| run.status != *s));
    let state = &store.region_states().expect("states")[0];
    assert_eq!(state.last_status.as_ref(), Some(&paused));
    let throttled = Recorded::<CallOutcome>::Unknown("throttled".to_owned());
    assert_eq!(
        store.call_counts(Some("r")).expect("calls")[0].outcome,
        throttled
    );
    assert_eq!(
        store.call_counts(None).expect("calls")[0].outcome,
        throttled
    );
    // A status filter names a known status, which the unknown word is not.
    let failed = store
        .history(&HistoryFilter {
            status: Some(RegionStatus::Failed),
            limit: 10,
            ..HistoryFilter::default()
        })
        .expect("history");
    assert!(failed.is_empty());
}

#[test]
fn a_database_from_before_the_run_history_is_upgraded_with_its_runs() {
    let (_dir, path) = temp_db();
    {
        let old = Store::open_with(&path, &FILE[..1]).expect("the first schema");
        old.begin_run("old", RunKind::Run, Secs::new(10))
            .expect("begin");
        // As the build of that schema finished a run: no duration then.
        old.conn
            .execute(
                "UPDATE runs SET ended_at = 20, status = 'complete', units = 6, calls = 6
                     WHERE run_id = 'old'",
                [],
            )
            .expect("finishing");
    }
    let store = open(&path).expect("upgrading");
    assert_eq!(
        crate::sqlite::user_version(&store.conn).expect("version"),
        latest()
    );
    let all = store
        .history(&HistoryFilter {
            limit: 10,
            ..HistoryFilter::default()
        })
        .expect("history");
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].region.as_deref(), all[0].units), (None, 6));
}
