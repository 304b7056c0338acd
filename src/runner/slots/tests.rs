//! Unit tests of `runner/slots.rs`: a run's claims, waits, renewals and finishes
//! against the fleet's slots in the process ([`FakeGate`]).

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::runner::execute;
use crate::runner::test_support::{
    AT_2026_US, FakeGate, FakeRecord, FakeUpstream, Scratch, region,
};
use crate::store::Store;

/// 2026-01-01T00:00:00Z, in seconds: the start of every hourly slot at offset 0 here.
const SLOT_S: i64 = AT_2026_US / 1_000_000;

/// A run over `dir` against a fresh fake upstream, claiming through `gate`.
fn run_with(dir: &std::path::Path, gate: &Arc<FakeGate>) -> (Arc<Run>, Arc<FakeUpstream>) {
    let upstream = Arc::new(FakeUpstream::new());
    let run = Scratch {
        gate: Some(Arc::clone(gate) as Arc<dyn SlotGate>),
        lease: Duration::from_secs(60),
        ..Scratch::default()
    }
    .run(
        dir,
        Arc::clone(&upstream) as Arc<dyn crate::runner::upstream::Upstream>,
    );
    (run, upstream)
}

fn other(host: &str, token: i64) -> Holder {
    Holder {
        host: host.into(),
        run_id: format!("r-{host}"),
        token,
    }
}

/// The leased fetches of run `r1`: (region, chart, slot, token, state).
fn leased(dir: &std::path::Path) -> Vec<crate::store::fetch_slots::LeasedRow> {
    Store::open(dir.join("t.db"))
        .expect("the store")
        .fetch_slots_of("r1")
        .expect("the leased fetches")
}

#[tokio::test]
async fn a_free_slot_is_claimed_fetched_and_finished_done() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
    assert!(!upstream.calls().is_empty(), "the holder fetches");
    assert_eq!(
        gate.made(),
        ["time", "claim US floor 0", "finish US 101 complete"]
    );
    match gate.record("US", SLOT_S) {
        Some(FakeRecord::Done { by, .. }) => {
            assert_eq!(
                (by.host.as_str(), by.run_id.as_str(), by.token),
                ("host-a", "r1", 101)
            );
        }
        other => panic!("{other:?}"),
    }
    // The page stored under the lease is the slot's data once finished.
    assert_eq!(
        leased(dir.path()),
        [("US".to_owned(), 0, SLOT_S, 101, "current".to_owned())]
    );
}

/// A run started again by hand within a slot this host already fetched fetches it
/// again, as a single host always did: the slot's record keeps the first fetch, and
/// the new pages are stored unleased (current, with no slot row).
#[tokio::test]
async fn a_slot_this_host_fetched_in_an_earlier_run_is_fetched_again_unleased() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let first = Holder {
        host: "host-a".into(),
        run_id: "r0".into(),
        token: 7,
    };
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Done {
            by: first.clone(),
            at_us: AT_2026_US - 30_000_000,
        },
    );
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
    assert_eq!(report.regions[0].status, Status::Complete);
    assert!(
        upstream
            .calls()
            .iter()
            .any(|c| c.starts_with(crate::youtube::VIDEOS_LIST)),
        "fetched again: {:?}",
        upstream.calls()
    );
    assert_eq!(gate.made(), ["time", "claim US floor 0"], "no finish");
    assert!(
        matches!(gate.record("US", SLOT_S), Some(FakeRecord::Done { by, .. }) if by == first),
        "the record keeps the first fetch"
    );
    assert_eq!(leased(dir.path()), [], "stored unleased");
}

#[tokio::test]
async fn a_slot_done_elsewhere_is_not_fetched_and_the_run_is_complete() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let done_at_us = AT_2026_US - 30_000_000;
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Done {
            by: other("host-b", 7),
            at_us: done_at_us,
        },
    );
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[]), region("GB", &[])]).await;
    assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
    let us = &report.regions.iter().find(|r| r.code == "US").expect("US");
    assert_eq!(us.status, Status::DoneElsewhere);
    assert_eq!(us.error, None);
    let note = us.note.clone().unwrap_or_default();
    assert!(
        note.contains("host host-b (run r-host-b, token 7)"),
        "{note}"
    );
    assert_eq!(us.pages, 0, "nothing fetched for US");
    let gb = &report.regions.iter().find(|r| r.code == "GB").expect("GB");
    assert_eq!(gb.status, Status::Complete);
    let pages = upstream
        .calls()
        .iter()
        .filter(|c| c.starts_with(crate::youtube::VIDEOS_LIST))
        .count();
    assert_eq!(pages, 1, "only GB's page: {:?}", upstream.calls());
    // The other host's done time is the region's last complete fetch here.
    let store = Store::open(dir.path().join("t.db")).expect("the store");
    let us_state = store
        .region_states()
        .expect("states")
        .into_iter()
        .find(|s| s.region == "US")
        .expect("US's state");
    assert_eq!(us_state.last_complete_at, Some(done_at_us / 1_000_000));
    assert_eq!(us_state.last_status, Some(Status::DoneElsewhere.into()));
    // The run's history says who fetched it (`runs`' reason).
    let db = rusqlite::Connection::open(dir.path().join("t.db")).expect("db");
    let (status, reason): (String, Option<String>) = db
        .query_row(
            "SELECT status, reason FROM run_regions WHERE region = 'US'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("US's line");
    assert_eq!(status, "done_elsewhere");
    assert!(reason.unwrap_or_default().contains("host host-b"));
}

