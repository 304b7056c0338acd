//! Unit tests of `runner/call.rs`.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::{Follow, Region};
use crate::runner::execute::execute;
use crate::runner::outcome::{RunReport, Status};
use crate::runner::test_support::{AT_2026_US, FakeUpstream, Reply, Scratch, region};
use crate::youtube::{SEARCH_LIST, VIDEO_CATEGORIES_LIST, VIDEOS_BATCH_GET_STATS, VIDEOS_LIST};

const V: &str = VIDEOS_LIST;
const C: &str = VIDEO_CATEGORIES_LIST;
const S: &str = SEARCH_LIST;
const F: &str = VIDEOS_BATCH_GET_STATS;

const SERVER_ERROR: Reply = Reply::Error(503, "backendError");
const QUOTA_EXCEEDED: Reply = Reply::Error(403, "quotaExceeded");
const KEY_INVALID: Reply = Reply::Error(400, "keyInvalid");
const CHART_NOT_FOUND: Reply = Reply::Error(404, "videoChartNotFound");

/// One pool with room for three calls.
const THREE_CALLS: &str = r#"
[budget]
key = "key1"
quota = 10
ceiling = 3
window = "24h"

[costs]
"videos.list" = 1
"videoCategories.list" = 1
"#;

/// Searches and follow-ups in buckets of their own, as the upstream bills them.
const BUCKETS: &str = r#"
[budget]
key = "key1"
quota = 100
ceiling = 90
window = "24h"

[costs]
"videos.list" = 1
"videoCategories.list" = 1

[[bucket]]
name = "search"
quota = 100
ceiling = 90
window = "24h"
costs = { "search.list" = 1 }

[[bucket]]
name = "stats"
quota = 100
ceiling = 90
window = "24h"
costs = { "videos.batchGetStats" = 1 }
"#;

