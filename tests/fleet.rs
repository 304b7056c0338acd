//! The fleet (docs/commands.md, "Several hosts"): several hosts run one schedule against
//! one Redis, each with its own database, its own `--host-name` and its own upstream (a
//! fake each, so that every host's calls are counted apart; what the upstream billed is
//! their sum), and ship their slots to one `file://` sink.
//!
//! Time is Redis's: a slot's id comes from Redis `TIME`, and so does a lease's lapse,
//! so these scenarios move the one `redis-server`'s clock (the LD_PRELOAD shim of
//! tests/common) through a day of hourly slots instead of waiting for it, and date the
//! fakes' answers with it (the run checks Redis's clock against the upstream's
//! `Date`). The hosts' own clocks are the real one: nothing of the fleet reads them.
//! Kills and pauses are triggered by what a host has visibly done (the requests its
//! slow fake received), not by guessed sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::moto::python;
use crate::common::redis_deployments::Cluster;
use crate::common::redis_server::real_now_us;
use crate::common::upstream::{API_KEY, FakeUpstream};
use crate::common::{Costs, RedisServer, Running, Trendsync, files_under};

/// The shipped regions: eight, one chart each (2 pages), no categories, no searches.
const CODES: [&str; 8] = ["US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"];
/// Chart calls of one region's slot: its two pages.
const PAGES: usize = 2;
const HOUR_US: i64 = 3_600_000_000;
const MINUTE_US: i64 = 60_000_000;
/// The lease the scenarios configure; a host that comes this long and more after
/// another died finds its lease lapsed.
const LEASE: &str = "2m";
/// When in its slot each host runs: A at the offset, B a little later (past A's
/// lease), C later still.
const A_AT: i64 = 30_000_000;
const B_AT: i64 = 5 * MINUTE_US;
const C_AT: i64 = 10 * MINUTE_US;
/// How long a slow fake takes to answer: slow enough to kill or stop a host at a
/// chosen call.
const SLOW: Duration = Duration::from_millis(250);

/// Every warning a host of these scenarios may print, whatever the slot brings.
const ALLOWED: [&str; 2] = [
    // A host's first run after it was killed finds the killed run's rows.
    "was left running by a process that died",
    // A host that comes after a killed one takes its slots over, and says so.
    "whose lease lapsed with no done mark",
];

/// The eight regions, all at minute 0, slots of `slot` and leases of `lease`.
fn regions_toml(slot: &str, lease: &str) -> String {
    let mut text = format!("[defaults]\npages = {PAGES}\nslot = \"{slot}\"\nlease = \"{lease}\"\n");
    for code in CODES {
        text.push_str(&format!("\n[[region]]\ncode = \"{code}\"\noffset = 0\n"));
    }
    text
}

/// One host of the fleet: its own scratch directory and database, its name, its
/// upstream, and a slow upstream for the slots it is killed or stopped in.
struct Host<'r> {
    name: &'static str,
    h: Harness<'r>,
    slow: FakeUpstream,
    /// `--redis-url`, when the Redis is not a [`RedisServer`] of the harness (a Cluster).
    redis_url: Option<String>,
    /// `--sink`, on every run.
    sink: Option<String>,
}

