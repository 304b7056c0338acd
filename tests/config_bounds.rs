//! No configuration value can silently turn the budget off: for any window, quota,
//! ceiling and cost, either the file loads and 30 charges racing from 30 clients never
//! grant more than the ceiling (on the embedded limiter and on a real Redis), or the
//! binary refuses the file with exit 78 and its place in the file.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use trendsync::config::{SourceText, parse_costs};
use trendsync::quota::{Allowance, Budget, EmbeddedLimiter, Limiter, MAX_UNITS, RedisLimiter};

use crate::common::{Costs, RedisServer, Scratch, contains};

const METHOD: &str = "m.list";
const CLIENTS: usize = 30;

/// Windows on both sides of the bounds, including those that used to act as zero
/// ("1ns", "500us") or overflow the expiry arithmetic ("300000y").
fn windows() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => prop::sample::select(vec![
            "1ns", "500us", "999ms", "1s", "1500ms", "90s", "10m", "24h", "31d", "31d 1s", "32d",
            "300000y",
        ])
        .prop_map(str::to_owned),
        1 => (1u64..=31 * 86_400 + 5).prop_map(|s| format!("{s}s")),
    ]
}

/// Unit counts on both sides of what Lua numbers carry exactly.
fn values() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 1u64..=1000,
        2 => (MAX_UNITS - 3)..=(MAX_UNITS + 3),
        1 => ((1u64 << 53) - 2)..=((1u64 << 53) + 2),
        1 => (u64::MAX - 3)..=u64::MAX,
        1 => any::<u64>(),
    ]
}

/// (quota, ceiling, cost): mostly consistent with each other, so most cases reach the
/// limiter, with the ceiling a small number of calls' worth.
fn numbers() -> impl Strategy<Value = (u64, u64, u64)> {
    (values(), 0u64..=3, 1u64..=40, values(), any::<bool>()).prop_map(
        |(quota, ceiling_cut, calls, raw, consistent)| {
            if consistent {
                let ceiling = quota.saturating_sub(ceiling_cut).max(1);
                (quota, ceiling, (ceiling / calls).max(1))
            } else {
                (quota, quota / 2, raw)
            }
        },
    )
}

fn within_bounds(window: Duration, quota: u64, ceiling: u64, cost: u64) -> bool {
    (Duration::from_secs(1)..=Duration::from_secs(31 * 86_400)).contains(&window)
        && (1..=MAX_UNITS).contains(&quota)
        && (1..=quota).contains(&ceiling)
        && cost <= ceiling
}

/// Charges one call each from `clients` at once; returns the decisions granted, as
/// (units used after it), and how long the race took.
async fn race(budget: &Budget, clients: Vec<Limiter>) -> (Vec<u64>, Duration) {
    let started = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, limiter)| {
            let charge = budget
                .charge(&format!("c{i}"), METHOD, 1, Allowance::Ceiling)
                .expect("one call of a configured method");
            tokio::spawn(async move { limiter.charge(&charge).await })
        })
        .collect();
    let mut granted = Vec::new();
    for task in tasks {
        let decision = task
            .await
            .expect("charge task")
            .expect("the limiter answers");
        if decision.granted {
            granted.push(decision.used());
        }
    }
    (granted, started.elapsed())
}

/// The ceiling holds: over the race, if it took less than the window, or else at each
/// grant (entries may have left a short window meanwhile).
fn assert_holds(what: &str, budget: &Budget, cost: u64, granted: &[u64], took: Duration) {
    if cost == 0 {
        return;
    }
    let fits = usize::try_from(budget.main().ceiling / cost).unwrap_or(usize::MAX);
    if took < budget.main().window.longest() {
        assert_eq!(
            granted.len(),
            fits.min(CLIENTS),
            "{what}: granted calls of {cost} units under ceiling {}",
            budget.main().ceiling
        );
    }
    for used in granted {
        assert!(
            *used <= budget.main().ceiling,
            "{what}: a grant left {used} units used, above the ceiling {}",
            budget.main().ceiling
        );
    }
}

fn check_loaded(redis: &RedisServer, case: u64, budget: &Budget, cost: u64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async {
        let scratch = Scratch::new();
        let db = scratch.file("t.db");
        let embedded = (0..CLIENTS)
            .map(|_| {
                EmbeddedLimiter::open(&db, &budget.key, trendsync::clock::system(), None)
                    .map(Limiter::Embedded)
                    .expect("opening the embedded limiter")
            })
            .collect();
        let (granted, took) = race(budget, embedded).await;
        assert_holds(
            &format!("case {case}, embedded"),
            budget,
            cost,
            &granted,
            took,
        );

        let mut clients = Vec::new();
        for _ in 0..CLIENTS {
            clients.push(Limiter::Redis(
                RedisLimiter::connect(&redis.url(), &budget.key, trendsync::clock::system(), None)
                    .await
                    .expect("connecting to redis"),
            ));
        }
        let (granted, took) = race(budget, clients).await;
        assert_holds(&format!("case {case}, redis"), budget, cost, &granted, took);
    });
}

fn check_refused(costs: &str) {
    let s = Scratch::new();
    let path = s.write("costs.toml", costs);
    s.cmd()
        .arg("--costs")
        .arg(&path)
        .arg("budget")
        .expect_stderr("costs.toml:")
        .status(78)
        .run();
}

/// A budget of random bounds and cost: refused when out of bounds, and otherwise
/// loaded and held by both backends. Written out rather than in `proptest!`, so that
/// the one Redis every case shares (each case charges its own key) stops with the test.
#[test]
fn a_budget_either_loads_and_holds_or_is_refused() {
    let redis = RedisServer::start();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let budgets = (windows(), numbers(), any::<u64>());
    let outcome = runner.run(&budgets, |(window, (quota, ceiling, cost), case)| {
        let key = format!("prop{case:x}");
        let text = Costs::new()
            .key(key)
            .quota(quota)
            .ceiling(ceiling)
            .window(&window)
            .cost(METHOD, cost)
            .to_toml();
        let parsed = humantime::parse_duration(&window).ok();
        match parse_costs(&SourceText {
            name: "costs.toml".into(),
            text: &text,
        }) {
            Ok(budget) => {
                prop_assert!(
                    within_bounds(budget.main().window.longest(), quota, ceiling, cost),
                    "loaded although out of bounds: {text}"
                );
                check_loaded(&redis, case, &budget, cost);
            }
            Err(e) => {
                prop_assert!(
                    !parsed.is_some_and(|w| within_bounds(w, quota, ceiling, cost)),
                    "refused although within bounds ({e}): {text}"
                );
                check_refused(&text);
            }
        }
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}\n{runner}");
    }
}

#[test]
fn a_charge_of_more_units_than_the_limiter_counts_is_refused_before_it_is_sent() {
    let s = Scratch::new();
    let path = s.write(
        "costs.toml",
        &Costs::new()
            .key("k")
            .quota(MAX_UNITS)
            .ceiling(MAX_UNITS)
            .cost(METHOD, 1 << 40)
            .to_toml(),
    );
    s.cmd()
        .arg("--costs")
        .arg(&path)
        .args(["budget", "charge", METHOD, "--count", "1025"])
        .expect_stderr("charge fewer calls")
        .status(2)
        .run();
    s.cmd()
        .arg("--costs")
        .arg(&path)
        .args(["budget", "--json"])
        .expect_stderr("no such file")
        .status(78)
        .stderr(contains("no such file"))
        .run();
    // Refused before the embedded limiter was opened: not even its file exists.
    assert!(s.listing().iter().all(|n| !n.starts_with("trendsync.db")));
}
