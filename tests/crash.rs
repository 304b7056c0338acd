//! `kill -9` at any moment (docs/schema.md): the database the next process finds
//! is intact, every stored trending page is whole, no region lock is left behind, the
//! next run completes, and the budget charged every call the upstream received.
//!
//! Kills are triggered by what the process has visibly done, not by guessed sleeps:
//! the fake upstream answers slowly, so "N requests received" pins the run at a known
//! call, and "the database file exists" pins it in the middle of creating the schema.
//! Sweeps of kills at fractions of a measured run cover the moments in between
//! (storing a page, finishing the run).
//!
//! The budget invariant after a kill. Every call is charged (committed to the limiter)
//! before its request is sent, and a region task has at most one call between its
//! charge and its request. So, with `requests` the requests the upstream received
//! and `used` what the budget holds:
//! - `used >= requests`: nothing reached the upstream uncharged;
//! - each kill adds at most `concurrency` to `used - requests` (the region tasks that
//!   were between charge and send, whose request never left);
//! - a run that completes adds nothing to it: it charges exactly what it sends.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

use crate::common::harness::{Harness, regions_of};
use crate::common::upstream::{FakeUpstream, fixture_json};
use crate::common::{Costs, RedisServer, Scratch};

/// The regions of these scenarios; 2 pages each, and the category names on a fresh
/// database: 12 calls in a first run, 8 once the category names are fresh.
const CODES: [&str; 4] = ["US", "GB", "DE", "FR"];

/// How long the slow fake takes to answer each request.
const SLOW: Duration = Duration::from_millis(120);

const SIGKILL: i32 = 9;

fn regions_toml() -> String {
    // With the budget in Redis a run leases each region's slot: a killed run's lease
    // lapses after `lease`, and the next run waits for that before it takes the slot
    // over (docs/budget.md, "A fleet: slot leases"); a second keeps the tests quick.
    let mut text = String::from("[defaults]\npages = 2\nlease = \"1s\"\n");
    for (i, code) in CODES.iter().enumerate() {
        text.push_str(&format!(
            "\n[[region]]\ncode = \"{code}\"\noffset = {}\n",
            i * 5
        ));
    }
    text
}

/// A world of [`CODES`], every call costing 1 unit, with `fake` as the upstream of the
/// runs to be killed.
fn world(fake: FakeUpstream, redis: Option<&RedisServer>) -> Harness<'_> {
    let mut h = Harness::with(fake, redis);
    h.costs(Costs::one_unit_each()).regions(&regions_toml());
    h
}

/// When to kill a run.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// This long after the process was started.
    After(Duration),
    /// This long after the database file appeared: while the schema is created.
    DbCreated(Duration),
    /// As soon as the upstream has received this many requests of the run.
    Requests(usize),
}

/// What a killed run did.
struct Killed {
    /// Requests the upstream received from it.
    requests: usize,
    /// False when it had ended by itself before the kill.
    by_kill: bool,
    output: Output,
}

