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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Connection, Script};
use trendsync::quota::{Allowance, Budget, Charge, Limiter, RedisLimiter};

use redis_server::RedisServer;

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

/// Latency statistics of one phase.
struct Stats {
    samples: usize,
    mean: Duration,
    p50: Duration,
    p99: Duration,
}

impl Stats {
    fn from_samples(mut samples: Vec<Duration>) -> Stats {
        assert!(!samples.is_empty(), "a phase measured no calls");
        samples.sort_unstable();
        let total: Duration = samples.iter().sum();
        let n = samples.len();
        Stats {
            samples: n,
            mean: total / u32::try_from(n).expect("a phase's sample count fits in u32"),
            p50: percentile(&samples, 50.0),
            p99: percentile(&samples, 99.0),
        }
    }

    /// Calls per second of one sequential client.
    fn per_second(&self) -> f64 {
        1.0 / self.mean.as_secs_f64()
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Cumulative calls and microseconds Redis has spent in one command.
#[derive(Clone, Copy, Default)]
struct CommandTime {
    calls: u64,
    usec: u64,
}

impl std::ops::Sub for CommandTime {
    type Output = CommandTime;
    fn sub(self, rhs: CommandTime) -> CommandTime {
        CommandTime {
            calls: self.calls - rhs.calls,
            usec: self.usec - rhs.usec,
        }
    }
}

impl std::ops::AddAssign for CommandTime {
    fn add_assign(&mut self, rhs: CommandTime) {
        self.calls += rhs.calls;
        self.usec += rhs.usec;
    }
}

impl CommandTime {
    fn per_call(self) -> f64 {
        if self.calls == 0 {
            return f64::NAN;
        }
        self.usec as f64 / self.calls as f64
    }
}

/// The server side, outside any measurement: emptying keys and reading what the
/// server knows about itself.
struct Admin {
    conn: Connection,
}

impl Admin {
    fn flush(&mut self) -> Result<()> {
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query::<()>(&mut self.conn)
            .context("emptying the bench redis-server (FLUSHALL)")
    }

    /// Deletes every key matching `pattern`.
    fn delete(&mut self, pattern: &str) -> Result<()> {
        for key in self.scan(pattern)? {
            redis::cmd("DEL")
                .arg(&key)
                .query::<()>(&mut self.conn)
                .with_context(|| format!("deleting {key}"))?;
        }
        Ok(())
    }

    /// `command` is lower case, as `INFO commandstats` names it (`evalsha`, `incr`).
    fn command_time(&mut self, command: &str) -> Result<CommandTime> {
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut self.conn)
            .context("reading INFO commandstats")?;
        let prefix = format!("cmdstat_{command}:");
        let Some(line) = info.lines().find_map(|l| l.strip_prefix(&prefix)) else {
            return Ok(CommandTime::default());
        };
        let field = |name: &str| -> Result<u64> {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .with_context(|| format!("no {name} in INFO commandstats line {line:?}"))?
                .parse()
                .with_context(|| format!("reading {name} in INFO commandstats line {line:?}"))
        };
        Ok(CommandTime {
            calls: field("calls")?,
            usec: field("usec")?,
        })
    }

    fn server_version(&mut self) -> Result<String> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(&mut self.conn)
            .context("reading INFO server")?;
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .map(|v| v.trim().to_owned())
            .context("no redis_version in INFO server")
    }

