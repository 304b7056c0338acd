//! What one charge of the shared budget costs, against a real local `redis-server`.
//!
//! Every number comes from one client calling sequentially, so a sample is one full
//! round trip: the client building the command, loopback, the server running it, and
//! the reply decoded. Compared are:
//!
//! - the product's charge (`Limiter::charge`, the Lua log in `src/quota/redis/charge.lua`)
//!   at cost 1 and cost 100, into a window that starts empty and into one that
//!   already holds a saturated day (~600 entries);
//! - the floor: a plain `INCR` (a naive fixed-window counter), and an `EVALSHA` of a
//!   script that does nothing, which prices running Lua at all;
//! - a naive log that adds one sorted-set member per unit (`NAIVE_SCRIPT` below);
//! - the memory a saturated day takes in each layout.
//!
//! The phases are interleaved in small blocks rather than run one after another, so a
//! burst of load from elsewhere on the machine lands on all of them alike and the
//! ratios between them stay meaningful. Each phase has keys of its own, so it sees
//! only its own entries, as if it ran alone.
//!
//! A second part (`forms` below) measures charge throughput across the deployment
//! forms: standalone, mutual TLS and a 3-primary Cluster, with 1 and 20 clients, and
//! each primary's share of the work.
//!
//! Run with `cargo bench --bench limiter` (`-- script` or `-- forms` for one part); it
//! needs `redis-server` on the PATH (or `TRENDSYNC_TEST_REDIS_SERVER`), and for the
//! forms `redis-cli` and `openssl`. It measures and reports; missing a target is not an
//! error, but anything that fails along the way is.

// The test harness is shared verbatim; its formatting and unused helpers are the
// tests' business.
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "../tests/common/redis_server.rs"]
mod redis_server;
#[rustfmt::skip]
#[allow(dead_code)]
#[path = "../tests/common/redis_deployments.rs"]
mod redis_deployments;

#[path = "limiter/admin.rs"]
mod admin;
#[path = "limiter/forms.rs"]
mod forms;
#[path = "limiter/stats.rs"]
mod stats;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use trendsync::quota::{Allowance, Budget, Charge, Limiter, RedisLimiter};

use admin::Admin;
use redis_server::RedisServer;
use stats::{CommandTime, Stats, micros};

/// Measured calls per phase (the saturated-day phases excepted), in `BLOCKS` blocks,
/// after `WARM_UP` calls per phase that are not measured.
const ITERATIONS: usize = 20_000;
const BLOCKS: usize = 100;
const WARM_UP: usize = 2_000;

/// A saturated day as the limiter sees it: 500 one-unit and 90 hundred-unit calls.
const DAY_SMALL_CALLS: usize = 500;
const DAY_LARGE_CALLS: usize = 90;
/// Each block of a saturated-day phase starts from a fresh day and measures this many
/// charges on top of it, so every sample sees 590 to 690 entries.
const DAY_SAMPLES: usize = 100;

/// The budget the memory of a saturated day is measured in.
const BUDGET_KEY: &str = "bench";
const SMALL: &str = "videos.list";
const LARGE: &str = "search.list";
/// Large enough that no phase is ever denied: the bench measures granted charges.
const HUGE: u64 = 1_000_000_000_000;
const DAY: Duration = Duration::from_secs(24 * 60 * 60);

/// The targets the verdicts check.
const MIN_LARGE_TO_SMALL_THROUGHPUT: f64 = 0.9;
const MAX_CHARGE_TO_INCR_LATENCY: f64 = 1.3;
const MIN_NAIVE_TO_PRODUCT_MEMORY: f64 = 10.0;

/// The alternative the product's design rejects: a sliding-window log that stores one
/// sorted-set member per unit, so a 100-unit call adds 100 members. It is written as
/// well as that layout allows (one ZADD per call, the same microsecond Redis clock).
const NAIVE_SCRIPT: &str = r"
-- KEYS[1] the log; ARGV: id, units, window (us), max
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id, units = ARGV[1], tonumber(ARGV[2])
local window, max = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now - window))
local count = redis.call('ZCARD', KEYS[1])
if count + units > max then
  return {0, count}
end
local at = string.format('%.0f', now)
local args = {}
for i = 1, units do
  args[2 * i - 1] = at
  args[2 * i] = id .. ':' .. i
end
redis.call('ZADD', KEYS[1], unpack(args))
redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
return {1, count + units}
";