/// A run through the fake upstream, and what it must come to.
struct Case {
    name: &'static str,
    costs: &'static str,
    limiter_down: bool,
    follow: bool,
    /// Every answer's `Date`, this far from the limiter's clock.
    dated_off_s: Option<i64>,
    script: Vec<(&'static str, Vec<Reply>)>,
    regions: Vec<Region>,
    /// The methods called, in order (one region at a time).
    calls: Vec<&'static str>,
    status: Status,
    /// Each region's status, in the order given.
    ends: Vec<Status>,
    /// The follow-ups' status, when they are configured.
    follow_ends: Option<Status>,
    /// Units granted, and units of calls made unmetered.
    units: (u64, u64),
    /// The buckets the limiter shows blocked after the run.
    blocked: Vec<&'static str>,
}

fn case(name: &'static str) -> Case {
    Case {
        name,
        costs: crate::config::BUILTIN_COSTS,
        limiter_down: false,
        follow: false,
        dated_off_s: None,
        script: Vec::new(),
        regions: vec![region("US", &[])],
        calls: vec![V, C],
        status: Status::Complete,
        ends: vec![Status::Complete],
        follow_ends: None,
        units: (2, 0),
        blocked: Vec::new(),
    }
}

fn cases() -> Vec<Case> {
    vec![
        case("every call answered: the run completes"),
        Case {
            script: vec![(V, vec![SERVER_ERROR])],
            calls: vec![V, V, C],
            units: (3, 0),
            ..case("a 5xx is tried again, each attempt charged")
        },
        Case {
            // The fourth is the next region's first answer, which it tries again.
            script: vec![(V, vec![SERVER_ERROR; 4])],
            regions: vec![region("US", &[]), region("GB", &[])],
            calls: vec![V, V, V, V, V, C],
            status: Status::Failed,
            ends: vec![Status::Failed, Status::Complete],
            units: (6, 0),
            ..case("three 5xx give the region up, the others go on")
        },
        Case {
            script: vec![(V, vec![Reply::Error(429, "rateLimitExceeded")])],
            calls: vec![V, V, C],
            units: (3, 0),
            ..case("throttling is tried again")
        },
        Case {
            costs: THREE_CALLS,
            regions: vec![region("US", &[]), region("GB", &[]), region("DE", &[])],
            calls: vec![V, C, V],
            status: Status::BudgetExhausted,
            ends: vec![
                Status::Complete,
                Status::BudgetExhausted,
                Status::NotAttempted,
            ],
            units: (3, 0),
            ..case("a budget denial stops the run; a region it never reached says so")
        },
        Case {
            script: vec![(V, vec![KEY_INVALID])],
            regions: vec![region("US", &[]), region("GB", &[])],
            calls: vec![V],
            status: Status::Failed,
            ends: vec![Status::Failed, Status::NotAttempted],
            units: (1, 0),
            ..case("a fatal answer stops every call, not tried again")
        },
        Case {
            script: vec![(V, vec![CHART_NOT_FOUND])],
            regions: vec![region("US", &[]), region("GB", &[])],
            calls: vec![V, V, C],
            status: Status::Failed,
            ends: vec![Status::Failed, Status::Complete],
            units: (3, 0),
            ..case("a missing overall chart fails only its region")
        },
        Case {
            costs: BUCKETS,
            follow: true,
            script: vec![(S, vec![QUOTA_EXCEEDED])],
            regions: vec![region("US", &["a", "b"]), region("GB", &["c"])],
            calls: vec![V, C, V, C, S, F],
            status: Status::UpstreamQuotaExhausted,
            ends: vec![
                Status::UpstreamQuotaExhausted,
                Status::UpstreamQuotaExhausted,
            ],
            follow_ends: Some(Status::Complete),
            units: (6, 0),
            blocked: vec!["search"],
            ..case("a quotaExceeded on search stops only the search bucket")
        },
        Case {
            follow: true,
            script: vec![(S, vec![QUOTA_EXCEEDED])],
            regions: vec![region("US", &["a"])],
            calls: vec![V, C, S],
            status: Status::UpstreamQuotaExhausted,
            ends: vec![Status::UpstreamQuotaExhausted],
            follow_ends: Some(Status::NotAttempted),
            units: (102, 0),
            blocked: vec!["budget"],
            ..case("in one pool, a quotaExceeded on search stops every call")
        },
        Case {
            costs: BUCKETS,
            follow: true,
            script: vec![(F, vec![QUOTA_EXCEEDED])],
            regions: vec![region("US", &["a"])],
            calls: vec![V, C, S, V, F],
            status: Status::UpstreamQuotaExhausted,
            ends: vec![Status::Complete],
            follow_ends: Some(Status::UpstreamQuotaExhausted),
            units: (5, 0),
            blocked: vec!["stats"],
            ..case("a quotaExceeded on the follow-ups stops only them")
        },
        Case {
            limiter_down: true,
            regions: vec![region("US", &["a"])],
            calls: vec![V, C],
            status: Status::LimiterDown,
            ends: vec![Status::LimiterDown],
            units: (0, 2),
            ..case("the limiter down: allowed calls made unmetered, a denied one stops")
        },
        Case {
            dated_off_s: Some(0),
            ..case("an answer whose clock agrees: the run goes on")
        },
        Case {
            dated_off_s: Some(3_600),
            regions: vec![region("US", &[]), region("GB", &[])],
            calls: vec![V],
            status: Status::ClockSkew,
            ends: vec![Status::ClockSkew, Status::NotAttempted],
            units: (1, 0),
            ..case("an answer an hour off the limiter's clock stops the run")
        },
    ]
}

/// Stop, bucket and retry decisions, through an upstream in the process.
#[tokio::test]
async fn what_each_answer_decides() {
    for c in cases() {
        let name = c.name;
        let mut upstream = FakeUpstream::new();
        for (method, replies) in &c.script {
            upstream = upstream.answering(method, replies);
        }
        if let Some(off) = c.dated_off_s {
            upstream = upstream.dated(AT_2026_US / 1_000_000 + off);
        }
        let upstream = Arc::new(upstream);
        let dir = tempfile::tempdir().expect("temp dir");
        let run = Scratch {
            costs: c.costs.to_owned(),
            limiter_down: c.limiter_down,
            follow: c.follow.then_some(Follow {
                days: 1,
                every: Duration::ZERO,
            }),
            ..Scratch::default()
        }
        .run(dir.path(), Arc::clone(&upstream) as _);
        let report = execute(run, c.regions).await;

        assert_eq!(upstream.calls(), c.calls, "{name}: the calls made");
        assert_eq!(report.status, c.status, "{name}: {:?}", report.regions);
        let ends: Vec<Status> = report.regions.iter().map(|r| r.status).collect();
        assert_eq!(ends, c.ends, "{name}: {:?}", report.regions);
        let follow = report.follow.as_ref().map(|f| f.status);
        assert_eq!(follow, c.follow_ends, "{name}: {:?}", report.follow);
        assert_eq!(
            (report.units_charged, report.units_unmetered),
            c.units,
            "{name}: units granted, unmetered"
        );
        assert_eq!(
            report.calls,
            c.calls.len() as u64,
            "{name}: every call counted"
        );
        let blocked: Vec<&str> = report
            .budget
            .iter()
            .flatten()
            .filter(|b| b.blocked_until.is_some())
            .map(|b| b.name.as_str())
            .collect();
        assert_eq!(blocked, c.blocked, "{name}: blocked buckets");
    }
}

/// Every attempt is counted as it ended, the retried ones too.
#[tokio::test]
async fn every_attempt_is_counted_by_how_it_ended() {
    let upstream = Arc::new(FakeUpstream::new().answering(V, &[SERVER_ERROR, SERVER_ERROR]));
    let dir = tempfile::tempdir().expect("temp dir");
    let run = Scratch::default().run(dir.path(), Arc::clone(&upstream) as _);
    let report = execute(run, vec![region("US", &[])]).await;
    let attempts: Vec<((&str, CallOutcome), u64)> = report.attempts.into_iter().collect();
    assert_eq!(
        attempts,
        [
            ((C, CallOutcome::Ok), 1),
            ((V, CallOutcome::Ok), 1),
            ((V, CallOutcome::Transient), 2),
        ]
    );
}

/// A fatal answer's message is the region's error, in `--json` too.
#[tokio::test]
async fn a_fatal_answer_says_why_in_its_region() {
    let upstream = Arc::new(FakeUpstream::new().answering(V, &[KEY_INVALID]));
    let dir = tempfile::tempdir().expect("temp dir");
    let run = Scratch::default().run(dir.path(), Arc::clone(&upstream) as _);
    let report = execute(run, vec![region("US", &[])]).await;
    let error = report.regions[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("keyInvalid") && error.contains("check the key"),
        "{error}"
    );
    assert_eq!(report.stop_reason.as_deref(), Some(error));
}

/// A stop of any kind wakes a region waiting out a retry's backoff, and one that
/// came before the wait began ends it at once.
#[tokio::test]
async fn a_budget_stop_cuts_a_backoff_short() {
    let dir = tempfile::tempdir().expect("temp dir");
    let run = Scratch::default().run(dir.path(), Arc::new(FakeUpstream::new()));
    let waiting = tokio::spawn({
        let run = Arc::clone(&run);
        async move { run.woken(VIDEOS_LIST).await }
    });
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    run.stops.halt_bucket(
        crate::quota::BUDGET_POLICY,
        Stop::Fatal {
            message: "stands in for the budget".into(),
        },
    );
    tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("woken by the stop")
        .expect("no panic");
    tokio::time::timeout(Duration::from_millis(100), run.woken(VIDEOS_LIST))
        .await
        .expect("already stopped: no wait at all");
}

/// A run whose earlier run recorded the limiter's clock an hour ahead when
/// `skewed` (else agreeing), and whose budget `spent` its ceiling of three
/// beforehand; every answer dated `dated_off_s` from the limiter's clock (none: no
/// `Date`). The calls made, the report, and whether the record says too far after.
async fn after_a_skew(
    skewed: bool,
    spent: bool,
    dated_off_s: Option<i64>,
) -> (Vec<&'static str>, RunReport, bool) {
    use crate::quota::skew::{self, LimiterClock, Skew};
    use crate::quota::{Allowance, EmbeddedLimiter, Limiter};
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t.db");
    let clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::ManualClock::starting_at(
        crate::clock::Micros::new(AT_2026_US),
    ));
    let last = Skew {
        clock: LimiterClock::Host,
        skew_us: if skewed { 3_600_000_000 } else { 0 },
        measured_at_us: AT_2026_US,
    };
    crate::schema::record_skew(&db, &last).expect("recorded");
    if spent {
        let budget = crate::runner::test_support::budget(THREE_CALLS);
        let limiter = Limiter::Embedded(
            EmbeddedLimiter::open(&db, &budget.key, Arc::clone(&clock), None).expect("limiter"),
        );
        let charge = budget
            .charge("by-hand", V, 3, Allowance::Ceiling)
            .expect("a charge");
        assert!(limiter.charge(&charge).await.expect("charged").granted);
    }
    let mut upstream = FakeUpstream::new();
    if let Some(off) = dated_off_s {
        upstream = upstream.dated(AT_2026_US / 1_000_000 + off);
    }
    let upstream = Arc::new(upstream);
    let run = Scratch {
        costs: THREE_CALLS.to_owned(),
        clock,
        ..Scratch::default()
    }
    .run(dir.path(), Arc::clone(&upstream) as _);
    let report = execute(run, vec![region("US", &[])]).await;
    let too_far = skew::recorded_for(
        Some(&crate::sqlite::Db::open_for_reading(&db).expect("read")),
        LimiterClock::Host,
    )
    .expect("read")
    .expect("a record")
    .too_far();
    (upstream.calls(), report, too_far)
}