#[tokio::test]
async fn a_lease_that_lapses_while_waited_for_is_taken_over() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Each request moves the gate's clock a second; the other lease runs 5 s more.
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000_000));
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Held {
            holder: other("host-b", 7),
            until_us: AT_2026_US + 5_000_000,
        },
    );
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(
        report.regions[0].status,
        Status::Complete,
        "{:?}",
        report.regions
    );
    assert!(
        !upstream.calls().is_empty(),
        "the run took the slot over and fetched it"
    );
    let made = gate.made();
    let claims = made.iter().filter(|m| m.starts_with("claim")).count();
    assert!((2..=4).contains(&claims), "{made:?}");
    assert!(matches!(
        gate.record("US", SLOT_S),
        Some(FakeRecord::Done { by, .. }) if by.host == "host-a"
    ));
}

#[tokio::test]
async fn a_live_lease_is_waited_for_up_to_one_and_a_half_leases_then_left_to_its_holder() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000_000));
    // Held far past the wait: the holder keeps renewing.
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Held {
            holder: other("host-b", 7),
            until_us: AT_2026_US + 3_000_000_000,
        },
    );
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Complete);
    let us = &report.regions[0];
    assert_eq!(us.status, Status::DoneElsewhere);
    let note = us.note.clone().unwrap_or_default();
    // The bound: 1.5 × the 60 s lease after the clock was read at the start.
    let bound = crate::output::human::timestamp(AT_2026_US + 1_000_000 + 90_000_000);
    assert!(
        note.contains("still held by host host-b") && note.contains(&bound),
        "{note}"
    );
    assert!(upstream.calls().is_empty(), "nothing fetched");
    // About one claim and one clock reading per second of the wait, no more.
    let claims = gate
        .made()
        .iter()
        .filter(|m| m.starts_with("claim"))
        .count();
    assert!((40..=50).contains(&claims), "{claims}");
}

#[tokio::test]
async fn the_wait_ends_at_the_slots_end_when_that_comes_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    // 10 s before the hour's end: the slot's end bounds the wait, not 90 s.
    let start = AT_2026_US + 3_590_000_000;
    let gate = Arc::new(FakeGate::new(start, 1_000_000));
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Held {
            holder: other("host-b", 7),
            until_us: start + 3_000_000_000,
        },
    );
    let (run, _) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.regions[0].status, Status::DoneElsewhere);
    let note = report.regions[0].note.clone().unwrap_or_default();
    let end = crate::output::human::timestamp(AT_2026_US + 3_600_000_000);
    assert!(
        note.contains("host host-b") && note.contains(&end),
        "{note}"
    );
    let claims = gate
        .made()
        .iter()
        .filter(|m| m.starts_with("claim"))
        .count();
    assert!(claims <= 6, "{claims}");
}

#[tokio::test]
async fn a_lease_lost_by_the_finish_makes_the_region_done_elsewhere_and_its_pages_not_current() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, _) = run_with(dir.path(), &gate);
    run.record
        .begin_run(
            crate::store::RunKind::Run,
            crate::clock::Secs::new(SLOT_S),
            None,
        )
        .await
        .expect("the run's row");
    let reports = vec![(region("US", &[]), RegionReport::new("US"))];
    let reports = run.claim_slots(reports).await;
    let lease = run.lease_of("US").expect("US claimed");
    run.record
        .chart_page("US", None, 1, 1, Vec::new(), Some(lease.leased()))
        .await
        .expect("a page stored");
    assert_eq!(
        leased(dir.path())[0].4,
        "fetching",
        "not current before the finish"
    );
    // Another host took the slot over meanwhile.
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Held {
            holder: other("host-b", 900),
            until_us: AT_2026_US + 60_000_000,
        },
    );
    let reports = run.finish_slots(reports).await;
    let us = &reports[0].1;
    assert_eq!(us.status, Status::DoneElsewhere);
    let error = us.error.clone().unwrap_or_default();
    assert!(
        error.contains("lost to host host-b (run r-host-b, token 900)")
            && error.contains("not current"),
        "{error}"
    );
    assert_eq!(leased(dir.path())[0].4, "fenced");
}