/// The budget every product phase charges: no narrower limits, so a charge touches
/// the budget's own window only (one sorted set and its total). Which Redis keys it
/// lands in is the limiter's choice (`RedisLimiter::connect`'s budget key).
fn bench_budget() -> Budget {
    Budget {
        key: BUDGET_KEY.to_owned(),
        quota: HUGE,
        ceiling: HUGE,
        window: DAY.into(),
        costs: BTreeMap::from([(SMALL.to_owned(), 1), (LARGE.to_owned(), 100)]),
        when_limiter_down: BTreeMap::new(),
        limits: Vec::new(),
        buckets: Vec::new(),
    }
}

/// The method of the `i`th call of a saturated day: 90 hundred-unit calls spread
/// evenly among 500 one-unit calls.
fn day_method(i: usize) -> &'static str {
    let total = DAY_SMALL_CALLS + DAY_LARGE_CALLS;
    let large_before = |n: usize| n * DAY_LARGE_CALLS / total;
    if large_before(i + 1) > large_before(i) {
        LARGE
    } else {
        SMALL
    }
}

/// The client the product's limiter uses, configured the same way (timeouts and all),
/// for the floor and the naive script.
async fn connection_manager(url: &str) -> Result<ConnectionManager> {
    let client = redis::Client::open(url).context("reading the bench Redis URL")?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(1_000)))
        .set_response_timeout(Some(Duration::from_millis(2_000)))
        .set_number_of_retries(1);
    ConnectionManager::new_with_config(client, config)
        .await
        .context("connecting to the bench redis-server")
}

/// Times `n` sequential calls, one sample per call. `call(i)` is made before the
/// clock starts, so only awaiting the future it returns is timed.
async fn time_calls<F, Fut>(n: usize, mut call: F) -> Result<Vec<Duration>>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let pending = call(i);
        let start = Instant::now();
        pending.await?;
        samples.push(start.elapsed());
    }
    Ok(samples)
}

/// What a phase calls.
enum Work {
    Incr {
        key: String,
    },
    Noop,
    /// The product's charge of `method`, through a limiter of its own budget key.
    Charge {
        limiter: Limiter,
        method: &'static str,
    },
    /// The same, on top of a saturated day: each block empties the budget's keys,
    /// charges a day, and measures `DAY_SAMPLES` charges.
    DayThenCharge {
        limiter: Limiter,
        budget_key: String,
        method: &'static str,
    },
    Naive {
        key: String,
        units: u64,
    },
}

impl Work {
    /// The command `INFO commandstats` counts this work's calls under.
    fn command(&self) -> &'static str {
        match self {
            Work::Incr { .. } => "incr",
            _ => "evalsha",
        }
    }
}

struct Phase {
    name: &'static str,
    work: Work,
    samples: Vec<Duration>,
    server: CommandTime,
}

/// The runtime and connections every phase shares.
struct Bench {
    rt: tokio::runtime::Runtime,
    url: String,
    admin: Admin,
    budget: Budget,
    conn: ConnectionManager,
    naive: Script,
    noop: Script,
}

impl Bench {
    fn start(server: &RedisServer) -> Result<Bench> {
        // The CLI runs on `#[tokio::main]`: the multi-threaded runtime, one worker per
        // core, with the caller blocked on the main thread. The bench does the same.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the tokio runtime")?;
        let url = server.url();
        let conn = rt.block_on(connection_manager(&url))?;
        Ok(Bench {
            rt,
            url,
            admin: Admin {
                conn: server.connection(),
            },
            budget: bench_budget(),
            conn,
            naive: Script::new(NAIVE_SCRIPT),
            noop: Script::new("return 1"),
        })
    }

    /// The product's limiter for the budget named `budget_key`, as the CLI builds it.
    fn limiter(&self, budget_key: &str) -> Result<Limiter> {
        let limiter = self
            .rt
            .block_on(RedisLimiter::connect(&self.url, budget_key))
            .with_context(|| format!("connecting the product's limiter for {budget_key}"))?;
        Ok(Limiter::Redis(limiter))
    }

    /// Charges `n` calls of `method` through `limiter`, ids `<tag>-<i>`; each must be
    /// granted.
    fn charge_calls(
        &self,
        limiter: &Limiter,
        tag: &str,
        method: &str,
        n: usize,
    ) -> Result<Vec<Duration>> {
        let charges = (0..n)
            .map(|i| {
                self.budget
                    .charge(&format!("{tag}-{i}"), method, 1, Allowance::Ceiling)
                    .context("building a charge")
            })
            .collect::<Result<Vec<Charge>>>()?;
        self.rt.block_on(time_calls(n, |i| {
            let charge = &charges[i];
            async move {
                let decision = limiter
                    .charge(charge)
                    .await
                    .with_context(|| format!("charging {}", charge.id))?;
                ensure!(
                    decision.granted && !decision.duplicate,
                    "the bench budget did not simply grant {}: {decision:?}",
                    charge.id
                );
                Ok(())
            }
        }))
    }

