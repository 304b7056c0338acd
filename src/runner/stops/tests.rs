//! Unit tests of `runner/stops.rs`.

use std::time::Duration;

use super::*;
use crate::quota::BUDGET_POLICY;

fn stops() -> Stops {
    Stops::new(
        "r1".into(),
        Arc::new(crate::clock::ManualClock::starting_at(
            crate::clock::Micros::new(0),
        )),
    )
}

fn fatal(message: &str) -> Stop {
    Stop::Fatal {
        message: message.into(),
    }
}

fn budget(method: &'static str) -> Stop {
    Stop::Budget {
        method,
        units: 1,
        denied_by: BUDGET_POLICY.into(),
        retry_after: None,
        remaining: 0,
        bucket: "budget".into(),
    }
}

fn spent(bucket: &str) -> Stop {
    Stop::UpstreamQuota {
        until: crate::clock::Micros::new(0),
        reason: "quotaExceeded".into(),
        bucket: bucket.into(),
        methods: vec!["search.list".into()],
    }
}

fn down(method: &'static str) -> Stop {
    Stop::LimiterDown {
        method,
        reason: "Connection refused".into(),
    }
}

fn bucket(name: &str) -> Scope {
    Scope::Bucket(name.into())
}

/// Stops met, in order, and what they come to.
struct Case {
    name: &'static str,
    met: Vec<(Scope, Stop)>,
    /// Whether the calls of the main bucket and of `search` have stopped.
    stopped: [bool; 2],
    /// The stop the run reports.
    first: Option<Stop>,
    /// The status of a region the run's stop cut short.
    status: Status,
}

#[test]
fn which_calls_a_stop_ends_and_which_stop_is_reported() {
    let interrupted = Stop::Interrupted { signal: "SIGTERM" };
    let unconfirmed = Stop::ClockUnconfirmed {
        clock: crate::quota::skew::LimiterClock::Host,
    };
    let cases = [
        Case {
            name: "no stop: every call goes on",
            met: vec![],
            stopped: [false, false],
            first: None,
            status: Status::BudgetExhausted,
        },
        Case {
            name: "a spent bucket stops only its own calls",
            met: vec![(bucket("search"), spent("search"))],
            stopped: [false, true],
            first: Some(spent("search")),
            status: Status::UpstreamQuotaExhausted,
        },
        Case {
            name: "a stop of every call stops every bucket",
            met: vec![(Scope::Every, fatal("bad key"))],
            stopped: [true, true],
            first: Some(fatal("bad key")),
            status: Status::Failed,
        },
        Case {
            name: "the first stop of a bucket stays its stop",
            met: vec![
                (bucket("search"), budget("search.list")),
                (bucket("search"), spent("search")),
            ],
            stopped: [false, true],
            first: Some(budget("search.list")),
            status: Status::BudgetExhausted,
        },
        Case {
            name: "a failure after a bucket's stop is the one reported",
            met: vec![
                (bucket("search"), spent("search")),
                (Scope::Every, fatal("bad key")),
            ],
            stopped: [true, true],
            first: Some(fatal("bad key")),
            status: Status::Failed,
        },
        Case {
            name: "a limiter down after a spent bucket is the one reported",
            met: vec![
                (bucket(BUDGET_POLICY), budget("videos.list")),
                (bucket("search"), down("search.list")),
            ],
            stopped: [true, true],
            first: Some(down("search.list")),
            status: Status::LimiterDown,
        },
        Case {
            name: "an upstream block after a limiter down does not replace it",
            met: vec![
                (bucket("search"), down("search.list")),
                (bucket(BUDGET_POLICY), spent(BUDGET_POLICY)),
            ],
            stopped: [true, true],
            first: Some(down("search.list")),
            status: Status::LimiterDown,
        },
        Case {
            name: "the first stop of all wins over a later one",
            met: vec![
                (Scope::Every, interrupted.clone()),
                (Scope::Every, fatal("bad key")),
            ],
            stopped: [true, true],
            first: Some(interrupted),
            status: Status::Interrupted,
        },
        Case {
            name: "a clock stop after a bucket's is the one reported",
            met: vec![
                (bucket("search"), spent("search")),
                (bucket(BUDGET_POLICY), budget("videos.list")),
                (Scope::Every, unconfirmed.clone()),
            ],
            stopped: [true, true],
            first: Some(unconfirmed.clone()),
            status: Status::ClockSkew,
        },
        Case {
            name: "a failure before a clock stop stays the one reported",
            met: vec![
                (Scope::Every, fatal("bad key")),
                (Scope::Every, unconfirmed),
            ],
            stopped: [true, true],
            first: Some(fatal("bad key")),
            status: Status::Failed,
        },
    ];
    for c in cases {
        let stops = stops();
        for (scope, stop) in c.met {
            stops.record(scope, stop);
        }
        let got = [stops.stopped(BUDGET_POLICY), stops.stopped("search")];
        assert_eq!(got, c.stopped, "{}: [budget, search] stopped", c.name);
        assert_eq!(stops.reported(), c.first, "{}: the stop reported", c.name);
        assert_eq!(stops.status(), c.status, "{}: a cut-short region", c.name);
    }
}

