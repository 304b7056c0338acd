//! docs/budget.md, "When the limiter is down", when the limiter is unreachable: a dropped
//! connection is tried once more, an allow-listed call goes ahead unmetered and is
//! journalled in the database, a deny-listed one stops the run, and the journal is replayed
//! into the shared window, exactly once and at each call's original age, when the limiter
//! answers.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use trendsync::quota::{Charge, Limiter, Part, PolicyRef, RedisLimiter};

use crate::common::harness::{Harness, THREE_REGIONS, shorts};
use crate::common::redis_server::closing_listener;
use crate::common::upstream::{Billing, Call, FakeUpstream, answer_fixture, complete_calls, page2};
use crate::common::{PredicateBooleanExt, Ran, RedisServer, Running, Trendsync, contains, lacks};

const WINDOW: Duration = Duration::from_secs(3600);

fn one_unit(id: &str) -> Charge {
    Charge {
        calls: 1,
        bucket: "budget".into(),
        id: id.into(),
        method: "videos.list".into(),
        units: 1,
        parts: vec![Part {
            kind: trendsync::quota::Kind::Bucket,
            policy: "budget".into(),
            window: WINDOW.into(),
            max: 100,
            units: 1,
        }],
    }
}

async fn used(limiter: &Limiter) -> u64 {
    let st = limiter
        .status(
            &[PolicyRef {
                kind: trendsync::quota::Kind::Bucket,
                methods: Vec::new(),
                name: "budget".into(),
                window: WINDOW.into(),
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
        RedisLimiter::connect(&server.url(), "down", trendsync::clock::system(), None)
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
        RedisLimiter::connect(&server.url(), "down", trendsync::clock::system(), None)
            .await
            .expect("connecting"),
    );
    server.stop();
    // In the server's place, a listener that counts the connections it is asked for
    // and closes each at once: the limiter tries once more, and does not loop.
    let asked = closing_listener(server.port());
    let err = limiter
        .charge(&one_unit("r-1"))
        .await
        .expect_err("nothing answers any more");
    assert!(err.is_unavailable(), "{err}");
    let asked = asked.load(Ordering::SeqCst);
    assert!(
        asked <= 2,
        "one retry, not a reconnect loop: {asked} connections"
    );
}

// The binary end to end: a real redis-server stopped, killed or restarted around a run
// against the fake upstream.

/// The longest any run here may take; a run that hangs on Redis fails the test
/// instead of hanging the suite.
const GUARD: Duration = Duration::from_secs(60);

/// One region with a configured search: search.list is deny-listed.
const WITH_SEARCH: &str = r#"
[defaults]
pages = 2

[[region]]
code = "FR"
offset = 0

[[region.search]]
name = "fresh"
q = ""
order = "viewCount"
published_within = "24h"
"#;

/// Waits for `running`, killing it and failing the test after [`GUARD`]; its stderr
/// is checked as every run's is.
#[track_caller]
fn finish(running: Running) -> Ran {
    let (child, check) = running.into_parts();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(GUARD) {
        Ok(out) => check.ran(out.expect("waiting for trendsync")),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
            panic!("trendsync did not finish within {GUARD:?}: it hangs on the limiter");
        }
    }
}

// The harness is built without a limiter and every command is pointed at `server`
// here, so that the test may stop and restart the server between commands.

/// The binary against the fake upstream and `server`.
fn cmd(h: &Harness<'_>, server: &RedisServer) -> Trendsync {
    h.cmd().redis(server)
}

/// Runs `args` against the fake upstream and `server`, bounded by [`GUARD`].
#[track_caller]
fn run_bounded(h: &Harness<'_>, server: &RedisServer, args: &[&str]) -> (Ran, Vec<Call>) {
    let before = h.fake.calls().len();
    let ran = finish(cmd(h, server).args(args).start());
    let calls = h.fake.calls().split_off(before);
    (ran, calls)
}

/// `budget --json` against `server`: its JSON, and what it logged.
#[track_caller]
fn budget(h: &Harness<'_>, server: &RedisServer) -> (Value, String) {
    let ran = finish(h.bare().redis(server).args(["budget", "--json"]).start());
    (ran.json(), ran.stderr)
}

/// What a replay logs.
const REPLAYED: &str = "made while the limiter was down into budget";

/// The window holds exactly the units of the calls the upstream received, method by
/// method: each call counted once, charged or journalled and replayed.
fn assert_window_holds_what_was_sent(h: &Harness<'_>, budget: &Value) {
    let sent = h.units_sent(&h.fake.calls());
    let counted: BTreeMap<String, u64> = budget["by_method"]
        .as_object()
        .expect("by_method is an object")
        .iter()
        .map(|(m, u)| (m.clone(), u.as_u64().expect("units are integers")))
        .collect();
    assert_eq!(
        counted, sent,
        "units in the window by method (left) against the calls the upstream received (right)"
    );
    assert_eq!(
        budget["used"].as_u64(),
        Some(sent.values().sum::<u64>()),
        "{budget}"
    );
}

/// Rows of the journal of unmetered calls (none when the table was never made); the
/// ledger's rows, already counted in the window, are not among them.
fn journalled(h: &Harness<'_>) -> Vec<(String, i64)> {
    let db = h.db();
    let exists: bool = db
        .prepare("SELECT 1 FROM sqlite_master WHERE name = 'quota_journal'")
        .and_then(|mut q| q.exists([]))
        .expect("reading the schema");
    if !exists {
        return Vec::new();
    }
    let mut q = db
        .prepare("SELECT method, units FROM quota_journal WHERE metered = 0 ORDER BY made_at_us")
        .expect("preparing");
    q.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("reading the journal")
        .collect::<Result<_, _>>()
        .expect("reading the journal")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

fn lines_with<'a>(stderr: &'a str, text: &str) -> Vec<&'a str> {
    stderr.lines().filter(|l| l.contains(text)).collect()
}