    /// Charges one saturated day through `limiter`: 500 one-unit and 90 hundred-unit
    /// calls, interleaved.
    fn fill_day(&self, limiter: &Limiter, tag: &str) -> Result<()> {
        for i in 0..DAY_SMALL_CALLS + DAY_LARGE_CALLS {
            self.charge_calls(limiter, &format!("{tag}-{i}"), day_method(i), 1)?;
        }
        Ok(())
    }

    /// `n` calls of the naive one-member-per-unit log, `units` each.
    fn naive_calls(&self, key: &str, tag: &str, units: u64, n: usize) -> Result<Vec<Duration>> {
        let window_us = DAY.as_micros().to_string();
        self.rt.block_on(time_calls(n, |i| {
            let mut inv = self.naive.prepare_invoke();
            inv.key(key)
                .arg(format!("{tag}-{i}"))
                .arg(units)
                .arg(&window_us)
                .arg(HUGE);
            let mut conn = self.conn.clone();
            async move {
                let (granted, _count): (i64, i64) = inv
                    .invoke_async(&mut conn)
                    .await
                    .context("running the naive script")?;
                ensure!(granted == 1, "the naive script denied a bench call");
                Ok(())
            }
        }))
    }

    fn incr_calls(&self, key: &str, n: usize) -> Result<Vec<Duration>> {
        self.rt.block_on(time_calls(n, |_| {
            let mut conn = self.conn.clone();
            async move {
                redis::cmd("INCR")
                    .arg(key)
                    .query_async::<i64>(&mut conn)
                    .await
                    .context("INCR")?;
                Ok(())
            }
        }))
    }

    fn noop_calls(&self, n: usize) -> Result<Vec<Duration>> {
        self.rt.block_on(time_calls(n, |_| {
            let inv = self.noop.prepare_invoke();
            let mut conn = self.conn.clone();
            async move {
                inv.invoke_async::<i64>(&mut conn)
                    .await
                    .context("running the empty script")?;
                Ok(())
            }
        }))
    }

    /// One block of `work`: `n` calls (a saturated-day block always measures
    /// `DAY_SAMPLES`), with the server's time spent on the measured calls.
    fn block(&mut self, work: &Work, tag: &str, n: usize) -> Result<(Vec<Duration>, CommandTime)> {
        if let Work::DayThenCharge {
            limiter,
            budget_key,
            ..
        } = work
        {
            self.admin.delete(&format!("trendsync:{{{budget_key}}}*"))?;
            self.fill_day(limiter, &format!("{tag}-day"))?;
        }
        let before = self.admin.command_time(work.command())?;
        let samples = match work {
            Work::Incr { key } => self.incr_calls(key, n)?,
            Work::Noop => self.noop_calls(n)?,
            Work::Charge { limiter, method } => self.charge_calls(limiter, tag, method, n)?,
            Work::DayThenCharge {
                limiter, method, ..
            } => self.charge_calls(limiter, tag, method, DAY_SAMPLES)?,
            Work::Naive { key, units } => self.naive_calls(key, tag, *units, n)?,
        };
        let server = self.admin.command_time(work.command())? - before;
        Ok((samples, server))
    }

    /// The memory of a saturated day in the product's layout (every key of the
    /// budget) and in the naive one, on an otherwise empty server.
    fn memory(&mut self) -> Result<Memory> {
        self.admin.flush()?;
        let limiter = self.limiter(BUDGET_KEY)?;
        self.fill_day(&limiter, "mem")?;
        let keys = self.admin.scan(&format!("trendsync:{{{BUDGET_KEY}}}*"))?;
        ensure!(!keys.is_empty(), "the saturated day left no budget keys");
        let product = self.admin.memory_of(&keys)?;
        ensure!(
            product > 0,
            "MEMORY USAGE reported nothing for the budget's keys"
        );
        let mut product_keys = Vec::new();
        for key in &keys {
            product_keys.push(self.admin.describe(key)?);
        }

        let naive_key = format!("naive:{{{BUDGET_KEY}}}");
        for i in 0..DAY_SMALL_CALLS + DAY_LARGE_CALLS {
            let units = self.budget.cost(day_method(i))?;
            self.naive_calls(&naive_key, &format!("mem{i}"), units, 1)?;
        }
        let naive = self.admin.memory_of(std::slice::from_ref(&naive_key))?;
        let naive_key = self.admin.describe(&naive_key)?;
        Ok(Memory {
            product,
            product_keys,
            naive,
            naive_key,
        })
    }
}