/// With a skew recorded and the budget spent, no call can check the clock: the run
/// asks once with a request that carries no key, and that answer's `Date` decides,
/// as a call's would. Nothing is charged or counted for it. Without the record, or
/// with room for a call, no such request is made.
#[tokio::test]
async fn a_run_with_no_call_allowed_checks_a_distrusted_clock_without_the_key() {
    use crate::runner::test_support::WITHOUT_KEY;
    let spent = Status::BudgetExhausted;
    // (skew recorded, budget spent, Date's offset, calls, status, still too far)
    let cases = [
        (true, true, Some(0), vec![WITHOUT_KEY], spent, false),
        (
            true,
            true,
            Some(3_600),
            vec![WITHOUT_KEY],
            Status::ClockSkew,
            true,
        ),
        (true, true, None, vec![WITHOUT_KEY], Status::ClockSkew, true),
        (true, false, Some(0), vec![V, C], Status::Complete, false),
        (false, true, Some(3_600), vec![], spent, false),
    ];
    for (skewed, spent, off, calls, status, too_far) in cases {
        let what = format!("skewed {skewed}, spent {spent}, Date {off:?}");
        let (made, report, still) = after_a_skew(skewed, spent, off).await;
        assert_eq!(made, calls, "{what}");
        assert_eq!(report.status, status, "{what}: {:?}", report.regions);
        assert_eq!(still, too_far, "{what}: the record");
        if spent {
            assert_eq!(report.calls, 0, "{what}: not counted as a call");
            assert_eq!(report.units_charged, 0, "{what}: not charged");
            assert!(report.attempts.is_empty(), "{what}: {:?}", report.attempts);
        }
    }
}
