//! One end-to-end scenario's world: a scratch directory, the fake upstream, the
//! limiter (the embedded one, or a real Redis), and optional config files; plus the
//! check every scenario ends with, that the budget holds exactly what the upstream
//! was sent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::check::{Checks, TextCheck};
use super::upstream::{API_KEY, Call, FakeUpstream};
use super::{Expected, Ran, RedisServer, Scratch, Trendsync};

/// The shipped regions, in their configured order.
pub const REGIONS: [&str; 8] = ["US", "GB", "DE", "FR", "IN", "BR", "AU", "CA"];

/// Three regions of two pages (all the fixtures' chart holds, so a run fetches every
/// planned page) and no searches: three calls per region, none of them search.list.
pub const THREE_REGIONS: &str = r#"
[defaults]
pages = 2

[[region]]
code = "US"
offset = 0

[[region]]
code = "GB"
offset = 7

[[region]]
code = "DE"
offset = 14
"#;

/// The `[costs]` table of a quota-costs.toml.
fn costs_of(text: &str) -> BTreeMap<String, u64> {
    let doc: toml::Table = text.parse().expect("the costs file is TOML");
    doc["costs"]
        .as_table()
        .expect("a [costs] table")
        .iter()
        .map(|(m, u)| {
            let units = u.as_integer().expect("units are integers");
            (
                m.clone(),
                u64::try_from(units).expect("units are not negative"),
            )
        })
        .collect()
}

pub struct Harness<'r> {
    pub scratch: Scratch,
    pub fake: FakeUpstream,
    pub redis: Option<&'r RedisServer>,
    costs: Option<PathBuf>,
    regions: Option<PathBuf>,
    /// Units per method in the costs file in use.
    unit_costs: BTreeMap<String, u64>,
    /// Warning and error lines every command of this scenario may print.
    allowed: std::cell::RefCell<Vec<Expected>>,
    /// What the next command built must show when it ends.
    next: std::cell::RefCell<Checks>,
}

