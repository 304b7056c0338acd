//! A failover is not an outage (docs/budget.md, "When the limiter is down"): eight
//! processes charge one unit at a time in a loop against a ceiling of 1000 while the test
//! fails the budget's primary over, and the budget still holds: exactly 1000 units end up
//! in the window, every grant a process recorded is in it, and the only entries no process
//! recorded are charges that landed while their process gave up waiting (it then says the
//! limiter was down). No process exits 1.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::redis_deployments::{Cluster, SentinelSet, info_field, wait_until};
use crate::common::{Costs, Scratch, lacks};

const KEY: &str = "failover";
const WINDOW_KEY: &str = "trendsync:{failover}:budget";
const WORKERS: usize = 8;

/// What the racing processes saw.
#[derive(Default)]
struct Tally {
    granted: AtomicUsize,
    /// Charges a process gave up on, the limiter counting as down: each may or may not
    /// have landed.
    unsure: AtomicUsize,
    /// Anything other than exit 0 or 75, with its stderr.
    failures: Mutex<Vec<String>>,
    /// Set when the test's side failed: the workers stop instead of racing on.
    stop: AtomicBool,
}

/// Runs the race with the `i`th worker's processes given `args(i)`, while `fail_over`
/// runs with the tally to watch; returns the tally when every worker met a full window.
fn race(args: impl Fn(usize) -> Vec<String> + Sync, fail_over: impl FnOnce(&Tally)) -> Tally {
    race_to(1000, args, fail_over)
}

/// [`race`] against a ceiling of `ceiling` units.
fn race_to(
    ceiling: u64,
    args: impl Fn(usize) -> Vec<String> + Sync,
    fail_over: impl FnOnce(&Tally),
) -> Tally {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube()
            .key(KEY)
            .quota(ceiling)
            .ceiling(ceiling)
            .to_toml(),
    );
    let tally = Tally::default();
    std::thread::scope(|scope| {
        for w in 0..WORKERS {
            let (s, costs, tally, args) = (&s, &costs, &tally, &args);
            scope.spawn(move || {
                // Far more than a worker needs; a bound, so that a bug cannot loop forever.
                for _ in 0..2_000 {
                    if tally.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let ran = s
                        .cmd()
                        .costs(costs)
                        .args(args(w))
                        .args(["-q", "budget", "charge", "videos.list", "--json"])
                        // Mid-failover a charge may find the limiter down, or a
                        // primary that missed writes (whose window it restores),
                        // and the Redis client says when it looks for the new
                        // primaries.
                        .allow_stderr("the limiter at ")
                        .allow_stderr("Redis lost it (a restart without persistence")
                        .allow_stderr(" redis: ")
                        .status_in(&[0, 75])
                        .run();
                    if ran.stdout.trim().is_empty() {
                        tally
                            .failures
                            .lock()
                            .expect("the tally")
                            .push(format!("exit {}: {}", ran.code, ran.stderr));
                        return;
                    }
                    let json = ran.json();
                    match (json["granted"].as_bool(), json["denied_by"].as_str()) {
                        (Some(true), _) => {
                            tally.granted.fetch_add(1, Ordering::SeqCst);
                        }
                        (Some(false), Some("limiter")) => {
                            tally.unsure.fetch_add(1, Ordering::SeqCst);
                        }
                        (Some(false), Some("budget")) => return,
                        _ => {
                            tally
                                .failures
                                .lock()
                                .expect("the tally")
                                .push(format!("unexpected answer {json}"));
                            return;
                        }
                    }
                }
            });
        }
        let failed_over =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fail_over(&tally)));
        if let Err(panic) = failed_over {
            tally.stop.store(true, Ordering::SeqCst);
            std::panic::resume_unwind(panic);
        }
    });
    tally
}

/// Waits until the processes have been granted `n` charges, and says how many.
fn after_grants(tally: &Tally, n: usize) -> usize {
    wait_until("the race goes on", Duration::from_secs(120), || {
        tally.granted.load(Ordering::SeqCst) >= n
    });
    tally.granted.load(Ordering::SeqCst)
}

/// The window is exactly full, and every entry in it is a grant a process recorded
/// or a charge whose process gave up on its answer.
fn assert_exact(tally: &Tally, entries: usize) {
    let failures = tally.failures.lock().expect("the tally");
    assert!(failures.is_empty(), "processes failed: {failures:#?}");
    let granted = tally.granted.load(Ordering::SeqCst);
    let unsure = tally.unsure.load(Ordering::SeqCst);
    eprintln!("{granted} grants recorded, {unsure} charges unsure, {entries} in the window");
    assert_eq!(
        entries, 1000,
        "the window holds the ceiling, no more, no less"
    );
    assert!(
        granted <= entries && entries - granted <= unsure,
        "{granted} grants recorded, {unsure} charges unsure, {entries} in the window"
    );
}