    /// Every key matching `pattern`, found with SCAN (never KEYS).
    fn scan(&mut self, pattern: &str) -> Result<Vec<String>> {
        let mut keys = Vec::new();
        let mut cursor = 0u64;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(1000)
                .query(&mut self.conn)
                .with_context(|| format!("scanning for keys matching {pattern}"))?;
            keys.extend(batch);
            if next == 0 {
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// What the keys take in memory, every nested value counted (`SAMPLES 0`).
    fn memory_of(&mut self, keys: &[String]) -> Result<u64> {
        let mut bytes = 0;
        for key in keys {
            let usage: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(key)
                .arg("SAMPLES")
                .arg(0)
                .query(&mut self.conn)
                .with_context(|| format!("reading MEMORY USAGE of {key}"))?;
            bytes += usage.with_context(|| format!("{key} vanished before MEMORY USAGE"))?;
        }
        Ok(bytes)
    }

    /// "key: type/encoding, n element(s)", for the report.
    fn describe(&mut self, key: &str) -> Result<String> {
        let encoding: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(&mut self.conn)
            .with_context(|| format!("reading OBJECT ENCODING of {key}"))?;
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query(&mut self.conn)
            .with_context(|| format!("reading TYPE of {key}"))?;
        let len: u64 = if kind == "zset" {
            redis::cmd("ZCARD")
                .arg(key)
                .query(&mut self.conn)
                .with_context(|| format!("reading ZCARD of {key}"))?
        } else {
            1
        };
        Ok(format!("{key}: {kind}/{encoding}, {len} element(s)"))
    }
}

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
            .block_on(RedisLimiter::connect(
                &self.url,
                budget_key,
                trendsync::clock::system(),
            ))
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

/// Charge throughput in each deployment form (DESIGN.md section 8): a standalone
/// server, the same over mutual TLS, and a Cluster of three primaries with a replica
/// each, with 1 and 20 concurrent clients, on one budget and on 64 budgets spread over
/// the shards; and each primary's share of the work, from `INFO commandstats`.
mod forms {
    use std::collections::BTreeMap;
    use std::fmt::Write as _;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    use anyhow::{Context, Result, ensure};
    use trendsync::quota::{Allowance, Limiter, RedisLimiter, TlsFiles};

    use crate::redis_deployments::{Cluster, TlsCerts};
    use crate::redis_server::{Options, RedisServer};

    /// How long each measurement runs, and how many times each is repeated (the best
    /// is kept: load from elsewhere on the machine only ever slows a round down).
    const PHASE: Duration = Duration::from_millis(1_500);
    const ROUNDS: usize = 3;
    const CLIENTS: [usize; 2] = [1, 20];

    /// Targets at 20 clients.
    const MIN_CLUSTER_TO_STANDALONE: f64 = 0.8;
    const MIN_TLS_TO_STANDALONE: f64 = 0.6;

    struct Form {
        name: &'static str,
        url: String,
        tls: TlsFiles,
        /// The nodes whose work is counted: every primary (a standalone server is one).
        primaries: Vec<u16>,
    }

    struct Measured {
        form: &'static str,
        budgets: usize,
        clients: usize,
        per_second: f64,
        /// EVALSHA calls per primary port during the best round.
        shares: BTreeMap<u16, u64>,
    }

    fn evalsha_calls(port: u16) -> Result<u64> {
        let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))?
            .get_connection()
            .with_context(|| format!("connecting to the node on {port}"))?;
        let info: String = redis::cmd("INFO").arg("commandstats").query(&mut conn)?;
        Ok(info
            .lines()
            .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0))
    }

    fn flush(port: u16) -> Result<()> {
        let mut conn =
            redis::Client::open(format!("redis://127.0.0.1:{port}"))?.get_connection()?;
        redis::cmd("FLUSHALL")
            .arg("SYNC")
            .query::<()>(&mut conn)
            .with_context(|| format!("emptying the node on {port}"))
    }

    /// `clients` clients, each with its own connection as a process would have, charge
    /// one unit at a time for [`PHASE`]; client `i` charges budget `i % budgets`.
    async fn phase(form: &Form, budgets: usize, clients: usize, round: usize) -> Result<f64> {
        let budget = crate::bench_budget();
        let mut limiters = Vec::with_capacity(clients);
        for i in 0..clients {
            let key = format!("bench-{}", i % budgets);
            let limiter = RedisLimiter::connect_with_tls(
                &form.url,
                &form.tls,
                &key,
                trendsync::clock::system(),
            )
            .await
            .with_context(|| format!("connecting to {}", form.url))?;
            limiters.push((Limiter::Redis(limiter), key));
        }
        let done = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let deadline = started + PHASE;
        let mut tasks = Vec::new();
        for (i, (limiter, key)) in limiters.into_iter().enumerate() {
            let budget = crate::Budget {
                key,
                ..budget.clone()
            };
            let done = done.clone();
            tasks.push(tokio::spawn(async move {
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let charge = budget
                        .charge(
                            &format!("r{round}-c{i}-{n}"),
                            crate::SMALL,
                            1,
                            Allowance::Ceiling,
                        )
                        .context("building a charge")?;
                    let decision = limiter.charge(&charge).await.context("charging")?;
                    ensure!(decision.granted, "a bench charge was denied: {decision:?}");
                    n += 1;
                }
                done.fetch_add(n, Ordering::Relaxed);
                Ok::<(), anyhow::Error>(())
            }));
        }
        for task in tasks {
            task.await.context("a bench client")??;
        }
        let elapsed = started.elapsed();
        Ok(done.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64())
    }

    fn measure(
        rt: &tokio::runtime::Runtime,
        form: &Form,
        budgets: usize,
        clients: usize,
    ) -> Result<Measured> {
        let mut best: Option<Measured> = None;
        for round in 0..ROUNDS {
            for port in &form.primaries {
                flush(*port)?;
            }
            let before: Vec<u64> = form
                .primaries
                .iter()
                .map(|p| evalsha_calls(*p))
                .collect::<Result<_>>()?;
            let per_second = rt.block_on(phase(form, budgets, clients, round))?;
            let after: Vec<u64> = form
                .primaries
                .iter()
                .map(|p| evalsha_calls(*p))
                .collect::<Result<_>>()?;
            let shares = form
                .primaries
                .iter()
                .zip(before.iter().zip(&after))
                .map(|(port, (b, a))| (*port, a - b))
                .collect();
            if best.as_ref().is_none_or(|m| per_second > m.per_second) {
                best = Some(Measured {
                    form: form.name,
                    budgets,
                    clients,
                    per_second,
                    shares,
                });
            }
        }
        best.context("no round was measured")
    }

    pub fn run() -> Result<()> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the tokio runtime")?;
        let standalone = RedisServer::start();
        let certs = TlsCerts::generate();
        let tls = RedisServer::start_with(Options {
            tls: Some(certs.clone()),
            ..Options::default()
        });
        eprintln!("forms bench: starting a Cluster of 3 primaries and 3 replicas");
        let cluster = Cluster::start();
        let primaries: Vec<u16> = cluster.primaries().iter().map(|n| n.port()).collect();
        ensure!(
            primaries.len() == 3,
            "the Cluster has {} primaries",
            primaries.len()
        );
        let forms = [
            Form {
                name: "standalone",
                url: standalone.url(),
                tls: TlsFiles::default(),
                primaries: vec![standalone.port()],
            },
            Form {
                name: "TLS (mutual)",
                url: tls.url(),
                tls: certs.files(),
                primaries: vec![tls.port()],
            },
            Form {
                name: "Cluster",
                url: cluster.url(),
                tls: TlsFiles::default(),
                primaries,
            },
        ];
        let mut results = Vec::new();
        for clients in CLIENTS {
            for (form, budgets) in [
                (&forms[0], 1),
                (&forms[1], 1),
                (&forms[2], 1),
                (&forms[0], 64),
                (&forms[2], 64),
            ] {
                eprintln!(
                    "  {} with {budgets} budget(s), {clients} client(s)",
                    form.name
                );
                results.push(measure(&rt, form, budgets, clients)?);
            }
        }
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        println!();
        println!(
            "Charge throughput by deployment form: each client its own connection, one unit per \
             charge, best of {ROUNDS} rounds of {PHASE:?}; {cores} core(s) shared by the clients \
             and every redis-server."
        );
        println!();
        print!("{}", table(&results));
        println!();
        print!("{}", verdicts(&results));
        Ok(())
    }

    fn find<'a>(
        results: &'a [Measured],
        form: &str,
        budgets: usize,
        clients: usize,
    ) -> &'a Measured {
        results
            .iter()
            .find(|m| m.form == form && m.budgets == budgets && m.clients == clients)
            .unwrap_or_else(|| {
                panic!("{form} with {budgets} budgets and {clients} clients was measured")
            })
    }

    fn table(results: &[Measured]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| form | budgets | clients | charges/s | ÷ standalone | EVALSHA share per primary |"
        );
        let _ = writeln!(out, "|---|--:|--:|--:|--:|---|");
        for m in results {
            let base = find(results, "standalone", m.budgets, m.clients).per_second;
            let total: u64 = m.shares.values().sum();
            let shares: Vec<String> = m
                .shares
                .values()
                .map(|n| format!("{:.0}%", 100.0 * *n as f64 / total.max(1) as f64))
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {:.2}x | {} |",
                m.form,
                m.budgets,
                m.clients,
                m.per_second,
                m.per_second / base,
                shares.join(" / ")
            );
        }
        out
    }

    fn verdicts(results: &[Measured]) -> String {
        let mut out = String::new();
        let base = find(results, "standalone", 1, 20).per_second;
        for (form, target) in [
            ("Cluster", MIN_CLUSTER_TO_STANDALONE),
            ("TLS (mutual)", MIN_TLS_TO_STANDALONE),
        ] {
            let ratio = find(results, form, 1, 20).per_second / base;
            let _ = writeln!(
                out,
                "[{}] {form}, one budget, 20 clients: {ratio:.2}x standalone (target >= {target}x)",
                crate::verdict(ratio >= target)
            );
        }
        let spread = find(results, "Cluster", 64, 20);
        let every = spread.shares.values().all(|n| *n > 0);
        let _ = writeln!(
            out,
            "[{}] 64 budgets land on every primary: {} of {} primaries did work",
            crate::verdict(every),
            spread.shares.values().filter(|n| **n > 0).count(),
            spread.shares.len()
        );
        out
    }
}