struct Memory {
    product: u64,
    product_keys: Vec<String>,
    naive: u64,
    naive_key: String,
}

impl Memory {
    fn ratio(&self) -> f64 {
        self.naive as f64 / self.product as f64
    }
}

const INCR: &str = "INCR (fixed-window floor)";
const NOOP: &str = "EVALSHA `return 1`";
const CHARGE_1: &str = "charge, cost 1";
const CHARGE_100: &str = "charge, cost 100";
const DAY_1: &str = "charge, cost 1, on a full day";
const DAY_100: &str = "charge, cost 100, on a full day";
const NAIVE_1: &str = "naive script, cost 1";
const NAIVE_100: &str = "naive script, cost 100";

/// Every phase, each with keys of its own (one budget key per product phase).
fn phases(bench: &Bench) -> Result<Vec<Phase>> {
    let phase = |name, work| Phase {
        name,
        work,
        samples: Vec::new(),
        server: CommandTime::default(),
    };
    let charge = |key: &str, method| -> Result<Work> {
        Ok(Work::Charge {
            limiter: bench.limiter(key)?,
            method,
        })
    };
    let day = |key: &str, method| -> Result<Work> {
        Ok(Work::DayThenCharge {
            limiter: bench.limiter(key)?,
            budget_key: key.to_owned(),
            method,
        })
    };
    let naive = |key: &str, units| Work::Naive {
        key: format!("naive:{{{key}}}"),
        units,
    };
    Ok(vec![
        phase(
            INCR,
            Work::Incr {
                key: "floor:{bench}".to_owned(),
            },
        ),
        phase(NOOP, Work::Noop),
        phase(CHARGE_1, charge("bench-c1", SMALL)?),
        phase(CHARGE_100, charge("bench-c100", LARGE)?),
        phase(DAY_1, day("bench-day1", SMALL)?),
        phase(DAY_100, day("bench-day100", LARGE)?),
        phase(NAIVE_1, naive("bench-n1", 1)),
        phase(NAIVE_100, naive("bench-n100", 100)),
    ])
}

/// A warm-up block of every phase, then `BLOCKS` rounds of one block of each, the
/// starting phase rotating so that none always follows the same neighbour.
fn measure(bench: &mut Bench, phases: &mut [Phase]) -> Result<()> {
    for phase in phases.iter() {
        bench.block(&phase.work, "warm", WARM_UP)?;
    }
    bench.admin.flush()?;
    let per_block = ITERATIONS / BLOCKS;
    for round in 0..BLOCKS {
        for k in 0..phases.len() {
            let phase = &mut phases[(round + k) % phases.len()];
            let (samples, server) = bench.block(&phase.work, &format!("r{round}"), per_block)?;
            phase.samples.extend(samples);
            phase.server += server;
        }
        if (round + 1) % 20 == 0 {
            eprintln!("  {} of {BLOCKS} rounds", round + 1);
        }
    }
    Ok(())
}

/// One row of the table: client-side latencies, and the time the server spent in the
/// command itself (from `INFO commandstats`) over the same calls.
struct Row {
    name: &'static str,
    stats: Stats,
    server_us: f64,
}

struct Report {
    rows: Vec<Row>,
    memory: Memory,
}

impl Report {
    fn row(&self, name: &str) -> &Stats {
        &self
            .rows
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no phase named {name:?} was measured"))
            .stats
    }