#[test]
fn a_cluster_fails_over_twice_in_the_middle_of_a_race() {
    let cluster = Cluster::start();
    // Each worker lists every node, starting from a different one, as an operator's
    // URL would: a worker whose only seed was the killed node could not find the
    // cluster again, however the client behaved.
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port()).collect();
    let url_for = |w: usize| {
        let mut hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        hosts.rotate_left(w % ports.len());
        format!("redis+cluster://{}", hosts.join(","))
    };
    let tally = race(
        |w| vec!["--redis-url".to_owned(), url_for(w)],
        |tally| {
            // A manual failover: the replica takes over once it has every write.
            let before = after_grants(tally, 100);
            let replica = cluster.replica_for(WINDOW_KEY);
            eprintln!(
                "CLUSTER FAILOVER to {} after {before} grants",
                replica.port()
            );
            let () = replica.query(redis::cmd("CLUSTER").arg("FAILOVER"));
            wait_until(
                "the replica is the primary",
                Duration::from_secs(30),
                || cluster.primary_for(WINDOW_KEY).port() == replica.port(),
            );
            cluster.wait_healthy();
            assert!(before < 1000, "the failover came in the middle of the race");
            let before = after_grants(tally, before + 100);

            // kill -9 of the primary. Writes are held for a moment first, until the replica
            // has every one of them: a primary killed with acknowledged writes not yet
            // replicated loses them whatever the client does (that is what the ledger of
            // docs/budget.md, "When Redis loses the window" is for), and this test is about
            // the client getting through the failover.
            let primary = cluster.primary_for(WINDOW_KEY);
            let replica = cluster.replica_for(WINDOW_KEY);
            let () = primary.query(redis::cmd("CLIENT").arg(&["PAUSE", "1500", "WRITE"]));
            wait_until(
                "the replica has every write",
                Duration::from_secs(10),
                || {
                    info_field(primary, "replication", "master_repl_offset")
                        == info_field(replica, "replication", "slave_repl_offset")
                },
            );
            eprintln!("kill -9 of {} after {before} grants", primary.port());
            primary.kill();
            wait_until("the replica took over", Duration::from_secs(30), || {
                cluster.try_primary_for(WINDOW_KEY) == Some(replica.port())
            });
            cluster.wait_healthy();
            eprintln!("the cluster is healthy again");
            assert!(before < 1000, "the kill came in the middle of the race");
        },
    );
    let entries: usize = cluster.query(redis::cmd("ZCARD").arg(WINDOW_KEY));
    assert_exact(&tally, entries);
}

#[test]
fn a_sentinel_failover_in_the_middle_of_a_race() {
    let set = SentinelSet::start();
    // With a replica required for writes, the old primary refuses them the moment its
    // replica is promoted, instead of taking charges that the promotion throws away;
    // the README recommends it. The promoted replica has no such setting here, as it
    // will have no replica of its own until the Sentinel turns the old primary into one.
    let () = set.primary().query(
        redis::cmd("CONFIG")
            .arg("SET")
            .arg("min-replicas-to-write")
            .arg("1")
            .arg("min-replicas-max-lag")
            .arg("10"),
    );
    let url = set.url();
    let tally = race(
        |_| vec!["--redis-url".to_owned(), url.clone()],
        |tally| {
            let before = after_grants(tally, 150);
            // Replication is asynchronous: a charge the primary acknowledged while its
            // bytes were still on the way to the replica is lost if the replica is
            // promoted first, whatever the client does (the README says so). Writes
            // are held until the replica has every one, as for the Cluster's kill -9;
            // clients held longer than their response timeout count as unsure.
            let old = set.primary();
            let replica = set
                .nodes
                .iter()
                .find(|n| n.port() != old.port())
                .expect("a replica");
            let () = old.query(redis::cmd("CLIENT").arg(&["PAUSE", "5000", "WRITE"]));
            wait_until(
                "the replica has every write",
                Duration::from_secs(10),
                || {
                    info_field(old, "replication", "master_repl_offset")
                        == info_field(replica, "replication", "slave_repl_offset")
                },
            );
            set.failover();
            // From here the old primary refuses writes: its replica is gone.
            let () = old.query(redis::cmd("CLIENT").arg("UNPAUSE"));
            assert!(before < 1000, "the failover came in the middle of the race");
        },
    );
    let entries: usize = set.primary().query(redis::cmd("ZCARD").arg(WINDOW_KEY));
    assert_exact(&tally, entries);
}