/// What the limiter-down warning says, once per run.
const GOING_ON: &str = "going on without it";

fn units(report: &Value, field: &str) -> u64 {
    report[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is a count: {report}"))
}

#[test]
fn with_redis_down_from_the_start_allowed_calls_are_journalled_and_replayed_once() {
    let mut server = RedisServer::start();
    server.stop();
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);

    let started = Instant::now();
    h.expect_stderr("is unreachable: Connection refused");
    let (ran, calls) = run_bounded(&h, &server, &["run", "--json"]);
    let first_run_done = Instant::now();
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(
        sorted(shorts(&calls)),
        sorted(complete_calls(&["US", "GB", "DE"]))
    );
    assert_eq!(report["calls"], 9, "{report}");
    assert_eq!(units(&report, "units_charged"), 0, "{report}");
    assert_eq!(units(&report, "units_unmetered"), 9, "{report}");
    assert!(
        report["remaining"].is_null(),
        "unknown while down: {report}"
    );
    for r in report["regions"].as_array().expect("regions") {
        assert_eq!(
            (&r["units"], &r["units_unmetered"]),
            (&json!(0), &json!(3)),
            "{r}"
        );
    }
    let rows = journalled(&h);
    let mut by_method = BTreeMap::new();
    for (method, units) in &rows {
        *by_method.entry(method.as_str()).or_insert(0) += units;
    }
    assert_eq!(
        by_method,
        BTreeMap::from([("videoCategories.list", 3), ("videos.list", 6)])
    );
    assert_eq!(
        lines_with(&ran.stderr, GOING_ON).len(),
        1,
        "said once per run, not per call: {}",
        ran.stderr
    );

    // A region with a search: its trending calls are journalled, then the search,
    // denied while the limiter is down, stops the run cleanly.
    h.regions(WITH_SEARCH);
    h.expect_stderr("is unreachable: Connection refused")
        .expect_stderr("stopped: the limiter is down and [when_limiter_down] denies search.list")
        .expect_ended("limiter_down")
        .status(75);
    let (ran, calls) = run_bounded(&h, &server, &["run", "--json"]);
    let report = ran.json();
    assert_eq!(report["status"], "limiter_down", "{report}");
    assert_eq!(shorts(&calls), complete_calls(&["FR"]));
    assert_eq!(units(&report, "units_unmetered"), 3, "{report}");
    let says = lines_with(&ran.stderr, "the limiter is down");
    assert!(
        says.iter().any(|l| l.contains("search.list")),
        "the stop names the limiter and the method: {}",
        ran.stderr
    );
    assert_eq!(journalled(&h).len(), 12);

    // `status` while it is down shows the database, and says why the budget is not
    // there, on stdout too (stderr may be a log nobody reads).
    let status = finish(
        h.bare()
            .redis(&server)
            .args(["status", "--json"])
            .expect_stderr("is unreachable: Connection refused")
            .start(),
    )
    .json();
    assert_eq!(status["budget"], Value::Null, "{status}");
    assert!(
        status["budget_error"]
            .as_str()
            .is_some_and(|e| e.contains("is unreachable: Connection refused")),
        "{status}"
    );
    finish(
        h.bare()
            .redis(&server)
            .arg("status")
            .expect_stderr("is unreachable: Connection refused")
            .stdout(contains("the limiter cannot be read: ").and(contains("is unreachable")))
            .start(),
    );

    // Redis is back (empty). A dry run writes nothing, so it replays nothing.
    server.restart();
    finish(
        cmd(&h, &server)
            .args(["run", "--dry-run", "--json"])
            .start(),
    );
    assert_eq!(journalled(&h).len(), 12, "a dry run replays nothing");

    // Long enough that a replay at age 0 shows in next_free_s.
    std::thread::sleep(Duration::from_secs(4));
    let before_budget = Instant::now();
    let (after, log) = budget(&h, &server);
    let said = lines_with(&log, REPLAYED);
    assert_eq!(said.len(), 1, "one line: {log}");
    assert!(
        said[0].ends_with(&format!(
            "replayed 12 calls (12 units) {REPLAYED} \"key1\" on {}, at their original times",
            server.url()
        )),
        "{log}"
    );
    let window = 86_400.0;
    assert_eq!(after["used"], 12, "{after}");
    assert_window_holds_what_was_sent(&h, &after);
    assert!(journalled(&h).is_empty(), "every replayed row is counted");
    // The oldest call was made between the start and the end of the first run.
    let next_free = after["next_free_s"].as_f64().expect("next_free_s");
    let earliest = window - before_budget.duration_since(started).as_secs_f64() - 1.0;
    let latest = window - before_budget.duration_since(first_run_done).as_secs_f64() + 1.0;
    assert!(
        (earliest..=latest).contains(&next_free),
        "the replayed calls keep their age: next_free_s {next_free} not in {earliest}..={latest}"
    );
    // Replaying twice counts once: nothing is left, and what was replayed stays.
    let (again, log) = budget(&h, &server);
    assert!(lines_with(&log, REPLAYED).is_empty(), "{log}");
    assert_eq!(again["used"], 12, "{again}");
    assert_window_holds_what_was_sent(&h, &again);
}