#[tokio::test]
async fn a_renewal_that_finds_the_lease_taken_stops_the_regions_calls() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, _) = run_with(dir.path(), &gate);
    let reports = run
        .claim_slots(vec![(region("US", &[]), RegionReport::new("US"))])
        .await;
    run.renew_once().await;
    assert!(!run.lease_lost("US"), "a renewal of a held lease keeps it");
    *gate.steal_at_renewal.lock().expect("thief") = Some("host-b".into());
    run.renew_once().await;
    assert!(run.lease_lost("US"));
    // The region's next call is not made.
    let report = Arc::clone(&run)
        .core(
            region("US", &[]),
            crate::runner::plan::steps(&region("US", &[]), None, crate::clock::Secs::new(SLOT_S)),
            reports[0].1.clone(),
        )
        .await;
    assert_eq!(report.pages, 0);
    let reports = run.finish_slots(vec![(region("US", &[]), report)]).await;
    assert_eq!(reports[0].1.status, Status::DoneElsewhere);
}

#[tokio::test]
async fn the_slots_are_finished_at_once_and_their_fetches_marked_current_together() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, _) = run_with(dir.path(), &gate);
    run.record
        .begin_run(
            crate::store::RunKind::Run,
            crate::clock::Secs::new(SLOT_S),
            None,
        )
        .await
        .expect("the run's row");
    let codes = ["US", "GB", "DE"];
    let reports: Vec<_> = codes
        .iter()
        .map(|c| (region(c, &[]), RegionReport::new(c)))
        .collect();
    let mut reports = run.claim_slots(reports).await;
    for (_, report) in &mut reports {
        let lease = run.lease_of(&report.code).expect("claimed");
        run.record
            .chart_page(&report.code, None, 1, 1, Vec::new(), Some(lease.leased()))
            .await
            .expect("a page stored");
        report.status = Status::Complete;
    }
    // Each finish waits for the other two: one after another, the first never returns.
    *gate.finish_barrier.lock().expect("barrier") =
        Some(Arc::new(tokio::sync::Barrier::new(codes.len())));
    let reports = tokio::time::timeout(Duration::from_secs(60), run.finish_slots(reports))
        .await
        .expect("the finishes were sent at once, not one after another");
    let order: Vec<&str> = reports.iter().map(|(_, r)| r.code.as_str()).collect();
    assert_eq!(order, codes, "the reports keep their order");
    assert!(reports.iter().all(|(_, r)| r.status == Status::Complete));
    let states: Vec<String> = leased(dir.path()).into_iter().map(|r| r.4).collect();
    assert_eq!(states, ["current", "current", "current"]);
}

#[tokio::test]
async fn a_gate_that_does_not_answer_leaves_the_run_as_without_leases() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    gate.down.store(true, std::sync::atomic::Ordering::Relaxed);
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
    assert!(!upstream.calls().is_empty());
    assert_eq!(gate.made(), ["time"], "one look at the clock, then nothing");
    assert!(
        leased(dir.path()).is_empty(),
        "its fetches are current as without leases"
    );
}

#[tokio::test]
async fn a_slot_ended_before_the_claim_is_fetched_without_a_lease() {
    let dir = tempfile::tempdir().expect("temp dir");
    // The clock read at the start is the slot's last microsecond: the claim finds it over.
    let gate = Arc::new(FakeGate::new(AT_2026_US + 3_600_000_000 - 2, 1));
    let (run, upstream) = run_with(dir.path(), &gate);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.regions[0].status, Status::Complete);
    assert!(!upstream.calls().is_empty());
    assert!(leased(dir.path()).is_empty());
    assert!(!gate.made().iter().any(|m| m.starts_with("finish")));
}

#[tokio::test]
async fn a_claim_is_given_the_largest_token_the_file_noted_as_its_floor() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, _) = run_with(dir.path(), &gate);
    drop(execute(run, vec![region("US", &[])]).await);
    // A second run, an hour on, on a keeper that lost its keys (tokens from 100 again).
    // The first run's claim raised the floor even had it stored nothing.
    let gate = Arc::new(FakeGate::new(AT_2026_US + 3_600_000_000, 1_000));
    let dir2 = dir.path();
    let (run, _) = run_with(dir2, &gate);
    drop(
        run.claim_slots(vec![(region("US", &[]), RegionReport::new("US"))])
            .await,
    );
    assert!(
        gate.made().contains(&"claim US floor 101".to_owned()),
        "{:?}",
        gate.made()
    );
}