    fn table(&self) -> String {
        let incr = self.row(INCR);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| {:<31} | {:>6} | {:>7} | {:>7} | {:>7} | {:>7} | {:>9} | {:>11} |",
            "phase", "calls", "mean µs", "p50 µs", "p99 µs", "calls/s", "server µs", "mean ÷ INCR"
        );
        let _ = writeln!(
            out,
            "|{:-<33}|{:->8}|{:->9}|{:->9}|{:->9}|{:->9}|{:->11}|{:->13}|",
            "", ":", ":", ":", ":", ":", ":", ":"
        );
        for row in &self.rows {
            let s = &row.stats;
            let _ = writeln!(
                out,
                "| {:<31} | {:>6} | {:>7.1} | {:>7.1} | {:>7.1} | {:>7.0} | {:>9.1} | {:>10.2}x |",
                row.name,
                s.samples,
                micros(s.mean),
                micros(s.p50),
                micros(s.p99),
                s.per_second(),
                row.server_us,
                s.mean.as_secs_f64() / incr.mean.as_secs_f64(),
            );
        }
        out
    }

    fn verdicts(&self) -> String {
        let mut out = String::new();
        for (large, small) in [(CHARGE_100, CHARGE_1), (DAY_100, DAY_1)] {
            let ratio = self.row(large).per_second() / self.row(small).per_second();
            let _ = writeln!(
                out,
                "[{}] {large} reaches {ratio:.2}x the throughput of {small} (target >= {MIN_LARGE_TO_SMALL_THROUGHPUT}x)",
                verdict(ratio >= MIN_LARGE_TO_SMALL_THROUGHPUT),
            );
        }
        let incr = self.row(INCR).mean.as_secs_f64();
        for name in [CHARGE_1, CHARGE_100, DAY_1, DAY_100] {
            let ratio = self.row(name).mean.as_secs_f64() / incr;
            let _ = writeln!(
                out,
                "[{}] {name}: mean latency {ratio:.2}x the INCR round trip (target <= {MAX_CHARGE_TO_INCR_LATENCY}x)",
                verdict(ratio <= MAX_CHARGE_TO_INCR_LATENCY),
            );
        }
        let m = &self.memory;
        let _ = writeln!(
            out,
            "[{}] a saturated day takes {} bytes in the product's layout and {} bytes one member per unit: {:.1}x less (target >= {MIN_NAIVE_TO_PRODUCT_MEMORY}x)",
            verdict(m.ratio() >= MIN_NAIVE_TO_PRODUCT_MEMORY),
            m.product,
            m.naive,
            m.ratio(),
        );
        out
    }

    fn memory(&self) -> String {
        let m = &self.memory;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "memory of a saturated day ({DAY_SMALL_CALLS}x1 + {DAY_LARGE_CALLS}x100 = {} units, MEMORY USAGE SAMPLES 0):",
            DAY_SMALL_CALLS + DAY_LARGE_CALLS * 100
        );
        for key in &m.product_keys {
            let _ = writeln!(out, "  product  {key}");
        }
        let _ = writeln!(out, "  product  total {} bytes", m.product);
        let _ = writeln!(out, "  naive    {}", m.naive_key);
        let _ = writeln!(out, "  naive    total {} bytes", m.naive);
        out
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "MET" } else { "MISSED" }
}

fn main() -> Result<()> {
    // `cargo bench --bench limiter -- forms` runs only the deployment forms; `-- script`
    // only the script's cost; no argument both.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |part: &str| only.is_empty() || only.iter().any(|a| a == part);
    if wants("script") {
        script_bench()?;
    }
    if wants("forms") {
        forms::run()?;
    }
    Ok(())
}

/// What one charge costs against one sequential client, and what a day takes.
fn script_bench() -> Result<()> {
    let server = RedisServer::start();
    let mut bench = Bench::start(&server)?;
    let version = bench.admin.server_version()?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    eprintln!("limiter bench: redis-server {version} on loopback, {cores} core(s)");

    let mut phases = phases(&bench)?;
    measure(&mut bench, &mut phases)?;
    let memory = bench.memory()?;
    let report = Report {
        rows: phases
            .into_iter()
            .map(|p| Row {
                name: p.name,
                stats: Stats::from_samples(p.samples),
                server_us: p.server.per_call(),
            })
            .collect(),
        memory,
    };

    println!();
    println!("redis-server {version} on loopback, one sequential client, {cores} core(s).");
    println!(
        "{ITERATIONS} calls per phase after {WARM_UP} warm-up calls, interleaved in {BLOCKS} \
         rounds; \"on a full day\": {BLOCKS} x {DAY_SAMPLES} charges, each block on top of a \
         fresh day of {DAY_SMALL_CALLS}x1 + {DAY_LARGE_CALLS}x100 units (590 to 690 entries)."
    );
    println!("server µs: time Redis spent in the command itself (INFO commandstats).");
    println!();
    print!("{}", report.table());
    println!();
    print!("{}", report.memory());
    println!();
    print!("{}", report.verdicts());
    Ok(())
}
