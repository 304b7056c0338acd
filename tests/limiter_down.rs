//! DESIGN.md 3.6, when the limiter is unreachable: a dropped connection is tried once
//! more, an allow-listed call goes ahead unmetered and is journalled in the database,
//! a deny-listed one stops the run, and the journal is replayed into the shared
//! window, exactly once and at each call's original age, when the limiter answers.

use std::time::{Duration, Instant};

use trendsync::quota::{Charge, Limiter, Part, PolicyRef, RedisLimiter};

use crate::common::RedisServer;

const WINDOW: Duration = Duration::from_secs(3600);

fn one_unit(id: &str) -> Charge {
    Charge {
        id: id.into(),
        method: "videos.list".into(),
        units: 1,
        parts: vec![Part {
            policy: "budget".into(),
            window: WINDOW,
            max: 100,
            units: 1,
        }],
    }
}

async fn used(limiter: &Limiter) -> u64 {
    let st = limiter
        .status(
            &[PolicyRef {
                name: "budget".into(),
                window: WINDOW,
            }],
            &[],
        )
        .await
        .expect("reading the window");
    st.policies[0].used
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_between_charges_costs_one_retry_not_an_error() {
    let mut server = RedisServer::start_durable();
    let limiter = Limiter::Redis(
        RedisLimiter::connect(&server.url(), "down")
            .await
            .expect("connecting"),
    );
    let first = limiter.charge(&one_unit("r-1")).await.expect("answer");
    assert!(first.granted, "{first:?}");
    // The connection the limiter holds dies with the server; the next charge finds
    // out only when it sends, and the script cache of the new server is empty.
    server.restart();
    let second = limiter
        .charge(&one_unit("r-2"))
        .await
        .expect("the same charge, sent again on a new connection, is answered");
    assert!(second.granted && !second.duplicate, "{second:?}");
    assert_eq!(used(&limiter).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_stays_down_is_reported_unavailable_quickly() {
    let mut server = RedisServer::start();
    let limiter = Limiter::Redis(
        RedisLimiter::connect(&server.url(), "down")
            .await
            .expect("connecting"),
    );
    server.stop();
    let started = Instant::now();
    let err = limiter
        .charge(&one_unit("r-1"))
        .await
        .expect_err("nothing listens any more");
    assert!(err.is_unavailable(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "one retry, not a reconnect loop: {:?}",
        started.elapsed()
    );
}