#[test]
fn the_wait_between_looks_is_a_sixth_of_the_lease_within_bounds() {
    assert_eq!(slot_poll(Duration::from_secs(120)), Duration::from_secs(5));
    assert_eq!(slot_poll(Duration::from_secs(6)), Duration::from_secs(1));
    assert_eq!(
        slot_poll(Duration::from_secs(1)),
        Duration::from_secs(1) / 6
    );
    assert_eq!(
        slot_poll(Duration::from_millis(100)),
        Duration::from_millis(100)
    );
}

#[tokio::test]
async fn a_claim_that_stored_nothing_still_raises_the_floor() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, _) = run_with(dir.path(), &gate);
    let claimed = run
        .claim_slots(vec![(region("US", &[]), RegionReport::new("US"))])
        .await;
    assert_eq!(claimed[0].1.status, Status::Complete);
    let store = Store::open(dir.path().join("t.db")).expect("the store");
    assert_eq!(store.largest_slot_token().expect("the floor"), 101);
}

#[tokio::test]
async fn a_signal_ends_the_wait_for_a_held_slot() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000_000));
    gate.set(
        "US",
        SLOT_S,
        FakeRecord::Held {
            holder: other("host-b", 7),
            until_us: AT_2026_US + 3_000_000_000,
        },
    );
    let (run, upstream) = run_with(dir.path(), &gate);
    run.interrupt("SIGTERM");
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Interrupted);
    assert!(upstream.calls().is_empty());
    let claims = gate
        .made()
        .iter()
        .filter(|m| m.starts_with("claim"))
        .count();
    assert_eq!(claims, 0, "{:?}", gate.made());
}

#[tokio::test]
async fn a_claimed_region_the_run_never_reached_is_finished_with_the_runs_stop() {
    let dir = tempfile::tempdir().expect("temp dir");
    let gate = Arc::new(FakeGate::new(AT_2026_US, 1_000));
    let (run, _) = run_with(dir.path(), &gate);
    let reports = run
        .claim_slots(vec![(region("US", &[]), RegionReport::new("US"))])
        .await;
    let token = run.lease_of("US").expect("claimed").token;
    run.interrupt("SIGTERM");
    let mut reports = reports;
    reports[0].1.status = Status::NotAttempted;
    drop(run.finish_slots(reports).await);
    assert!(
        gate.made()
            .contains(&format!("finish US {token} interrupted")),
        "{:?}",
        gate.made()
    );
}

/// Follow-ups are billed per call: a run that fetched nothing, every region's slot
/// done by another host, leaves them to that host.
#[tokio::test]
async fn a_run_whose_every_region_was_done_elsewhere_leaves_the_follow_ups() {
    let dir = tempfile::tempdir().expect("temp dir");
    let follow = Some(crate::config::Follow {
        days: 1,
        every: Duration::ZERO,
    });
    // A first run charts videos here, so that there is something to follow up.
    let first = Arc::new(FakeUpstream::new());
    let run = Scratch {
        follow,
        ..Scratch::default()
    }
    .run(dir.path(), Arc::clone(&first) as _);
    drop(execute(run, vec![region("US", &[])]).await);
    assert!(
        first
            .calls()
            .contains(&crate::youtube::VIDEOS_BATCH_GET_STATS)
    );
    // The next slot: another host fetched it.
    let gate = Arc::new(FakeGate::new(AT_2026_US + 3_600_000_000, 1_000));
    gate.set(
        "US",
        SLOT_S + 3600,
        FakeRecord::Done {
            by: other("host-b", 7),
            at_us: AT_2026_US + 3_601_000_000,
        },
    );
    let second = Arc::new(FakeUpstream::new());
    let run = Scratch {
        follow,
        gate: Some(Arc::clone(&gate) as Arc<dyn SlotGate>),
        run_id: "r2".into(),
        ..Scratch::default()
    }
    .run(dir.path(), Arc::clone(&second) as _);
    let report = execute(run, vec![region("US", &[])]).await;
    assert_eq!(report.status, Status::Complete, "{:?}", report.regions);
    assert_eq!(report.regions[0].status, Status::DoneElsewhere);
    assert!(report.follow.is_none());
    assert!(second.calls().is_empty(), "{:?}", second.calls());
}