impl<'r> Host<'r> {
    fn new(name: &'static str, redis: &'r RedisServer, sink: Option<&str>) -> Host<'r> {
        Host::build(name, Some(redis), None, sink, &regions_toml("1h", LEASE))
    }

    fn build(
        name: &'static str,
        redis: Option<&'r RedisServer>,
        redis_url: Option<String>,
        sink: Option<&str>,
        regions: &str,
    ) -> Host<'r> {
        let mut h = Harness::with(FakeUpstream::youtube(), redis);
        h.costs(Costs::one_unit_each()).regions(regions);
        for allowed in ALLOWED {
            h.allow_stderr(allowed);
        }
        Host {
            name,
            h,
            slow: FakeUpstream::youtube_after(SLOW),
            redis_url,
            sink: sink.map(str::to_owned),
        }
    }

    /// The binary with this host's database, configuration and Redis.
    fn bare(&self) -> Trendsync {
        let cmd = self.h.bare();
        match &self.redis_url {
            Some(url) => cmd.args(["--redis-url", url]),
            None => cmd,
        }
    }

    /// `run --json` as this host, against `fake`, shipping to its sink if it has one.
    fn run_cmd(&self, fake: &FakeUpstream) -> Trendsync {
        let mut cmd = self
            .bare()
            .args(["--api-base", &fake.uri()])
            .env("YOUTUBE_API_KEY", API_KEY)
            .args(["run", "--json", "--host-name", self.name]);
        if let Some(sink) = &self.sink {
            cmd = cmd.args(["--sink", sink]);
        }
        cmd
    }

    /// A whole run, which must end complete; its report.
    #[track_caller]
    fn run(&self, what: &str) -> Value {
        let report = self.run_cmd(&self.h.fake).run().json();
        assert_eq!(report["status"], "complete", "{what}: {report}");
        report
    }

    /// The chart calls (`videos.list` of a chart) this host's upstreams received.
    fn chart_calls(&self) -> usize {
        chart_calls(&self.h.fake) + chart_calls(&self.slow)
    }

    fn db(&self) -> Connection {
        self.h.db()
    }

    /// `export --per fetch --chart all` as Parquet, at `path`.
    fn export_parquet(&self, path: &Path) {
        self.bare()
            .args([
                "export", "--per", "fetch", "--chart", "all", "--format", "parquet", "--output",
            ])
            .arg(path)
            .stdout("")
            .run();
    }

    /// `export --per fetch --chart all --format jsonl`: its rows.
    fn export_rows(&self) -> Vec<Value> {
        let ran = self
            .bare()
            .args([
                "export", "--per", "fetch", "--chart", "all", "--format", "jsonl",
            ])
            .run();
        ran.stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// `status --coverage --json --since SINCE`.
    fn coverage(&self, since_us: i64) -> Value {
        self.bare()
            .args(["status", "--coverage", "--json", "--since"])
            .arg(rfc3339(since_us))
            .run()
            .json()
    }
}

fn chart_calls(fake: &FakeUpstream) -> usize {
    fake.calls()
        .iter()
        .filter(|c| c.method == "videos.list" && c.ids.is_none())
        .count()
}

/// The day's clock: moves Redis (and the dates every fake answers with) to `at_us`.
struct DayClock<'a> {
    redis: &'a RedisServer,
    fakes: Vec<&'a FakeUpstream>,
}

impl DayClock<'_> {
    fn of<'a>(redis: &'a RedisServer, hosts: &[&'a Host<'_>]) -> DayClock<'a> {
        DayClock {
            redis,
            fakes: hosts.iter().flat_map(|h| [&h.h.fake, &h.slow]).collect(),
        }
    }

    fn set(&self, at_us: i64) {
        self.redis.clock().set_now_us(at_us);
        let shift_s = (at_us - real_now_us()) / 1_000_000;
        for f in &self.fakes {
            f.shift_dates(shift_s);
        }
    }
}

/// A Redis whose clock the test moves.
fn movable_redis() -> RedisServer {
    RedisServer::start_at(real_now_us())
}

/// An hour at least 20 hours back: a day from there ends within a few hours of now,
/// so Redis's clock and the hosts' stay within a day of each other.
fn day_start_us() -> i64 {
    let back = real_now_us() - 20 * HOUR_US;
    back - back.rem_euclid(HOUR_US)
}

