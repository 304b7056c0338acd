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
//! - a naive log that adds one sorted-set member per unit (`NAIVE_SCRIPT` in
//!   `limiter/bench.rs`);
//! - the memory a saturated day takes in each layout.
//!
//! The phases are interleaved in small blocks rather than run one after another, so a
//! burst of load from elsewhere on the machine lands on all of them alike and the
//! ratios between them stay meaningful. Each phase has keys of its own, so it sees
//! only its own entries, as if it ran alone.
//!
//! A second part (`forms`, in `limiter/forms.rs`) measures charge throughput across
//! the deployment forms: standalone, mutual TLS and a 3-primary Cluster, with 1 and 20
//! clients, and each primary's share of the work.
//!
//! A third, `embedded` (in `limiter/embedded.rs`), times the embedded limiter's charge
//! in the steady state hourly runs leave. A fourth, `retention` (in `limiter/retention.rs`, run only when named), charges a year
//! of hourly runs through both limiters and measures what keeping every entry for the
//! longest window leaves behind.
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
#[path = "limiter/bench.rs"]
mod bench;
#[path = "limiter/embedded.rs"]
mod embedded;
#[path = "limiter/forms.rs"]
mod forms;
#[path = "limiter/report.rs"]
mod report;
#[path = "limiter/retention.rs"]
mod retention;
#[path = "limiter/script.rs"]
mod script;
#[path = "limiter/stats.rs"]
mod stats;
#[path = "limiter/workload.rs"]
mod workload;

use anyhow::Result;

fn main() -> Result<()> {
    // `cargo bench --bench limiter -- forms` runs only the deployment forms; `-- script`
    // only the script's cost; no argument both.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wants = |part: &str| only.is_empty() || only.iter().any(|a| a == part);
    if wants("script") {
        script::run()?;
    }
    if wants("forms") {
        forms::run()?;
    }
    if wants("embedded") {
        embedded::run()?;
    }
    // A year of hourly runs: a minute or two, so only when asked for.
    if only.iter().any(|a| a == "retention") {
        retention::run()?;
    }
    Ok(())
}
