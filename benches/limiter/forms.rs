//! Charge throughput in each deployment form (the README, "Redis deployments"): a standalone
//! server, the same over mutual TLS, and a Cluster of three primaries with a replica
//! each, with 1 and 20 concurrent clients, on one budget and on 64 budgets spread over
//! the shards; and each primary's share of the work, from `INFO commandstats`.

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
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))?.get_connection()?;
    redis::cmd("FLUSHALL")
        .arg("SYNC")
        .query::<()>(&mut conn)
        .with_context(|| format!("emptying the node on {port}"))
}

/// `clients` clients, each with its own connection as a process would have, charge
/// one unit at a time for [`PHASE`]; client `i` charges budget `i % budgets`.
async fn phase(form: &Form, budgets: usize, clients: usize, round: usize) -> Result<f64> {
    let budget = crate::workload::bench_budget();
    let mut limiters = Vec::with_capacity(clients);
    for i in 0..clients {
        let key = format!("bench-{}", i % budgets);
        let limiter = RedisLimiter::connect_with_tls(
            &form.url,
            &form.tls,
            &key,
            trendsync::clock::system(),
            None,
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
        let mut budget = budget.clone();
        budget.key = key;
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let charge = budget
                    .charge(
                        &format!("r{round}-c{i}-{n}"),
                        crate::workload::SMALL,
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

fn find<'a>(results: &'a [Measured], form: &str, budgets: usize, clients: usize) -> &'a Measured {
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
            crate::report::verdict(ratio >= target)
        );
    }
    let spread = find(results, "Cluster", 64, 20);
    let every = spread.shares.values().all(|n| *n > 0);
    let _ = writeln!(
        out,
        "[{}] 64 budgets land on every primary: {} of {} primaries did work",
        crate::report::verdict(every),
        spread.shares.values().filter(|n| **n > 0).count(),
        spread.shares.len()
    );
    out
}