/// docs/commands.md: when several things stop one run, its status is the most
/// serious, in this order, whichever came first; and `bucket` names the first bucket
/// that stopped, whatever the run reports.
#[test]
fn the_most_serious_stop_is_reported_in_either_order() {
    let order = [
        (Scope::Every, fatal("bad key")),
        (Scope::Every, Stop::Interrupted { signal: "SIGTERM" }),
        (
            Scope::Every,
            Stop::ClockUnconfirmed {
                clock: crate::quota::skew::LimiterClock::Host,
            },
        ),
        (bucket("search"), down("search.list")),
        (bucket("stats"), spent("stats")),
        (bucket(BUDGET_POLICY), budget("videos.list")),
    ];
    let statuses: Vec<Status> = order.iter().map(|(_, s)| s.status()).collect();
    assert_eq!(
        statuses,
        [
            Status::Failed,
            Status::Interrupted,
            Status::ClockSkew,
            Status::LimiterDown,
            Status::UpstreamQuotaExhausted,
            Status::BudgetExhausted
        ]
    );
    for (i, serious) in order.iter().enumerate() {
        for lesser in &order[i + 1..] {
            // Two stops of every call: the first stands (a second is not recorded).
            if serious.0 == Scope::Every && lesser.0 == Scope::Every {
                continue;
            }
            for met in [[serious, lesser], [lesser, serious]] {
                let stops = stops();
                for (scope, stop) in met {
                    stops.record(scope.clone(), stop.clone());
                }
                assert_eq!(
                    stops.status(),
                    serious.1.status(),
                    "{:?} then {:?}",
                    met[0].1,
                    met[1].1
                );
                let first_bucket = met.iter().find_map(|(scope, _)| match scope {
                    Scope::Bucket(b) => Some(b.clone()),
                    Scope::Every | Scope::Method(_) => None,
                });
                assert_eq!(stops.first_bucket(), first_bucket);
            }
        }
    }
}

/// A block an earlier run met stops only its method, but `bucket` names the refused
/// charge's bucket (docs/json.md: null only when nothing cut the run short).
#[test]
fn a_block_of_a_method_names_its_bucket() {
    let stops = stops();
    stops.record(Scope::Method("search.list".into()), spent(BUDGET_POLICY));
    assert!(
        !stops.stopped(BUDGET_POLICY),
        "the bucket's other methods go on"
    );
    assert!(stops.stopped_method(BUDGET_POLICY, "search.list"));
    assert_eq!(stops.first_bucket().as_deref(), Some(BUDGET_POLICY));
    // A later bucket's stop does not take its place.
    stops.record(bucket("search"), budget("search.list"));
    assert_eq!(stops.first_bucket().as_deref(), Some(BUDGET_POLICY));
}

/// A stop of the bucket waited on, or of every call, ends the wait; another
/// bucket's does not.
#[tokio::test]
async fn only_a_stop_of_its_calls_wakes_a_waiter() {
    let cases = [
        ("its bucket", bucket("search"), true),
        ("every call", Scope::Every, true),
        ("another bucket", bucket(BUDGET_POLICY), false),
    ];
    for (name, scope, wakes) in cases {
        let stops = Arc::new(stops());
        let waiting = tokio::spawn({
            let stops = Arc::clone(&stops);
            async move { stops.woken("search", "search.list").await }
        });
        tokio::task::yield_now().await;
        stops.record(scope, fatal("a stop"));
        let woke = tokio::time::timeout(Duration::from_millis(200), waiting)
            .await
            .is_ok();
        assert_eq!(woke, wakes, "a stop of {name}");
    }
}

/// An interrupt stops every call but lets those in flight finish; giving them up
/// is a second step.
#[tokio::test]
async fn an_interrupt_stops_new_calls_before_it_gives_up_those_in_flight() {
    let stops = stops();
    stops.interrupt("SIGINT");
    assert!(stops.stopped(BUDGET_POLICY));
    assert_eq!(stops.status(), Status::Interrupted);
    let still_waiting = tokio::time::timeout(Duration::from_millis(50), stops.abandoned())
        .await
        .is_err();
    assert!(still_waiting, "calls in flight are not given up yet");
    stops.abandon_in_flight();
    tokio::time::timeout(Duration::from_secs(2), stops.abandoned())
        .await
        .expect("given up");
}