/// Starts `cmd`, waits until `done` says the process did what the test waits for,
/// then sends `signal` to it.
fn signal_when(cmd: Trendsync, signal: i32, what: &str, mut done: impl FnMut() -> bool) -> Running {
    let mut run = cmd.start();
    let started = Instant::now();
    while !done() {
        if let Ok(Some(status)) = run.child.try_wait() {
            panic!("the host ended ({status}) before it {what}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the host never {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    signal_process(&run, signal);
    run
}

fn signal_process(run: &Running, signal: i32) {
    let pid = libc::pid_t::try_from(run.child.id()).expect("a pid");
    // SAFETY: kill(2) on the child's pid, which the test still owns (not yet waited).
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(rc, 0, "signalling the host");
}

/// How many leased fetches of the host's database are still `fetching` (its pages
/// stored, the slot not finished); 0 while there is no database yet.
fn fetching(host: &Host<'_>) -> usize {
    let Ok(db) =
        Connection::open_with_flags(host.h.db_path(), rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
    else {
        return 0;
    };
    db.query_row(
        "SELECT count(*) FROM fetch_slots WHERE state = 'fetching'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map_or(0, |n| usize::try_from(n).unwrap_or(0))
}

/// Runs the host against its slow upstream, SIGKILLed mid-fetch: once it stored a
/// page of a slot it claimed (every region's slot is claimed before any call). The
/// chart calls it made.
fn killed_mid_fetch(host: &Host<'_>, what: &str) -> usize {
    let before = (chart_calls(&host.slow), fetching(host));
    let run = signal_when(
        host.run_cmd(&host.slow),
        libc::SIGKILL,
        "stored a page",
        || fetching(host) > before.1,
    );
    let out = run.killed();
    assert_eq!(
        out.status.code(),
        None,
        "{what}: the host ended before the kill"
    );
    // A request written just before the kill may reach the fake a little later.
    host.slow.settled();
    chart_calls(&host.slow) - before.0
}

/// A leased fetch as a database keeps it: (region, slot start) and token.
type Leased = ((String, i64), i64);

/// The leased chart fetches a database holds in `state`, each with its slot and token.
fn slots_in_state(db: &Connection, state: &str) -> Vec<Leased> {
    let mut stmt = db
        .prepare(
            "SELECT g.code, s.slot_start, s.token FROM fetch_slots AS s
             JOIN fetches AS f ON f.num = s.fetch
             JOIN regions AS g ON g.num = f.region
             WHERE s.state = ?1 AND f.search = 0 ORDER BY s.fetch",
        )
        .expect("reading the slot table");
    stmt.query_map([state], |r| Ok(((r.get(0)?, r.get(1)?), r.get(2)?)))
        .expect("reading the slot table")
        .map(|r| r.expect("a slot row"))
        .collect()
}

/// The (region, slot start) of every fetch a database holds as current: the leased
/// fetches whose slot was marked done by their holder.
fn current_slots(db: &Connection) -> Vec<(String, i64)> {
    slots_in_state(db, "current")
        .into_iter()
        .map(|(slot, _)| slot)
        .collect()
}

/// Every token a database recorded, run by run in the order the runs began, each
/// run's sorted; and the largest it keeps for its next claims' floor.
fn tokens_by_run(db: &Connection) -> (Vec<Vec<i64>>, i64) {
    let mut stmt = db
        .prepare(
            "SELECT f.run, s.token FROM fetch_slots AS s JOIN fetches AS f ON f.num = s.fetch
             ORDER BY f.run, s.token",
        )
        .expect("reading the slot table");
    let mut runs: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for row in stmt
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
        .expect("reading tokens")
    {
        let (run, token) = row.expect("a token");
        runs.entry(run).or_default().push(token);
    }
    let largest = db
        .query_row("SELECT largest FROM slot_tokens", [], |r| r.get(0))
        .expect("the largest token");
    (runs.into_values().collect(), largest)
}

/// Every (region, slot) appears once in `found`, and they are `expected`.
#[track_caller]
fn each_once(found: &[(String, i64)], expected: &BTreeSet<(String, i64)>, what: &str) {
    let mut seen = BTreeMap::new();
    for slot in found {
        *seen.entry(slot.clone()).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{what}: current more than once: {twice:?}"
    );
    let keys: BTreeSet<(String, i64)> = seen.into_keys().collect();
    assert_eq!(&keys, expected, "{what}: the slots current");
}

fn rfc3339(us: i64) -> String {
    jiff::Timestamp::from_microsecond(us)
        .expect("a time in range")
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The (region, slot start s) of every region in the slot starting at `slot_us`.
fn slot_of(slot_us: i64) -> BTreeSet<(String, i64)> {
    CODES
        .iter()
        .map(|c| ((*c).to_owned(), slot_us / 1_000_000))
        .collect()
}

/// The statuses of a run's regions, by code.
fn statuses(report: &Value) -> BTreeMap<String, String> {
    report["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .map(|r| {
            (
                r["code"].as_str().expect("a code").to_owned(),
                r["status"].as_str().expect("a status").to_owned(),
            )
        })
        .collect()
}

/// Every region of `report` ended `status`.
#[track_caller]
fn all_regions(report: &Value, status: &str, what: &str) {
    let all: BTreeMap<String, String> = CODES
        .iter()
        .map(|c| ((*c).to_owned(), status.to_owned()))
        .collect();
    assert_eq!(statuses(report), all, "{what}: {report}");
}

/// Every region of a coverage was fetched by `hosts`, slot counts by host name, with
/// nothing missed.
#[track_caller]
fn coverage_by(cov: &Value, hosts: &[(&str, u64)], what: &str) {
    assert_eq!(cov["missed"], 0, "{what}: {cov}");
    let expected: u64 = hosts.iter().map(|(_, n)| n).sum();
    let by: serde_json::Map<String, Value> = hosts
        .iter()
        .map(|(h, n)| ((*h).to_owned(), Value::from(*n)))
        .collect();
    let regions = cov["regions"].as_array().expect("regions");
    assert_eq!(regions.len(), CODES.len(), "{what}: {cov}");
    for region in regions {
        assert_eq!(region["expected"], expected, "{what}: {region}");
        assert_eq!(region["fetched"], expected, "{what}: {region}");
        assert_eq!(
            region["hosts"],
            Value::Object(by.clone()),
            "{what}: {region}"
        );
    }
}

/// The sink's object names for the overall charts of every region in `slots` (starts
/// in microseconds): one each.
fn objects_of(slots: impl IntoIterator<Item = i64>) -> Vec<String> {
    let mut names = Vec::new();
    for slot_us in slots {
        let at = jiff::Timestamp::from_microsecond(slot_us).expect("a time in range");
        let (date, stamp) = (
            at.strftime("%Y-%m-%d").to_string(),
            at.strftime("%Y%m%dT%H%M%SZ").to_string(),
        );
        for code in CODES {
            names.push(format!("date={date}/region={code}/{stamp}-chart-0.parquet"));
        }
    }
    names.sort();
    names
}

/// Reads the whole sink at `root` with DuckDB (a glob, as the README does) and the
/// Parquet `exports`, and returns both as rows of export's columns, sorted alike on
/// every column.
const READ_SINK_AND_EXPORTS: &str = r#"
import datetime, json, sys
import duckdb
import pyarrow.parquet as pq

root, exports = sys.argv[1], sys.argv[2:]
columns = pq.read_schema(exports[0]).names

def plain(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value

def rows(records):
    out = [[plain(r[c]) for c in columns] for r in records]
    return sorted(out, key=lambda r: json.dumps(r, default=str))

exported = [r for e in exports for r in pq.read_table(e).to_pylist()]
sink = duckdb.sql(
    f"SELECT * FROM read_parquet('{root}/**/*.parquet', hive_partitioning = true)"
).to_arrow_table().to_pylist()
print(json.dumps({"columns": columns, "sink": rows(sink), "export": rows(exported)}, default=str))
"#;

/// The sink at `root`, read by DuckDB, equals row by row the union of the hosts'
/// exports of their current fetches; the number of rows.
#[track_caller]
fn assert_sink_is_exports(root: &Path, hosts: &[&Host<'_>], what: &str) -> usize {
    let exports: Vec<PathBuf> = hosts
        .iter()
        .map(|h| {
            let path = h.h.scratch.file("export.parquet");
            // A file from an earlier call is replaced only by a new path: remove it.
            let _ = std::fs::remove_file(&path);
            h.export_parquet(&path);
            path
        })
        .collect();
    let out = Command::new(python())
        .args(["-c", READ_SINK_AND_EXPORTS])
        .arg(root)
        .args(&exports)
        .stdin(Stdio::null())
        .output()
        .expect("running python");
    assert!(
        out.status.success(),
        "{what}: reading the sink with DuckDB: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: Value = serde_json::from_slice(&out.stdout).expect("JSON from python");
    let (sink, export) = (
        read["sink"].as_array().expect("rows"),
        read["export"].as_array().expect("rows"),
    );
    assert!(!export.is_empty(), "{what}: nothing exported");
    assert_eq!(
        sink.len(),
        export.len(),
        "{what}: rows in the sink and the exports"
    );
    for (i, (s, e)) in sink.iter().zip(export).enumerate() {
        assert_eq!(s, e, "{what}: row {i} ({})", read["columns"]);
    }
    export.len()
}

/// What a simulated day does to host A in a slot.
#[derive(Debug, Clone, Copy, PartialEq)]
enum A {
    Runs,
    KilledMidFetch,
    Absent,
}

/// Three slots A is killed in mid-fetch, three others it never starts in, out of 24;
/// shuffled by `seed`.
fn day_plan(seed: u64) -> BTreeMap<usize, A> {
    let mut slots: Vec<usize> = (0..24).collect();
    let mut rng = seed;
    for i in (1..slots.len()).rev() {
        rng = rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        slots.swap(i, usize::try_from(rng >> 33).expect("31 bits") % (i + 1));
    }
    (0..24)
        .map(|s| {
            let what = if slots[..3].contains(&s) {
                A::KilledMidFetch
            } else if slots[3..6].contains(&s) {
                A::Absent
            } else {
                A::Runs
            };
            (s, what)
        })
        .collect()
}

#[test]
fn a_day_on_two_hosts_fetches_every_slot_once_at_one_hosts_cost() {
    let redis = movable_redis();
    let sink_dir = tempfile::tempdir().expect("a sink directory");
    let sink = format!("file://{}", sink_dir.path().display());
    let a = Host::new("host-a", &redis, Some(&sink));
    let b = Host::new("host-b", &redis, Some(&sink));
    let clock = DayClock::of(&redis, &[&a, &b]);

    let seed = real_now_us().unsigned_abs();
    let plan = day_plan(seed);
    let start = day_start_us();
    let mut killed_calls = 0;
    for (&s, &what) in &plan {
        let slot = start + i64::try_from(s).expect("a slot") * HOUR_US;
        let at = format!("seed {seed}, slot {s} ({what:?})");
        clock.set(slot + A_AT);
        match what {
            A::Runs => all_regions(&a.run(&at), "complete", &at),
            A::KilledMidFetch => killed_calls += killed_mid_fetch(&a, &at),
            A::Absent => {}
        }
        clock.set(slot + B_AT);
        let report = b.run(&at);
        // A killed run finished no slot (a run marks its slots done once its regions'
        // phases are over): B takes every region over, or claims it untouched.
        let b_status = match what {
            A::Runs => "done_elsewhere",
            A::Absent | A::KilledMidFetch => "complete",
        };
        all_regions(&report, b_status, &at);
    }

    // Every (region, slot) current exactly once across both databases.
    let current: Vec<(String, i64)> = [current_slots(&a.db()), current_slots(&b.db())].concat();
    let expected: BTreeSet<(String, i64)> =
        (0..24).flat_map(|s| slot_of(start + s * HOUR_US)).collect();
    each_once(&current, &expected, &format!("seed {seed}"));
    // A's pages of the slots it was killed in are there, and never current.
    let killed: BTreeSet<i64> = plan
        .iter()
        .filter(|(_, w)| **w == A::KilledMidFetch)
        .map(|(s, _)| (start + i64::try_from(*s).expect("a slot") * HOUR_US) / 1_000_000)
        .collect();
    let left: BTreeSet<i64> = slots_in_state(&a.db(), "fetching")
        .into_iter()
        .map(|((_, s), _)| s)
        .collect();
    assert_eq!(
        left, killed,
        "seed {seed}: the slots of A's pages left fetching"
    );

    // The upstream billed one host's worth of charts, plus the calls of the killed
    // fetches that B fetched again, and no more.
    assert!(
        killed_calls > 0,
        "seed {seed}: the kills came before any call"
    );
    assert_eq!(
        a.chart_calls() + b.chart_calls(),
        24 * CODES.len() * PAGES + killed_calls,
        "seed {seed}: chart calls, {killed_calls} of them killed"
    );

    println!(
        "seed {seed}: {} chart calls, {killed_calls} of them killed with A",
        a.chart_calls() + b.chart_calls()
    );
    // The sink holds each slot once, and its rows are both databases' current fetches.
    assert_eq!(
        files_under(sink_dir.path()),
        objects_of((0..24).map(|s| start + s * HOUR_US)),
        "seed {seed}"
    );
    let rows = assert_sink_is_exports(sink_dir.path(), &[&a, &b], &format!("seed {seed}"));
    assert!(rows >= 24 * CODES.len(), "seed {seed}: {rows} rows");

    // Coverage: nothing missed while the 25th slot goes on, A's slots and B's named;
    // then, with no host running in it, that slot is missed in every region, and says
    // why.
    clock.set(start + 24 * HOUR_US + B_AT);
    let by_a = u64::try_from(plan.values().filter(|w| **w == A::Runs).count()).expect("a count");
    let cov = b.coverage(start);
    coverage_by(
        &cov,
        &[("host-a", by_a), ("host-b", 24 - by_a)],
        &format!("seed {seed}"),
    );
    clock.set(start + 25 * HOUR_US + A_AT);
    let cov = a.coverage(start);
    assert_eq!(cov["missed"], CODES.len(), "{cov}");
    for region in cov["regions"].as_array().expect("regions") {
        assert_eq!(region["expected"], 25, "{region}");
        assert_eq!(region["fetched"], 24, "{region}");
        assert_eq!(region["missed"], 1, "{region}");
        let missed = &region["missed_slots"][0];
        assert_eq!(missed["slot"], rfc3339(start + 24 * HOUR_US), "{region}");
        assert_eq!(missed["reason"], "no_host_ran", "{region}");
    }
}

#[test]
fn three_hosts_fetch_each_slot_once_whichever_of_them_dies() {
    let redis = movable_redis();
    let a = Host::new("host-a", &redis, None);
    let b = Host::new("host-b", &redis, None);
    let c = Host::new("host-c", &redis, None);
    let clock = DayClock::of(&redis, &[&a, &b, &c]);
    let start = day_start_us();
    let slot = |k: i64| start + k * HOUR_US;

    // Slot 0: A fetches; B and C find it done.
    clock.set(slot(0) + A_AT);
    all_regions(&a.run("slot 0, A"), "complete", "slot 0, A");
    clock.set(slot(0) + B_AT);
    all_regions(&b.run("slot 0, B"), "done_elsewhere", "slot 0, B");
    clock.set(slot(0) + C_AT);
    all_regions(&c.run("slot 0, C"), "done_elsewhere", "slot 0, C");

    // Slot 1: A is down, B is killed mid-fetch, C takes over B's lapsed leases.
    clock.set(slot(1) + A_AT);
    coverage_by(&c.coverage(slot(0)), &[("host-a", 1)], "slot 0");
    clock.set(slot(1) + B_AT);
    killed_mid_fetch(&b, "slot 1, B");
    clock.set(slot(1) + C_AT);
    all_regions(&c.run("slot 1, C"), "complete", "slot 1, C");

    // Slot 2: A is killed mid-fetch, B takes over, C finds it done.
    clock.set(slot(2) + A_AT);
    coverage_by(&a.coverage(slot(1)), &[("host-c", 1)], "slot 1");
    killed_mid_fetch(&a, "slot 2, A");
    clock.set(slot(2) + B_AT);
    all_regions(&b.run("slot 2, B"), "complete", "slot 2, B");
    clock.set(slot(2) + C_AT);
    all_regions(&c.run("slot 2, C"), "done_elsewhere", "slot 2, C");

    clock.set(slot(3) + A_AT);
    coverage_by(&b.coverage(slot(2)), &[("host-b", 1)], "slot 2");
    coverage_by(
        &b.coverage(slot(0)),
        &[("host-a", 1), ("host-b", 1), ("host-c", 1)],
        "the three slots",
    );
    // Each slot current once, in the database of the host that fetched it.
    each_once(&current_slots(&a.db()), &slot_of(slot(0)), "A's database");
    each_once(&current_slots(&b.db()), &slot_of(slot(2)), "B's database");
    each_once(&current_slots(&c.db()), &slot_of(slot(1)), "C's database");
    // The killed hosts' pages of the slots they lost are there, and never current.
    for (host, k) in [(&a, 2), (&b, 1)] {
        let fetching = slots_in_state(&host.db(), "fetching");
        assert!(
            !fetching.is_empty(),
            "{}: no page stored before the kill",
            host.name
        );
        assert!(
            fetching.iter().all(|((_, s), _)| *s == slot(k) / 1_000_000),
            "{}: {fetching:?}",
            host.name
        );
    }
}

#[test]
fn a_holder_paused_past_its_lease_adds_nothing_current() {
    let redis = movable_redis();
    let sink_dir = tempfile::tempdir().expect("a sink directory");
    let sink = format!("file://{}", sink_dir.path().display());
    let a = Host::new("host-a", &redis, Some(&sink));
    let b = Host::new("host-b", &redis, Some(&sink));
    let clock = DayClock::of(&redis, &[&a, &b]);
    let start = day_start_us();

    // A claims every region's slot and is stopped once it stored a page.
    clock.set(start + A_AT);
    let paused = signal_when(
        a.run_cmd(&a.slow)
            .allow_stderr("is no longer this run's")
            .allow_stderr("was lost to host host-b"),
        libc::SIGSTOP,
        "stored a page",
        || fetching(&a) > 0,
    );
    // Past A's lease on Redis's clock (and within the upstream's tolerance of the
    // clock A charged its calls by), B takes every region over and ships it.
    clock.set(start + 3 * MINUTE_US);
    all_regions(&b.run("B"), "complete", "B");
    // A wakes up, fetches on and writes its pages late: the finish finds B's token.
    signal_process(&paused, libc::SIGCONT);
    let report = paused.finish().json();
    assert_eq!(report["status"], "complete", "{report}");
    all_regions(&report, "done_elsewhere", "A, woken");
    for region in report["regions"].as_array().expect("regions") {
        let error = region["error"].as_str().unwrap_or_default();
        assert!(error.contains("lost to host host-b"), "{region}");
    }

    // Nothing of A's is current: its pages of the slot are fenced.
    let fenced = slots_in_state(&a.db(), "fenced");
    assert!(!fenced.is_empty(), "A stored no page: {report}");
    assert!(current_slots(&a.db()).is_empty());
    assert!(slots_in_state(&a.db(), "fetching").is_empty());
    assert_eq!(a.export_rows(), Vec::<Value>::new(), "A's export");
    each_once(&current_slots(&b.db()), &slot_of(start), "B's database");
    // The coverage shows B's, in every region.
    clock.set(start + HOUR_US + A_AT);
    coverage_by(&a.coverage(start), &[("host-b", 1)], "the slot");
    // The sink holds the slot once, B's rows only.
    assert_eq!(files_under(sink_dir.path()), objects_of([start]));
    assert_sink_is_exports(sink_dir.path(), &[&b, &a], "the sink");
}

#[test]
fn tokens_only_grow_across_a_redis_that_lost_its_keys() {
    let redis = movable_redis();
    let sink_dir = tempfile::tempdir().expect("a sink directory");
    let sink = format!("file://{}", sink_dir.path().display());
    let a = Host::new("host-a", &redis, Some(&sink));
    let b = Host::new("host-b", &redis, Some(&sink));
    let clock = DayClock::of(&redis, &[&a, &b]);
    let start = day_start_us();

    clock.set(start + A_AT);
    all_regions(&a.run("slot 0, A"), "complete", "slot 0, A");
    redis.query::<()>(&redis::cmd("FLUSHALL"));
    // The hosts see their budget's window lost too, and put their charges back.
    for host in [&a, &b] {
        host.h
            .allow_stderr("the window is not the one this host charged into");
    }
    // The slot's record is gone: B claims it anew, under tokens above A's.
    clock.set(start + B_AT);
    all_regions(&b.run("slot 0, B"), "complete", "slot 0, B");
    clock.set(start + HOUR_US + A_AT);
    all_regions(&a.run("slot 1, A"), "complete", "slot 1, A");
    clock.set(start + HOUR_US + B_AT);
    all_regions(&b.run("slot 1, B"), "done_elsewhere", "slot 1, B");

    let (a_runs, a_largest) = tokens_by_run(&a.db());
    let (b_runs, b_largest) = tokens_by_run(&b.db());
    assert_eq!(
        (a_runs.len(), b_runs.len()),
        (2, 1),
        "{a_runs:?} {b_runs:?}"
    );
    // In claim order: A's of slot 0, B's after the flush, A's of slot 1.
    let in_order: Vec<i64> = [&a_runs[0], &b_runs[0], &a_runs[1]]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    assert_eq!(in_order.len(), 3 * CODES.len(), "{in_order:?}");
    assert!(
        in_order.windows(2).all(|w| w[0] < w[1]),
        "the tokens in claim order: {in_order:?}"
    );
    assert_eq!(Some(&a_largest), a_runs[1].last());
    assert_eq!(Some(&b_largest), b_runs[0].last());
    // The sink has one object per (slot, region, chart): B's of slot 0 came second and
    // found A's there (and counted it shipped), so the sink is A's rows alone.
    assert_eq!(
        files_under(sink_dir.path()),
        objects_of([start, start + HOUR_US])
    );
    let unshipped: i64 = b
        .db()
        .query_row(
            "SELECT count(*) FROM sink_outbox WHERE shipped_at IS NULL",
            [],
            |r| r.get(0),
        )
        .expect("B's outbox");
    assert_eq!(unshipped, 0);
    assert_sink_is_exports(sink_dir.path(), &[&a], "the sink");
}

#[test]
fn on_a_redis_cluster_one_host_fetches_and_the_other_finds_it_done() {
    const SLOT_US: i64 = 3_000_000;
    let cluster = Cluster::start();
    let url = cluster.seed_url(0);
    // Short slots on the real clock (a Cluster's clocks are not moved): each attempt
    // starts just past a slot's start, so that both runs fall in it; should the
    // machine be so slow that they do not, the attempt is made again in a later slot.
    let regions = regions_toml("3s", "1s");
    let a = Host::build("host-a", None, Some(url.clone()), None, &regions);
    let b = Host::build("host-b", None, Some(url), None, &regions);
    let mut slot = None;
    for _ in 0..3 {
        let now = real_now_us();
        let next = now - now.rem_euclid(SLOT_US) + SLOT_US;
        std::thread::sleep(Duration::from_micros(
            u64::try_from(next - now).expect("ahead") + 20_000,
        ));
        all_regions(&a.run("A"), "complete", "A");
        let a_slot = current_slots(&a.db())
            .last()
            .expect("A's fetches are current")
            .1;
        let report = b.run("B");
        if statuses(&report).values().all(|s| s == "done_elsewhere") {
            slot = Some(a_slot);
            break;
        }
        // B fetched: only because its run began in a later slot than A's.
        assert!(
            current_slots(&b.db()).iter().all(|(_, s)| *s > a_slot),
            "B fetched A's slot {a_slot}: {report}"
        );
    }
    let slot = slot.expect("A and B ran in one slot in one of 3 attempts");
    // Once the slot is over, its coverage names A in every region.
    let end = (slot + 3) * 1_000_000;
    std::thread::sleep(Duration::from_micros(
        u64::try_from(end - real_now_us()).unwrap_or(0) + 20_000,
    ));
    let cov = b.coverage(slot * 1_000_000);
    for region in cov["regions"].as_array().expect("regions") {
        assert_eq!(
            region["hosts"],
            serde_json::json!({"host-a": 1}),
            "{region}"
        );
        assert!(
            region["missed_slots"]
                .as_array()
                .expect("missed slots")
                .iter()
                .all(|m| m["slot"] != rfc3339(slot * 1_000_000)),
            "{region}"
        );
    }
}

/// `backfill` claims slots as `run` does, and a region another host fetched counts as
/// fresh for `--stale-after` (docs/commands.md, "Several hosts"): host B's backfill
/// after host A's run fetches nothing, and B's next backfill finds nothing stale.
#[test]
fn a_backfill_claims_slots_and_a_slot_done_elsewhere_is_fresh() {
    let redis = RedisServer::start();
    let a = Harness::new(Some(&redis));
    let b = Harness::new(Some(&redis));
    let ran = a.cmd().args(["run", "--json", "--host-name", "a"]).run();
    all_regions(&ran.json(), "complete", "A's run");
    let backfill = || {
        b.cmd()
            .args([
                "backfill",
                "--json",
                "--host-name",
                "b",
                "--stale-after",
                "2h",
            ])
            .run()
            .json()
    };
    let first = backfill();
    assert_eq!(first["status"], "complete", "{first}");
    all_regions(&first, "done_elsewhere", "B's backfill");
    let second = backfill();
    assert_eq!(
        second["regions"],
        serde_json::json!([]),
        "nothing stale: {second}"
    );
    assert_eq!(
        b.fake.calls().len(),
        0,
        "B called the upstream: {:?}",
        b.fake.calls()
    );
}