impl<'r> Harness<'r> {
    /// The fixtures' YouTube, the built-in configuration, and `redis` or the embedded
    /// limiter.
    pub fn new(redis: Option<&'r RedisServer>) -> Harness<'r> {
        Harness::with(FakeUpstream::youtube(), redis)
    }

    pub fn with(fake: FakeUpstream, redis: Option<&'r RedisServer>) -> Harness<'r> {
        Harness {
            scratch: Scratch::new(),
            fake,
            redis,
            costs: None,
            regions: None,
            unit_costs: costs_of(
                &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/quota-costs.toml"))
                    .expect("reading the shipped quota-costs.toml"),
            ),
            allowed: std::cell::RefCell::new(Vec::new()),
            next: std::cell::RefCell::new(Checks::default()),
        }
    }

    /// The next command this scenario builds ([`Harness::run`], [`Harness::bare`]
    /// and the like) must exit with `code` (0 unless said), as
    /// [`Trendsync::status`].
    pub fn status(&self, code: i32) -> &Self {
        self.next.borrow_mut().status(&[code]);
        self
    }

    /// The next command this scenario builds must print `check` on stdout, as
    /// [`Trendsync::stdout`].
    pub fn stdout<M>(&self, check: impl TextCheck<M>) -> &Self {
        self.next.borrow_mut().stdout(check.boxed());
        self
    }

    /// The next command this scenario builds must print `check` on stderr, as
    /// [`Trendsync::stderr`].
    pub fn stderr<M>(&self, check: impl TextCheck<M>) -> &Self {
        self.next.borrow_mut().stderr(check.boxed());
        self
    }

    /// The next command this scenario builds must print a warning or error line
    /// containing `needle`.
    pub fn expect_stderr(&self, needle: &str) -> &Self {
        self.next.borrow_mut().line(Expected::line(needle));
        self
    }

    /// The next command this scenario builds must end with its summary line at WARN
    /// or ERROR saying it ended `status`.
    pub fn expect_ended(&self, status: &str) -> &Self {
        self.expect_stderr(&super::ended(status))
    }

    /// Every command of this scenario from now on may print warning or error lines
    /// containing `needle` (a scenario that takes the limiter or the upstream away).
    pub fn allow_stderr(&self, needle: &str) -> &Self {
        self.allowed.borrow_mut().push(Expected::maybe(needle));
        self
    }

    /// Uses `text` (a [`Costs`](super::Costs), or a file's text) as quota-costs.toml
    /// from now on (it may be rewritten mid-scenario).
    pub fn costs(&mut self, text: impl Into<String>) -> &mut Self {
        let text = text.into();
        if self.costs.is_some() {
            // A scenario that rewrites the file changes the budget under the window
            // already charged: the limiter counts it again and says so, once.
            self.allow_stderr("were counted again at this host's costs");
        }
        self.costs = Some(self.scratch.write("costs.toml", &text));
        self.unit_costs = costs_of(&text);
        self
    }

    /// Uses `text` as regions.toml from now on.
    pub fn regions(&mut self, text: &str) -> &mut Self {
        self.regions = Some(self.scratch.write("my-regions.toml", text));
        self
    }

    /// The binary with this world's limiter and configuration, but no upstream and
    /// no key.
    pub fn bare(&self) -> Trendsync {
        let mut cmd = self
            .scratch
            .cmd()
            .expecting(&self.allowed.borrow())
            .checking(self.next.take());
        if let Some(server) = self.redis {
            cmd = cmd.redis(server);
        }
        if let Some(costs) = &self.costs {
            cmd = cmd.arg("--costs").arg(costs);
        }
        if let Some(regions) = &self.regions {
            cmd = cmd.arg("--regions").arg(regions);
        }
        cmd
    }

    /// The binary pointed at the fake upstream, with the key in YOUTUBE_API_KEY.
    pub fn cmd(&self) -> Trendsync {
        self.cmd_to(&self.fake)
    }

    /// The binary pointed at `fake` instead of this world's upstream, with the key.
    pub fn cmd_to(&self, fake: &FakeUpstream) -> Trendsync {
        self.bare()
            .args(["--api-base", &fake.uri()])
            .env("YOUTUBE_API_KEY", API_KEY)
    }

    /// Runs `args`, checks what the scenario said it must show ([`Harness::status`],
    /// [`Harness::stdout`], …), and returns what the fake received meanwhile.
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> (Ran, Vec<Call>) {
        let before = self.fake.calls().len();
        let ran = self.cmd().args(args).run();
        let calls = self.fake.calls().split_off(before);
        (ran, calls)
    }

    /// Runs trendsync with `args` (which ask for `--json`), checks that it ended with
    /// exit `code` and the run status `status`, and returns the report, the calls and
    /// the process's outcome (for what it logged).
    #[track_caller]
    pub fn run_to(&self, args: &[&str], code: i32, status: &str) -> (Value, Vec<Call>, Ran) {
        let (ran, calls) = self.status(code).run(args);
        let report = ran.json();
        assert_eq!(report["status"], status, "{report}");
        (report, calls, ran)
    }

    /// `budget --json`.
    #[track_caller]
    pub fn budget(&self) -> Value {
        self.bare().args(["budget", "--json"]).run().json()
    }

    /// The binary, its clock (and its Redis's, if any) at `at` (RFC 3339, UTC).
    ///
    /// The binary's wall clock stands still at `at` (`-f` with an absolute time; its
    /// monotonic clock runs, so timeouts work): a clock that started at `at` and ran
    /// would stamp a slow process's charges later than the next one's "now", which
    /// then rightly warns that the clock went back (seen on a loaded machine).
    pub fn at_time(&self, at: &str) -> Trendsync {
        if let Some(server) = self.redis {
            server.clock().set_now_us(super::redis_server::unix_us(at));
        }
        let stamp = at.trim_end_matches('Z').replace('T', " ");
        self.bare()
            .env("TZ", "UTC")
            .faketime(&["--exclude-monotonic", "-f", &stamp])
    }

    pub fn db_path(&self) -> PathBuf {
        self.scratch.file("trendsync.db")
    }

    /// Whether the database has been created: the file holds trendsync's tables (a
    /// process killed while creating it may leave no file, an empty one, or one with
    /// no tables). Until then the read-only commands refuse it (78).
    pub fn has_database(&self) -> bool {
        let Ok(conn) =
            Connection::open_with_flags(self.db_path(), OpenFlags::SQLITE_OPEN_READ_ONLY)
        else {
            return false;
        };
        conn.query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'runs'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .is_ok_and(|n| n == 1)
    }

    /// The database, read-only.
    pub fn db(&self) -> Connection {
        Connection::open_with_flags(self.db_path(), OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("opening the database read-only")
    }
}

impl Harness<'_> {
    /// Units by method of `calls`, at the costs in use.
    pub fn units_sent(&self, calls: &[Call]) -> BTreeMap<String, u64> {
        let mut sent = BTreeMap::new();
        for call in calls {
            let cost = self
                .unit_costs
                .get(&call.method)
                .unwrap_or_else(|| panic!("no cost for {}", call.method));
            *sent.entry(call.method.clone()).or_insert(0) += cost;
        }
        sent
    }
}

/// The budget holds exactly the units of the calls the upstream received, method by
/// method: nothing was called uncharged, and nothing was charged that was not called.
#[track_caller]
pub fn assert_budget_matches_requests(h: &Harness<'_>) {
    let sent = h.units_sent(&h.fake.calls());
    if h.redis.is_none() && !h.has_database() {
        // The embedded limiter keeps its window in the database: none, none charged,
        // and `budget` refuses to show an empty window for a missing file.
        assert_eq!(
            sent,
            BTreeMap::new(),
            "calls made with no database to charge"
        );
        h.bare()
            .args(["budget", "--json"])
            .status(78)
            .expect_stderr("no such file")
            .run();
        return;
    }
    let budget = h.budget();
    let charged: BTreeMap<String, u64> = budget["by_method"]
        .as_object()
        .expect("by_method is an object")
        .iter()
        .map(|(m, u)| (m.clone(), u.as_u64().expect("units are integers")))
        .filter(|(_, u)| *u > 0)
        .collect();
    assert_eq!(
        charged, sent,
        "units charged by method (left) against the calls the upstream received (right)"
    );
    assert_eq!(
        budget["used"].as_u64(),
        Some(sent.values().sum::<u64>()),
        "budget used against the upstream's calls: {budget}"
    );
}

/// A run's own JSON agrees with the calls the upstream received during it: `calls`
/// counts them, `units_charged` and the regions' `units` add up their costs.
pub fn assert_report_matches_calls(h: &Harness<'_>, report: &Value, calls: &[Call]) {
    let units: u64 = h.units_sent(calls).values().sum();
    assert_eq!(
        report["calls"].as_u64(),
        Some(calls.len() as u64),
        "{report}"
    );
    assert_eq!(report["units_charged"].as_u64(), Some(units), "{report}");
    let by_region: u64 = report["regions"]
        .as_array()
        .expect("regions is an array")
        .iter()
        .map(|r| r["units"].as_u64().expect("region units"))
        .sum();
    assert_eq!(by_region, units, "regions' units add up: {report}");
    for region in report["regions"].as_array().into_iter().flatten() {
        let code = region["code"].as_str().expect("region code");
        let mine: Vec<Call> = calls
            .iter()
            .filter(|c| c.region.as_deref() == Some(code))
            .cloned()
            .collect();
        assert_eq!(
            region["units"].as_u64(),
            Some(h.units_sent(&mine).values().sum()),
            "units of {code}: {report}"
        );
    }
}

/// The short form of each call, for comparing sequences.
pub fn shorts(calls: &[Call]) -> Vec<String> {
    calls.iter().map(Call::short).collect()
}

/// The region entries of a run's JSON by code.
pub fn regions_of(report: &Value) -> BTreeMap<String, Value> {
    report["regions"]
        .as_array()
        .expect("regions is an array")
        .iter()
        .map(|r| (r["code"].as_str().expect("code").to_owned(), r.clone()))
        .collect()
}

/// Asserts that a region of the run's JSON has an `error` that mentions `needle`.
pub fn assert_error_mentions(region: &Value, needle: &str) {
    let error = region["error"].as_str().unwrap_or_default();
    assert!(
        error.contains(needle),
        "{needle:?} not in the error of {region}"
    );
}

/// Runs a scenario `fn name(redis: Option<&RedisServer>)` as two tests, `name::embedded`
/// and `name::redis`, one per limiter. `name @ "RFC 3339"` starts that Redis with its
/// clock at that time (the scenario moves the binary's clock with it).
#[macro_export]
macro_rules! on_both_limiters {
    (@server) => {
        $crate::common::RedisServer::start()
    };
    (@server $at:literal) => {
        $crate::common::RedisServer::start_at($crate::common::redis_server::unix_us($at))
    };
    ($($scenario:ident $(@ $at:literal)?),* $(,)?) => {$(
        mod $scenario {
            #[test]
            fn embedded() {
                super::$scenario(None);
            }

            #[test]
            fn redis() {
                let server = $crate::on_both_limiters!(@server $($at)?);
                super::$scenario(Some(&server));
            }
        }
    )*};
}

/// `budget --json`'s `blocked_until`, which must be set and be a midnight in
/// America/Los_Angeles, where the upstream's day resets; `what` names the case.
#[track_caller]
pub fn blocked_until_a_pacific_midnight(budget: &Value, what: &str) -> jiff::Timestamp {
    let until: jiff::Timestamp = budget["blocked_until"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: blocked_until is set: {budget}"))
        .parse()
        .expect("blocked_until is RFC 3339");
    let pacific = until.in_tz("America/Los_Angeles").expect("time zone");
    assert_eq!(
        (pacific.hour(), pacific.minute(), pacific.second()),
        (0, 0, 0),
        "{what}: a Pacific midnight: {pacific}"
    );
    until
}
