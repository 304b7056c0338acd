//! How the phases' calls are made and timed: the runtime and connections they share
//! (`Bench`), what each phase calls (`Work`), and the memory a saturated day takes in
//! the product's layout and in the naive one.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use trendsync::quota::{Allowance, Budget, Charge, Limiter, RedisLimiter};

use crate::admin::Admin;
use crate::redis_server::RedisServer;
use crate::stats::CommandTime;
use crate::workload::{
    BUDGET_KEY, DAY, DAY_LARGE_CALLS, DAY_SAMPLES, DAY_SMALL_CALLS, HUGE, bench_budget, day_method,
};

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
pub(crate) enum Work {
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

/// The runtime and connections every phase shares.
pub(crate) struct Bench {
    rt: tokio::runtime::Runtime,
    url: String,
    pub(crate) admin: Admin,
    budget: Budget,
    conn: ConnectionManager,
    naive: Script,
    noop: Script,
}

impl Bench {
    pub(crate) fn start(server: &RedisServer) -> Result<Bench> {
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
    pub(crate) fn limiter(&self, budget_key: &str) -> Result<Limiter> {
        let limiter = self
            .rt
            .block_on(RedisLimiter::connect(
                &self.url,
                budget_key,
                trendsync::clock::system(),
                None,
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
    pub(crate) fn block(
        &mut self,
        work: &Work,
        tag: &str,
        n: usize,
    ) -> Result<(Vec<Duration>, CommandTime)> {
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
    pub(crate) fn memory(&mut self) -> Result<Memory> {
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

pub(crate) struct Memory {
    pub(crate) product: u64,
    pub(crate) product_keys: Vec<String>,
    pub(crate) naive: u64,
    pub(crate) naive_key: String,
}

impl Memory {
    pub(crate) fn ratio(&self) -> f64 {
        self.naive as f64 / self.product as f64
    }
}