/// kill -9 of a Sentinel set's primary while eight processes race, ten times in a row:
/// while the Sentinels elect a new primary the lookup is a failover, waited out (the
/// README, "Redis deployments"), never a configuration error (78). Processes exit 0 or 75
/// only, and the units granted stay within what the failover can explain: a grant whose
/// reply was lost counts as unsure, and a write the dead primary had acknowledged but not
/// yet replicated is lost with it. The ceiling is 300, not 1000: ten races of a thousand
/// processes each kept both cores busy for minutes, long enough to starve the TLS tests
/// running beside them.
#[test]
fn a_sentinel_primary_killed_mid_race_is_a_failover_ten_times_in_a_row() {
    for round in 1..=10 {
        let set = SentinelSet::start();
        let url = set.url();
        let old = set.primary().port();
        let tally = race_to(
            300,
            |_| vec!["--redis-url".to_owned(), url.clone()],
            |tally| {
                let before = after_grants(tally, 60);
                eprintln!("round {round}: kill -9 of the primary after {before} grants");
                set.primary().kill();
                wait_until(
                    "the Sentinel names a new primary",
                    Duration::from_secs(30),
                    || {
                        set.primary().port() != old
                            && info_field(set.primary(), "replication", "role").as_deref()
                                == Some("master")
                    },
                );
                assert!(before < 300, "the kill came in the middle of the race");
            },
        );
        let failures = tally.failures.lock().expect("the tally");
        assert!(failures.is_empty(), "round {round}: {failures:#?}");
        let entries: usize = set.primary().query(redis::cmd("ZCARD").arg(WINDOW_KEY));
        let granted = tally.granted.load(Ordering::SeqCst);
        let unsure = tally.unsure.load(Ordering::SeqCst);
        eprintln!("round {round}: {granted} granted, {unsure} unsure, {entries} in the window");
        assert_eq!(
            entries, 300,
            "round {round}: the new primary's window is full"
        );
        assert!(
            (290..=310).contains(&granted),
            "round {round}: {granted} granted, {unsure} unsure"
        );
    }
}

/// While the Sentinels hold the primary down and have not promoted another (here its
/// replica may never be promoted, so the election lasts), a process that connects is
/// in a failover: it waits it out, then finds the limiter down (75). It is not told
/// that the service name is wrong (78): the Sentinels know the name.
#[test]
fn a_primary_the_sentinels_hold_down_is_a_failover_not_a_configuration_error() {
    let mut set = SentinelSet::start();
    let () = set.nodes[1].query(redis::cmd("CONFIG").arg(&["SET", "replica-priority", "0"]));
    let flags = |set: &SentinelSet| -> String {
        let sentinel = redis::Client::open(format!("redis://127.0.0.1:{}/", set.sentinel_port))
            .expect("the Sentinel's URL");
        let mut conn = sentinel
            .get_connection()
            .expect("connecting to the Sentinel");
        let master: Vec<String> = redis::cmd("SENTINEL")
            .arg(&["MASTER", "mymaster"])
            .query(&mut conn)
            .expect("SENTINEL MASTER");
        master
            .chunks(2)
            .find(|kv| kv[0] == "flags")
            .map(|kv| kv[1].clone())
            .unwrap_or_default()
    };
    set.nodes[0].kill();
    wait_until(
        "the Sentinel holds the primary down",
        Duration::from_secs(20),
        || flags(&set).contains("o_down"),
    );
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1000).ceiling(1000).to_toml(),
    );
    let ran = s
        .cmd()
        .costs(&costs)
        .args(["--redis-url", &set.url()])
        .args(["budget", "charge", "videos.list", "--json"])
        .expect_stderr("is unreachable")
        .status(75)
        .stderr(lacks("watch no primary"))
        .run();
    assert_eq!(ran.json()["denied_by"], "limiter", "{}", ran.stdout);
    // A name no Sentinel monitors is still a configuration error, at once.
    let wrong = set.url().replace("mymaster", "nosuchservice");
    s.cmd()
        .costs(&costs)
        .args(["--redis-url", &wrong])
        .args(["budget", "charge", "videos.list"])
        .expect_stderr("watch no primary")
        .status(78)
        .run();
    set.nodes.truncate(1);
}
