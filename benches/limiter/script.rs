//! The limiter bench's script part: every phase, measured in interleaved blocks, then
//! the report of what one charge costs against one sequential client and what a
//! saturated day takes.

use std::time::Duration;

use anyhow::Result;

use crate::bench::{Bench, Work};
use crate::redis_server::RedisServer;
use crate::report::{
    CHARGE_1, CHARGE_100, DAY_1, DAY_100, INCR, NAIVE_1, NAIVE_100, NOOP, Report, Row,
};
use crate::stats::{CommandTime, Stats};
use crate::workload::{
    BLOCKS, DAY_LARGE_CALLS, DAY_SAMPLES, DAY_SMALL_CALLS, ITERATIONS, LARGE, SMALL, WARM_UP,
};

struct Phase {
    name: &'static str,
    work: Work,
    samples: Vec<Duration>,
    server: CommandTime,
}

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

/// What one charge costs against one sequential client, and what a day takes.
pub(crate) fn run() -> Result<()> {
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
