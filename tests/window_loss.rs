//! docs/budget.md, "When Redis loses the window", when Redis loses the window: each host
//! keeps a ledger of what Redis granted it, and replays it, at the original times, when the
//! window's epoch marker is not the one it last charged into.

use std::sync::Arc;
use std::time::Duration;

use trendsync::quota::{Charge, Journal, Limiter, Part, PolicyRef, RedisLimiter};

use crate::common::RedisServer;
use crate::common::harness::Harness;

const HOUR: Duration = Duration::from_secs(3600);

/// What a host logs when it finds the window lost.
const LOST: &str = "Redis lost it";

/// Units in the shipped budget's window, read straight from Redis (not through a
/// host, which would restore its own share first).
fn used(server: &RedisServer) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let limiter = Limiter::Redis(
            RedisLimiter::connect(&server.url(), "key1", trendsync::clock::system(), None)
                .await
                .expect("connecting"),
        );
        let st = limiter
            .status(
                &[PolicyRef {
                    kind: trendsync::quota::Kind::Bucket,
                    methods: Vec::new(),
                    name: "budget".into(),
                    window: Duration::from_secs(86_400).into(),
                }],
                &[],
            )
            .await
            .expect("reading the window");
        st.policies[0].used
    })
}

/// Units of every call `h`'s upstream has received so far.
fn sent(h: &Harness<'_>) -> u64 {
    h.units_sent(&h.fake.calls()).values().sum()
}

/// `run --region` on host `h` against `server` (given per command, so that the test
/// may restart the server in between); what it logged.
fn run(h: &Harness<'_>, server: &RedisServer, region: &str) -> String {
    let ran = h
        .cmd()
        .redis(server)
        .args(["run", "--json", "--region", region])
        // What each scenario expects of it, the scenario checks in what it returns.
        .allow_stderr("the window is not the one this host charged into")
        .run();
    ran.stderr
}

#[test]
fn a_window_redis_lost_is_restored_by_each_hosts_next_run() {
    let mut server = RedisServer::start();
    // Two hosts: two databases, two upstream fakes, one Redis.
    let a = Harness::new(None);
    let b = Harness::new(None);
    run(&a, &server, "US");
    run(&b, &server, "GB");
    assert!(sent(&a) > 0 && sent(&b) > 0);
    assert_eq!(used(&server), sent(&a) + sent(&b));

    // Restarted without persistence: the window is gone, and nothing says so.
    server.restart();
    assert_eq!(used(&server), 0);

    // Each host's next run puts its share back (and charges what it calls itself).
    let log = run(&a, &server, "US");
    assert_eq!(
        log.lines().filter(|l| l.contains(LOST)).count(),
        1,
        "one warning: {log}"
    );
    assert_eq!(used(&server), sent(&a));
    let log = run(&b, &server, "GB");
    assert!(log.contains(LOST), "{log}");
    assert_eq!(used(&server), sent(&a) + sent(&b));

    // The epoch is the one each host saw: a third run replays nothing.
    let log = run(&a, &server, "US");
    assert!(!log.contains(LOST) && !log.contains("restored"), "{log}");
    assert_eq!(used(&server), sent(&a) + sent(&b));
}

/// Mid-run, without a new command: the charge that finds another epoch restores the
/// ledger before the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_charge_into_a_lost_window_restores_the_ledger() {
    let server = RedisServer::start();
    let scratch = crate::common::Scratch::new();
    let journal = Arc::new(
        Journal::open(&scratch.file("host.db"), trendsync::clock::system()).expect("journal"),
    );
    let limiter = Limiter::Redis(
        RedisLimiter::connect(&server.url(), "mid", trendsync::clock::system(), None)
            .await
            .expect("connecting"),
    );
    let limiter = limiter.keep_ledger(Arc::clone(&journal), "mid").await;
    let one = |id: &str| Charge {
        calls: 1,
        bucket: "budget".into(),
        id: id.into(),
        method: "videos.list".into(),
        units: 1,
        parts: vec![Part {
            kind: trendsync::quota::Kind::Bucket,
            policy: "budget".into(),
            window: HOUR.into(),
            max: 100,
            units: 1,
        }],
    };
    let used = || async {
        limiter
            .status(
                &[PolicyRef {
                    kind: trendsync::quota::Kind::Bucket,
                    methods: Vec::new(),
                    name: "budget".into(),
                    window: HOUR.into(),
                }],
                &[],
            )
            .await
            .expect("status")
            .policies[0]
            .used
    };
    for id in ["c1", "c2", "c3"] {
        assert!(limiter.charge(&one(id)).await.expect("answer").granted);
    }
    assert_eq!(journal.ledger("mid").expect("ledger").0.len(), 3);

    let _: () = redis::cmd("FLUSHALL")
        .query(&mut server.connection())
        .expect("FLUSHALL");
    assert_eq!(used().await, 0);
    let d = limiter.charge(&one("c4")).await.expect("answer");
    assert!(d.granted, "{d:?}");
    assert_eq!(used().await, 4, "c1 to c3 are back, and c4 counted once");
    // The same epoch from now on: nothing is replayed again.
    assert!(limiter.charge(&one("c5")).await.expect("answer").granted);
    assert_eq!(used().await, 5);
    assert_eq!(journal.ledger("mid").expect("ledger").0.len(), 5);
}

/// A failover to a replica that missed the latest writes keeps the epoch (created
/// long before) but not the newest entries: the host's next command finds its newest
/// charge missing, and restores the ledger all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_that_kept_its_epoch_but_lost_the_newest_grants_is_restored() {
    let server = RedisServer::start();
    let scratch = crate::common::Scratch::new();
    let db = scratch.file("host.db");
    let connect = || async {
        let limiter = Limiter::Redis(
            RedisLimiter::connect(&server.url(), "lost", trendsync::clock::system(), None)
                .await
                .expect("connecting"),
        );
        limiter
            .keep_ledger(
                Arc::new(Journal::open(&db, trendsync::clock::system()).expect("journal")),
                "lost",
            )
            .await
    };
    let budget = [PolicyRef {
        kind: trendsync::quota::Kind::Bucket,
        methods: Vec::new(),
        name: "budget".into(),
        window: HOUR.into(),
    }];
    let first = connect().await;
    for id in ["c1", "c2", "c3"] {
        let c = Charge {
            calls: 1,
            bucket: "budget".into(),
            id: id.into(),
            method: "videos.list".into(),
            units: 2,
            parts: vec![Part {
                kind: trendsync::quota::Kind::Bucket,
                policy: "budget".into(),
                window: HOUR.into(),
                max: 100,
                units: 2,
            }],
        };
        assert!(first.charge(&c).await.expect("answer").granted);
    }
    let _: () = redis::cmd("DEL")
        .arg("trendsync:{lost}:budget")
        .arg("trendsync:{lost}:budget:total")
        .arg("trendsync:{lost}:budget:oldest")
        .query(&mut server.connection())
        .expect("DEL");
    let epoch: Option<i64> = redis::cmd("GET")
        .arg("trendsync:{lost}:epoch")
        .query(&mut server.connection())
        .expect("GET");
    assert!(epoch.is_some(), "the epoch survived");

    let next = connect().await;
    let st = next.status(&budget, &[]).await.expect("status");
    assert_eq!(st.policies[0].used, 6, "c1 to c3 are back");
}