/// How long the fake takes to answer US's second page: time enough to stop or restart
/// Redis while the run waits for it, between two charges.
const SLOW: Duration = Duration::from_millis(1500);

/// The fixtures' YouTube, answering US's second page (the second call of a run of
/// [`THREE_REGIONS`] one region at a time) only after [`SLOW`].
fn slow_second_call() -> FakeUpstream {
    let fake = FakeUpstream::youtube();
    fake.answer_instead(
        page2("US"),
        answer_fixture(200, "videos_last_page.json").set_delay(SLOW),
    );
    fake
}

/// Waits until the fake has received `n` calls; how many it has then.
fn wait_for_calls(h: &Harness<'_>, n: usize) -> usize {
    let deadline = Instant::now() + GUARD;
    loop {
        let got = h.fake.calls().len();
        if got >= n {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "the run made {got} calls, not {n}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn redis_killed_mid_run_the_rest_is_journalled_and_counted_once_after_restart() {
    let mut server = RedisServer::start_durable();
    let mut h = Harness::with(slow_second_call(), None);
    h.regions(THREE_REGIONS);
    let child = cmd(&h, &server)
        .args(["run", "--json", "--concurrency", "1"])
        .expect_stderr("is unreachable: Connection refused")
        .start();
    // The second call is waiting for its answer: two calls are charged, and the next
    // charge comes only after the answer.
    let charged = wait_for_calls(&h, 2) as u64;
    server.stop();
    let ran = finish(child);
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(report["calls"], 9, "{report}");
    assert_eq!(h.fake.calls().len(), 9);
    assert_eq!(units(&report, "units_charged"), charged, "{report}");
    assert_eq!(units(&report, "units_unmetered"), 9 - charged, "{report}");
    assert_eq!(journalled(&h).len() as u64, 9 - charged);
    assert_eq!(lines_with(&ran.stderr, GOING_ON).len(), 1, "{}", ran.stderr);

    // Back with what it held when killed; the replay adds the rest, each call once.
    server.restart();
    let (after, log) = budget(&h, &server);
    assert_eq!(lines_with(&log, REPLAYED).len(), 1, "{log}");
    assert_eq!(after["used"], 9, "{after}");
    assert_window_holds_what_was_sent(&h, &after);
    assert!(journalled(&h).is_empty());
}

#[test]
fn a_redis_restart_mid_run_is_absorbed_without_journalling() {
    let mut server = RedisServer::start_durable();
    let mut h = Harness::with(slow_second_call(), None);
    h.regions(THREE_REGIONS);
    let child = cmd(&h, &server)
        .args(["run", "--json", "--concurrency", "1"])
        .start();
    wait_for_calls(&h, 2);
    // Back on the same port, with an empty script cache, before the next charge:
    // that charge finds its connection dropped and is sent once more.
    server.restart();
    let ran = finish(child);
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(report["calls"], 9, "{report}");
    assert_eq!(units(&report, "units_charged"), 9, "{report}");
    assert_eq!(units(&report, "units_unmetered"), 0, "{report}");
    assert!(journalled(&h).is_empty());
    assert!(
        lines_with(&ran.stderr, GOING_ON).is_empty(),
        "the limiter was never down for the run: {}",
        ran.stderr
    );
    let (after, _) = budget(&h, &server);
    assert_eq!(after["used"], 9, "{after}");
    assert_window_holds_what_was_sent(&h, &after);
}

#[test]
fn a_hung_redis_costs_a_run_one_timeout_not_one_per_call() {
    let server = RedisServer::start();
    let mut h = Harness::with(slow_second_call(), None);
    h.regions(THREE_REGIONS);
    let child = cmd(&h, &server)
        .args(["run", "--json", "--concurrency", "1"])
        .expect_stderr("is unreachable: timed out")
        .start();
    let charged = wait_for_calls(&h, 2) as u64;
    // Connections stay open but nothing answers: the next charge times out, and the
    // run must not send every later charge to wait for its own timeout.
    server.pause();
    let ran = finish(child);
    server.resume();
    let report = ran.json();
    assert_eq!(report["calls"], 9, "{report}");
    assert_eq!(units(&report, "units_charged"), charged, "{report}");
    assert_eq!(units(&report, "units_unmetered"), 9 - charged, "{report}");

    // Redis now runs what was queued while it was frozen: at most the one charge
    // that timed out (which is in the journal too). One per journalled call would
    // mean the run kept asking.
    let reached: u64 = redis::cmd("ZCARD")
        .arg("trendsync:{key1}:budget")
        .query(&mut server.connection())
        .expect("ZCARD");
    assert!(
        (charged..=charged + 1).contains(&reached),
        "{reached} charges reached Redis; the run charged {charged} before it hung"
    );
    // The charge that timed out and then landed late is replayed too: counted once.
    let (after, _) = budget(&h, &server);
    assert_eq!(after["used"], 9, "{after}");
    assert_window_holds_what_was_sent(&h, &after);
    assert!(journalled(&h).is_empty());
}

#[test]
fn budget_charge_replays_the_journal_before_charging() {
    let mut server = RedisServer::start();
    server.stop();
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    h.expect_stderr("is unreachable: Connection refused");
    run_bounded(&h, &server, &["run", "--region", "US", "--json"]);
    assert_eq!(journalled(&h).len(), 3);

    // Still down: asking by hand is denied (exit 75, try later: nothing can be
    // granted), and the journal is kept.
    let refused = finish(
        h.bare()
            .redis(&server)
            .args(["budget", "charge", "videos.list", "--json"])
            .expect_stderr("nothing was charged")
            .status(75)
            .stderr(contains("unreachable"))
            .start(),
    );
    let answer = refused.json();
    assert_eq!(answer["granted"], false, "{answer}");
    assert_eq!(answer["denied_by"], "limiter", "{answer}");
    assert!(
        answer["used"].is_null() && answer["remaining"].is_null(),
        "{answer}"
    );
    assert_eq!(journalled(&h).len(), 3);

    server.restart();
    let granted = finish(
        h.bare()
            .redis(&server)
            .args(["budget", "charge", "videos.list", "--count", "2", "--json"])
            .start(),
    );
    let answer = granted.json();
    assert_eq!(answer["granted"], true, "{answer}");
    assert_eq!(
        answer["used"],
        3 + 2,
        "the journal was replayed first: {answer}"
    );
    assert!(journalled(&h).is_empty());
}

/// Redis takes the charge's connection, then holds its script past the response
/// timeout (`CLIENT PAUSE … WRITE` holds scripts that write, and answers `PING`):
/// the request was sent, so the refusal must not claim that nothing was charged.
#[test]
fn a_charge_redis_holds_past_its_timeout_is_refused_without_claiming_nothing_was_charged() {
    let server = RedisServer::start();
    let h = Harness::new(None);
    let () = server.query(redis::cmd("CLIENT").arg("PAUSE").arg(4_000).arg("WRITE"));
    let refused = finish(
        h.bare()
            .redis(&server)
            .args(["budget", "charge", "search.list", "--json"])
            .expect_stderr(
                "is unreachable: timed out; not granted, though the limiter may have counted it",
            )
            .status(75)
            .stderr(lacks("nothing was charged"))
            .start(),
    );
    let () = server.query(redis::cmd("CLIENT").arg("UNPAUSE"));
    let answer = refused.json();
    assert_eq!(answer["granted"], false, "{answer}");
    assert_eq!(answer["denied_by"], "limiter", "{answer}");
    // Whether the held script ran once the pause ended is Redis's business; the
    // window holds that one charge or nothing, never more.
    let (after, _) = budget(&h, &server);
    let used = after["used"].as_u64().expect("used is a number");
    assert!(used == 0 || used == 100, "{after}");
}

/// The metrics file's samples, `name{labels}` to value.
fn samples(path: &std::path::Path) -> BTreeMap<String, f64> {
    std::fs::read_to_string(path)
        .expect("reading the metrics file")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// The buckets' and the main budget's series.
fn budget_series(samples: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    samples
        .iter()
        .filter(|(s, _)| s.starts_with("trendsync_bucket_") || s.starts_with("trendsync_budget_"))
        .map(|(s, v)| (s.clone(), *v))
        .collect()
}

/// docs/budget.md, "When the limiter is down" and 7: with Redis down, a run whose search is
/// denied only because the limiter did not answer ends `limiter_down` (75), not
/// `budget_exhausted`; the metrics file says the limiter is down and how many calls wait in
/// the journal, and keeps the buckets' last known figures, so their alerts do not go quiet.
/// The next run on a live Redis replays them: up again, nothing pending, and the window
/// holds exactly what was called.
#[test]
fn a_run_stopped_by_a_down_limiter_ends_limiter_down_and_its_metrics_say_so() {
    let mut server = RedisServer::start_durable();
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(WITH_SEARCH);
    let metrics = h.scratch.file("trendsync.prom");
    let metrics_arg = metrics.to_str().expect("a UTF-8 path").to_owned();
    let args = ["run", "--json", "--metrics-file", metrics_arg.as_str()];

    let (ran, _) = run_bounded(&h, &server, &args);
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    assert_eq!(report["bucket"], Value::Null, "{report}");
    let live = samples(&metrics);
    assert_eq!(
        live.get("trendsync_limiter_up{budget=\"key1\"}"),
        Some(&1.0)
    );
    assert_eq!(
        live.get("trendsync_journal_pending_calls{budget=\"key1\"}"),
        Some(&0.0)
    );
    let known = budget_series(&live);
    assert!(
        known.contains_key("trendsync_bucket_used_units{budget=\"key1\",bucket=\"budget\"}"),
        "{known:?}"
    );

    server.stop();
    h.expect_stderr("is unreachable: Connection refused")
        .expect_stderr("stopped: the limiter is down and [when_limiter_down] denies search.list")
        .expect_ended("limiter_down")
        .status(75);
    let (ran, calls) = run_bounded(&h, &server, &args);
    let report = ran.json();
    assert_eq!(report["status"], "limiter_down", "{report}");
    assert_eq!(report["bucket"], "budget", "{report}");
    assert_eq!(report["remaining_by_bucket"], Value::Null, "{report}");
    assert!(
        !calls.is_empty() && calls.iter().all(|c| c.method != "search.list"),
        "the trending pages are made unmetered, the search is not: {:?}",
        shorts(&calls)
    );
    let down = samples(&metrics);
    assert_eq!(
        down.get("trendsync_limiter_up{budget=\"key1\"}"),
        Some(&0.0)
    );
    let pending = down
        .get("trendsync_journal_pending_calls{budget=\"key1\"}")
        .copied()
        .unwrap_or(0.0);
    assert!(pending > 0.0, "{down:?}");
    assert_eq!(pending as usize, journalled(&h).len());
    assert_eq!(
        budget_series(&down),
        known,
        "the buckets' series stay, with the last known figures"
    );
    assert_eq!(
        down.get("trendsync_last_run_status{kind=\"run\",status=\"limiter_down\"}"),
        Some(&1.0)
    );

    server.restart();
    let (ran, _) = run_bounded(&h, &server, &args);
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{report}");
    let back = samples(&metrics);
    assert_eq!(
        back.get("trendsync_limiter_up{budget=\"key1\"}"),
        Some(&1.0)
    );
    assert_eq!(
        back.get("trendsync_journal_pending_calls{budget=\"key1\"}"),
        Some(&0.0)
    );
    assert!(journalled(&h).is_empty());
    let (after, _) = budget(&h, &server);
    assert_window_holds_what_was_sent(&h, &after);
    assert_eq!(
        back.get("trendsync_bucket_used_units{budget=\"key1\",bucket=\"budget\"}"),
        after["used"].as_f64().as_ref(),
        "{after}"
    );
}

/// The oldest call of the journal not yet replayed, as RFC 3339 (none when empty).
fn oldest_journalled(h: &Harness<'_>) -> Option<String> {
    let us: Option<i64> = h
        .db()
        .query_row(
            "SELECT MIN(made_at_us) FROM quota_journal WHERE metered = 0",
            [],
            |r| r.get(0),
        )
        .expect("reading the journal");
    us.map(|us| {
        jiff::Timestamp::from_microsecond(us)
            .expect("a time")
            .to_string()
    })
}

/// docs/json.md, `journal` and `last_known`: with Redis down, `status` says how many
/// calls wait in the journal to be counted and since when, and the last known figures
/// with when they were read; `budget` shows those figures and still exits 75 (try
/// later), in text and JSON. Once Redis answers and the journal is replayed, nothing
/// waits and the figures are current again.
#[test]
fn with_redis_down_status_and_budget_say_what_is_still_known() {
    let mut server = RedisServer::start_durable();
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let (ran, _) = run_bounded(&h, &server, &["run", "--json"]);
    assert_eq!(ran.json()["status"], "complete");
    let (live, _) = budget(&h, &server);
    let used = units(&live, "used");
    assert!(used > 0, "{live}");
    let first_run_ended: i64 = h
        .db()
        .query_row("SELECT ended_at FROM runs", [], |r| r.get(0))
        .expect("the first run's end");

    // Down: the run's calls go ahead unmetered and wait in the journal.
    server.stop();
    h.expect_stderr("is unreachable: Connection refused");
    let (ran, _) = run_bounded(&h, &server, &["run", "--json"]);
    assert_eq!(ran.json()["status"], "complete");
    let rows = journalled(&h);
    let waiting = rows.len() as u64;
    let waiting_units: i64 = rows.iter().map(|(_, u)| u).sum();
    assert!(waiting > 0);
    let oldest = oldest_journalled(&h).expect("a journalled call");

    let status = finish(
        h.bare()
            .redis(&server)
            .args(["status", "--json"])
            .expect_stderr("is unreachable: Connection refused")
            .start(),
    )
    .json();
    assert_eq!(status["budget"], Value::Null, "{status}");
    assert_eq!(
        status["journal"],
        json!({ "pending_calls": waiting, "oldest_at": oldest }),
        "{status}"
    );
    let known = &status["last_known"];
    assert_eq!(
        known["used"], used,
        "the figures the first run read: {status}"
    );
    assert_eq!(known["buckets"][0]["name"], "budget", "{status}");
    let as_of: jiff::Timestamp = known["as_of"]
        .as_str()
        .expect("as_of is a time")
        .parse()
        .expect("RFC 3339");
    assert_eq!(
        as_of.as_second(),
        first_run_ended,
        "read at the first run's end: {status}"
    );
    let text = finish(
        h.bare()
            .redis(&server)
            .arg("status")
            .expect_stderr("is unreachable: Connection refused")
            .start(),
    )
    .stdout;
    for said in [
        "the limiter cannot be read: ".to_owned(),
        "  last known figures, as the latest run that read the limiter left them at ".to_owned(),
        format!("    bucket \"budget\": {used} used of ceiling "),
        format!(
            "  journal: {waiting} calls made while the limiter was down wait to be counted, the oldest made at "
        ),
    ] {
        assert!(text.contains(&said), "{said:?} in:\n{text}");
    }

    // `budget`: the error, the same figures, and 75.
    let down = finish(
        h.bare()
            .redis(&server)
            .args(["budget", "--json"])
            .expect_stderr("is unreachable: Connection refused")
            .status(75)
            .start(),
    )
    .json();
    assert_eq!(
        (&down["status"], &down["exit_code"]),
        (&json!("failed"), &json!(75)),
        "{down}"
    );
    assert!(
        down["error"]
            .as_str()
            .is_some_and(|e| e.contains("is unreachable")),
        "{down}"
    );
    assert_eq!(down["last_known"], status["last_known"], "{down}");
    assert_eq!(down["journal"], status["journal"], "{down}");
    assert_eq!(down["limiter"]["kind"], "redis", "{down}");
    let ran = finish(
        h.bare()
            .redis(&server)
            .arg("budget")
            .expect_stderr("is unreachable: Connection refused")
            .status(75)
            .start(),
    );
    assert!(
        ran.stdout
            .contains("the limiter cannot be read, so nothing below is current")
            && ran
                .stdout
                .contains(&format!("bucket \"budget\": {used} used of ceiling "))
            && ran.stdout.contains(&format!("journal: {waiting} calls")),
        "{}",
        ran.stdout
    );

    // Back: `budget` replays the journal; nothing waits, nothing is stale.
    server.restart();
    let (after, log) = budget(&h, &server);
    assert_eq!(lines_with(&log, REPLAYED).len(), 1, "{log}");
    let now_used = used + u64::try_from(waiting_units).expect("units");
    assert_eq!(units(&after, "used"), now_used, "{after}");
    let status = finish(h.bare().redis(&server).args(["status", "--json"]).start()).json();
    assert_eq!(
        status["journal"],
        json!({ "pending_calls": 0, "oldest_at": null }),
        "{status}"
    );
    assert_eq!(status["last_known"], Value::Null, "{status}");
    assert_eq!(status["budget"]["used"], now_used, "{status}");
}