impl Killed {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

/// `run` with `concurrency`, killed with SIGKILL at `at`.
fn run_and_kill(h: &Harness<'_>, concurrency: usize, at: KillAt) -> Killed {
    let before = h.fake.received();
    let mut run = h
        .cmd()
        .args(["run", "--json", "--concurrency", &concurrency.to_string()])
        // Ended by itself before the kill came (its stderr is then checked), it may
        // have found the run killed in the cycle before.
        .allow_stderr("was left running by a process that died")
        .start();
    let started = Instant::now();
    let db = h.db_path();
    let mut created: Option<Instant> = None;
    loop {
        let due = match at {
            KillAt::After(d) => started.elapsed() >= d,
            KillAt::DbCreated(d) => {
                if created.is_none() && db.exists() {
                    created = Some(Instant::now());
                }
                created.is_some_and(|c| c.elapsed() >= d)
            }
            KillAt::Requests(n) => h.fake.received() >= before + n,
        };
        if due || run.child.try_wait().expect("polling the run").is_some() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{at:?} never came"
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    // A child that has already ended is not an error to kill; its status says which.
    let _ = run.child.kill();
    let output = run.killed();
    let killed = Killed {
        requests: h.fake.settled() - before,
        by_kill: output.status.signal() == Some(SIGKILL),
        output,
    };
    assert!(
        killed.by_kill || !matches!(at, KillAt::Requests(_)),
        "the run ended by itself ({}) before {at:?}: {}",
        killed.output.status,
        killed.stderr()
    );
    killed
}

/// A row of `runs`: status, ended_at.
type RunRow = (String, Option<i64>);

/// What the database holds, read as the next process finds it.
#[derive(Default)]
struct Found {
    runs: BTreeMap<String, RunRow>,
    /// Trending rows per (run, region).
    pages: BTreeMap<(String, String), usize>,
}

fn strings(db: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = db.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    stmt.query_map([], |r| r.get::<_, String>(0))
        .and_then(|rows| rows.collect())
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn number(db: &Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |r| r.get(0))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

/// The ids of both fixture pages, in chart order.
fn chart() -> Vec<String> {
    ["videos_page1.json", "videos_last_page.json"]
        .iter()
        .flat_map(|name| {
            fixture_json(name)["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|v| v["id"].as_str().expect("id").to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The database at `path` is intact and holds only whole pages; `what` says which
/// moment is being checked.
///
/// Checked on a copy of the file and its journal, so that the next process finds
/// them exactly as the kill left them: a connection of ours would recover the WAL,
/// and, closing last, checkpoint it into the file and remove it.
fn assert_intact(path: &Path, what: &str) -> Found {
    if !path.exists() {
        return Found::default();
    }
    let dir = tempfile::tempdir().expect("a directory for the copy");
    let copy = dir.path().join("copy.db");
    for suffix in ["", "-wal", "-journal"] {
        let from = PathBuf::from(format!("{}{suffix}", path.display()));
        if from.exists() {
            std::fs::copy(&from, format!("{}{suffix}", copy.display()))
                .unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
        }
    }
    // Read-write, as the next process opens it: the FTS5 check is formally a write.
    let db = Connection::open(&copy).expect("opening the copy of the database");
    assert_eq!(
        strings(&db, "PRAGMA integrity_check"),
        ["ok"],
        "{what}: integrity_check"
    );
    assert_eq!(
        strings(&db, "SELECT \"table\" FROM pragma_foreign_key_check"),
        Vec::<String>::new(),
        "{what}: rows whose foreign key points nowhere"
    );
    // The embedded limiter keeps running totals beside its entries: a charge writes
    // both in one transaction, so they agree whatever moment the kill came.
    let limiter = number(
        &db,
        "SELECT count(*) FROM sqlite_master WHERE name IN ('quota_entry', 'quota_total')",
    );
    if limiter == 2 {
        assert_eq!(
            number(
                &db,
                "SELECT count(*) FROM (
                     SELECT policy, SUM(units) AS units FROM quota_entry GROUP BY policy) e
                 FULL JOIN quota_total t USING (policy)
                 WHERE e.units IS NOT t.total"
            ),
            0,
            "{what}: the limiter's running totals disagree with its entries"
        );
    }
    let version = number(&db, "PRAGMA user_version");
    let latest = i64::from(trendsync::schema::latest_version());
    let tables = number(
        &db,
        "SELECT count(*) FROM sqlite_master WHERE name IN
             ('runs', 'videos', 'trending', 'videos_fts', 'quota_entry', 'quota_journal')",
    );
    // An upgrade is one transaction with its version bump: all of it or none. The
    // limiter's and the journal's tables are steps of the same schema, so a kill
    // before the upgrade committed leaves none of theirs either.
    match version {
        0 => assert_eq!(tables, 0, "{what}: tables without a schema version"),
        v if v == latest => assert_eq!(tables, 6, "{what}: a version without its tables"),
        v => panic!("{what}: schema version {v}, this build knows {latest}"),
    }
    if version == 0 {
        return Found::default();
    }
    // Rank 1: also compare the index with the videos table it indexes.
    db.execute(
        "INSERT INTO videos_fts (videos_fts, rank) VALUES ('integrity-check', 1)",
        [],
    )
    .unwrap_or_else(|e| panic!("{what}: the full-text index disagrees with videos: {e}"));

    // What was stored, current or not: a killed holder's pages of a leased slot are
    // never current (docs/schema.md, `fetch_slots`), so the views leave them out, but
    // they were written as every page is, and are checked here as every page is.
    db.execute_batch(
        "CREATE TEMP VIEW stored_trending (run_id, region, rank, video_id) AS
         SELECT r.run_id, g.code, p.rank, v.id FROM fetches AS f
         JOIN run_nums AS r ON r.num = f.run JOIN regions AS g ON g.num = f.region
         JOIN places AS p ON p.fetch = f.num JOIN videos AS v ON v.num = p.video
         WHERE f.search = 0 AND f.chart = 0;
         CREATE TEMP VIEW stored_counts AS
         SELECT p.video FROM places AS p JOIN fetches AS f ON f.num = p.fetch
         UNION ALL SELECT e.video FROM extra_counts AS e;",
    )
    .expect("the stored pages' views");

    // Pages are atomic: each (run, region) holds ranks 1..n of the chart, n a whole
    // number of pages (7 videos on page 1, 3 on the last).
    let chart = chart();
    let mut ranks: BTreeMap<(String, String), Vec<(i64, String)>> = BTreeMap::new();
    {
        let mut stmt = db
            .prepare(
                "SELECT run_id, region, rank, video_id FROM stored_trending ORDER BY run_id, region, rank",
            )
            .expect("preparing");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .and_then(|rows| rows.collect::<Result<Vec<(String, String, i64, String)>, _>>())
            .expect("reading trending");
        for (run, region, rank, video) in rows {
            ranks.entry((run, region)).or_default().push((rank, video));
        }
    }
    let mut pages = BTreeMap::new();
    for (key, rows) in ranks {
        let expected: Vec<(i64, String)> = chart
            .iter()
            .take(rows.len())
            .enumerate()
            .map(|(i, id)| (i as i64 + 1, id.clone()))
            .collect();
        assert!(
            rows.len() == 7 || rows.len() == 10,
            "{what}: {key:?} holds {} ranks, not whole pages",
            rows.len()
        );
        assert_eq!(rows, expected, "{what}: {key:?} is the chart from rank 1");
        pages.insert(key, rows.len());
    }
    // Each stored chart position came with its counts and its video, in one step.
    let positions = number(&db, "SELECT count(*) FROM stored_trending");
    assert_eq!(
        number(&db, "SELECT count(*) FROM stored_counts"),
        positions,
        "{what}: one stats row per chart position"
    );
    assert_eq!(
        number(&db, "SELECT count(*) FROM videos"),
        number(&db, "SELECT count(DISTINCT video_id) FROM stored_trending"),
        "{what}: videos against the videos on the charts"
    );
    // A region is marked complete only once its pages are in, and its category
    // fetch only with its categories.
    assert_eq!(
        number(
            &db,
            "SELECT count(*) FROM region_state s WHERE last_complete_at IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM stored_trending t WHERE t.region = s.region AND t.rank = 10)"
        ),
        0,
        "{what}: a region marked complete without its whole chart"
    );
    assert_eq!(
        number(
            &db,
            "SELECT count(*) FROM region_state s WHERE categories_fetched_at IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM categories c WHERE c.region = s.region)"
        ),
        0,
        "{what}: a category fetch recorded without the categories"
    );

    let mut runs = BTreeMap::new();
    {
        let mut stmt = db
            .prepare("SELECT run_id, status, ended_at FROM runs")
            .expect("preparing");
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
            .and_then(|rows| rows.collect::<Result<Vec<(String, RunRow)>, _>>())
            .expect("reading runs");
        runs.extend(rows);
    }
    Found { runs, pages }
}

/// `used - requests`: what the budget holds beyond the requests `fakes` received.
fn budget_excess(h: &Harness<'_>, fakes: &[&FakeUpstream], what: &str) -> u64 {
    let requests: u64 = fakes.iter().map(|f| f.received() as u64).sum();
    if h.redis.is_none() && !h.has_database() {
        // Killed before the database was created: the embedded limiter's window
        // would be in it, so nothing was charged, and nothing may have been called.
        assert_eq!(requests, 0, "{what}: calls made with no database to charge");
        return 0;
    }
    let budget = h.budget();
    let used = budget["used"].as_u64().expect("used");
    assert!(
        used >= requests,
        "{what}: the upstream received {requests} requests but only {used} units were charged: {budget}"
    );
    used - requests
}

/// A run against `fake` takes every region and completes; returns its run id.
fn next_run_completes(
    h: &Harness<'_>,
    fake: &FakeUpstream,
    concurrency: usize,
    what: &str,
) -> String {
    let ran = h
        .cmd_to(fake)
        .args(["run", "--json", "--concurrency", &concurrency.to_string()])
        .allow_stderr("was left running by a process that died")
        // Redis: the killed run's leases, taken over once lapsed.
        .allow_stderr("whose lease lapsed with no done mark")
        .run();
    let report = ran.json();
    assert_eq!(report["status"], "complete", "{what}: {report}");
    let regions = regions_of(&report);
    assert_eq!(
        regions.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        CODES.into_iter().collect(),
        "{what}: {report}"
    );
    for (code, r) in &regions {
        // `skipped` here would be a region lock the killed process left held.
        assert_eq!(
            (&r["status"], &r["pages"], &r["videos"]),
            (&Value::from("complete"), &Value::from(2), &Value::from(10)),
            "{what}: {code} in the next run: {report}"
        );
    }
    report["run_id"].as_str().expect("run_id").to_owned()
}

/// Kills a run at each of `points` in turn on one database, checking after each kill
/// what it left and that the next run (against `next`, fast) completes. The cycles are
/// numbered from `first_cycle`: even ones read the killed file before writing it.
fn kill_and_recover(
    h: &Harness<'_>,
    next: &FakeUpstream,
    concurrency: usize,
    points: &[KillAt],
    first_cycle: usize,
) {
    let fakes = [&h.fake, next];
    let mut excess = budget_excess(h, &fakes, "before any kill");
    for (cycle, &at) in (first_cycle..).zip(points) {
        let what = format!("killed at {at:?}, concurrency {concurrency}");
        let before = assert_intact(&h.db_path(), &format!("{what}, before"));
        let killed = run_and_kill(h, concurrency, at);
        let what = format!("{what} after {} requests", killed.requests);
        let found = assert_intact(&h.db_path(), &what);

        // The runs of earlier cycles are as they were; the killed run left at most its
        // own row, which it writes before its first call. A killed run's row keeps
        // status `running`: nothing ends it.
        for (id, row) in &before.runs {
            assert_eq!(found.runs.get(id), Some(row), "{what}: run {id}");
        }
        let new: Vec<(&String, &RunRow)> = found
            .runs
            .iter()
            .filter(|(id, _)| !before.runs.contains_key(*id))
            .collect();
        assert!(new.len() <= 1, "{what}: {new:?}");
        if killed.requests > 0 {
            assert_eq!(new.len(), 1, "{what}: calls made without a run row");
        }
        for (id, (status, ended)) in &new {
            let ok = match (status.as_str(), ended) {
                // Killed before finish_run: nothing will ever end this row.
                ("running", None) => killed.by_kill,
                // Killed (or not) after finish_run.
                ("complete", Some(_)) => true,
                _ => false,
            };
            assert!(ok, "{what}: run {id} is {status}, ended {ended:?}");
        }

        // The next process finds the file as the kill left it. Half the cycles read
        // it first (`budget`, `run --dry-run` and `search`, which open it only to
        // read), the others write it first (the next run).
        let read_first = cycle % 2 == 0;
        let after_kill = read_first.then(|| {
            h.bare().args(["run", "--dry-run", "--json"]).run();
            // Killed before the database was created, it is refused.
            let search = h
                .bare()
                .args(["search", "popsicle", "--json"])
                .allow_stderr("--db trendsync.db: ")
                .status_in(&[0, 78])
                .run();
            if !h.has_database() {
                // Killed before the database was created: nothing to read yet.
                assert_eq!(search.code, 78, "{what}: search: {}", search.stderr);
                assert!(
                    search.stderr.contains("run `trendsync run` first"),
                    "{what}: {}",
                    search.stderr
                );
                return budget_excess(h, &fakes, &what);
            }
            assert_eq!(search.code, 0, "{what}: search: {}", search.stderr);
            // Every stored chart starts with page 1, where the popsicle video is.
            assert_eq!(
                search.json()["results"].as_array().map(Vec::len),
                Some(usize::from(!found.pages.is_empty())),
                "{what}: {}",
                search.stdout
            );
            budget_excess(h, &fakes, &what)
        });
        let run_id = next_run_completes(h, next, concurrency, &what);
        let now = budget_excess(h, &fakes, &what);
        assert!(
            now >= excess && now - excess <= concurrency as u64,
            "{what}: charged but never sent went from {excess} to {now}, more than {concurrency} in flight"
        );
        if let Some(after_kill) = after_kill {
            assert_eq!(
                now, after_kill,
                "{what}: a run that completes charges exactly the calls it sends"
            );
        }
        excess = now;

        let found = assert_intact(&h.db_path(), &format!("{what}, then a complete run"));
        assert_eq!(
            found.runs.get(&run_id).map(|r| r.0.as_str()),
            Some("complete"),
            "{what}"
        );
        for code in CODES {
            assert_eq!(
                found.pages.get(&(run_id.clone(), code.to_owned())),
                Some(&10),
                "{what}: {code} of the next run"
            );
        }
    }
}

/// One region at a time: at the first call, between regions, in the middle of a
/// region, and at the last call, on one database.
#[test]
fn kills_at_known_calls_of_a_run_leave_a_consistent_database() {
    let h = world(FakeUpstream::youtube_after(SLOW), None);
    let fast = FakeUpstream::youtube();
    // A fresh database first: killed while the schema is created. Its next run fetches
    // the category names, so every later run makes 8 calls.
    kill_and_recover(
        &h,
        &fast,
        1,
        &[
            KillAt::DbCreated(Duration::ZERO),
            KillAt::Requests(1),
            KillAt::Requests(3),
            KillAt::Requests(6),
            KillAt::Requests(7),
        ],
        0,
    );
}

/// Regions in parallel: a kill finds several of them between charge and send.
#[test]
fn kills_with_four_regions_in_parallel_leave_a_consistent_database() {
    let h = world(FakeUpstream::youtube_after(SLOW), None);
    let fast = FakeUpstream::youtube();
    kill_and_recover(
        &h,
        &fast,
        4,
        // The first on a fresh database (a run of 12 calls), then runs of 8.
        &[
            KillAt::Requests(1),
            KillAt::Requests(5),
            KillAt::Requests(7),
        ],
        0,
    );
}

/// The same with the budget in Redis: the charges outlive the process that made them.
#[test]
fn kills_with_the_budget_in_redis_leave_it_consistent() {
    let server = RedisServer::start();
    let h = world(FakeUpstream::youtube_after(SLOW), Some(&server));
    let fast = FakeUpstream::youtube();
    // A fresh database's 12 calls, then the 8 of a run with fresh category names.
    kill_and_recover(
        &h,
        &fast,
        4,
        &[KillAt::Requests(10), KillAt::Requests(6)],
        0,
    );
}

/// How long a run on a fresh database takes to create the file, and to send its
/// first request: the span that kills "right after start" must cover.
fn startup_times() -> (Duration, Duration) {
    let h = world(FakeUpstream::youtube_after(SLOW), None);
    let mut child = h.cmd().arg("run").spawn();
    let started = Instant::now();
    let mut created = None;
    let first = loop {
        if created.is_none() && h.db_path().exists() {
            created = Some(started.elapsed());
        }
        if h.fake.received() > 0 {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no request within 30 s"
        );
        std::thread::sleep(Duration::from_micros(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    (created.unwrap_or(first), first)
}

/// Right after start, each time on a fresh database: before the file exists, while
/// the schema is created and the limiter's tables added, and up to the first call.
#[test]
fn kills_while_creating_the_database_leave_it_usable() {
    let (created, first) = startup_times();
    let mut points: Vec<KillAt> = (1..=3).map(|k| KillAt::After(created * k / 4)).collect();
    points.extend([0, 1, 2, 3, 5, 8].map(|ms| KillAt::DbCreated(Duration::from_millis(ms))));
    let span = first.saturating_sub(created);
    points.extend((1..=4).map(|k| KillAt::DbCreated(span * k / 4)));
    for (cycle, at) in points.into_iter().enumerate() {
        let h = world(FakeUpstream::youtube(), None);
        let next = FakeUpstream::youtube();
        kill_and_recover(&h, &next, 4, &[at], cycle);
    }
}

/// Against a fast upstream, kills spread over a whole run: storing a page, marking a
/// region, finishing the run. Timed as fractions of a run measured first.
#[test]
fn kills_spread_over_a_fast_run_leave_a_consistent_database() {
    let h = world(FakeUpstream::youtube(), None);
    let next = FakeUpstream::youtube();
    // The first run creates the database and fetches the category names; the second,
    // timed, is like every run after it.
    next_run_completes(&h, &h.fake, 2, "the first run");
    let full = (0..3)
        .map(|_| {
            let started = Instant::now();
            next_run_completes(&h, &h.fake, 2, "a timed run");
            started.elapsed()
        })
        .min()
        .expect("three timed runs");
    let points: Vec<KillAt> = (1..=12).map(|k| KillAt::After(full * k / 12)).collect();
    kill_and_recover(&h, &next, 2, &points, 0);
}

/// What a storm of `budget charge` processes did: process `i` charged 2^i units, so
/// a set of processes is a bit mask of units.
struct Storm {
    /// Exited 0, granted.
    granted: u64,
    /// Ended by SIGKILL.
    killed: u64,
    /// From the first start to the last exit.
    took: Duration,
}

/// Starts [`STORM`] `budget charge` processes at once in `s`, and kills process `i`
/// `at` after the storm began, for each `(i, at)` of `kills`.
fn storm(s: &Scratch, costs: &Path, kills: &[(u32, Duration)]) -> Storm {
    let started = Instant::now();
    let mut children: Vec<_> = (0..STORM)
        .map(|i| {
            s.cmd()
                .costs(costs)
                .args(["-q", "budget", "charge", "videos.list", "--json"])
                .args(["--count", &(1u64 << i).to_string()])
                .start()
        })
        .collect();
    for &(victim, at) in kills {
        if let Some(left) = at.checked_sub(started.elapsed()) {
            std::thread::sleep(left);
        }
        let _ = children[victim as usize].child.kill();
    }
    let mut done = Storm {
        granted: 0,
        killed: 0,
        took: Duration::ZERO,
    };
    for (i, child) in (0..STORM).zip(children.drain(..)) {
        let out = child.killed();
        if out.status.signal() == Some(SIGKILL) {
            done.killed |= 1 << i;
            continue;
        }
        assert_eq!(
            out.status.code(),
            Some(0),
            "process {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
        assert_eq!(json["granted"], true, "{json}");
        assert_eq!(json["units"].as_u64(), Some(1 << i), "{json}");
        done.granted |= 1 << i;
    }
    done.took = started.elapsed();
    done
}

/// Processes in a storm.
const STORM: u32 = 16;

/// Many `budget charge` processes at once on the embedded limiter, a few of them
/// killed: each charge is recorded whole or not at all.
///
/// Process `i` charges 2^i units, so what `used` gained names exactly the charges
/// recorded. Every process that exited 0 was recorded; a killed one may or may not
/// have been (killed before or after its transaction committed); nothing else is.
#[test]
fn kills_during_a_storm_of_budget_charges_lose_or_invent_no_units() {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1 << 20).ceiling(1 << 20).to_toml(),
    );
    let budget_used = || {
        let ran = s.cmd().costs(&costs).args(["budget", "--json"]).run();
        ran.json()["used"].as_u64().expect("used")
    };
    // A storm without kills, elsewhere, says how long one lasts on this machine; the
    // kills are spread over that time.
    let calibration = Scratch::new();
    let took = storm(
        &calibration,
        &calibration.write(
            "c.toml",
            &Costs::youtube().quota(1 << 20).ceiling(1 << 20).to_toml(),
        ),
        &[],
    )
    .took;
    let kills: Vec<(u32, Duration)> = [1, 4, 6, 9, 12, 15]
        .iter()
        .enumerate()
        .map(|(k, &i)| (i, took * (k as u32 + 1) / 10))
        .collect();
    let mut used_before = 0u64;
    // On a fresh database, then on the one the first round left.
    for round in 0..2 {
        let done = storm(&s, &costs, &kills);
        let used = budget_used();
        // `granted` and `killed` are disjoint sets of bits, so this has exactly one
        // reading: every granted charge, plus some of the killed ones.
        let recorded = used - used_before;
        let extra = recorded.checked_sub(done.granted);
        assert!(
            extra.is_some_and(|x| x & !done.killed == 0),
            "round {round}: recorded {recorded:#b}, granted {:#b}, killed {:#b}",
            done.granted,
            done.killed
        );
        assert_intact(
            &s.file("trendsync.db"),
            &format!("the storm of round {round}"),
        );
        used_before = used;
    }
    // And the limiter goes on charging.
    s.cmd()
        .costs(&costs)
        .args(["budget", "charge", "videos.list", "--json"])
        .run();
    assert_eq!(budget_used(), used_before + 1);
}
