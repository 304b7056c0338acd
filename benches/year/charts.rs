//! Issue 18's year, in today's layout: 8 regions, each with its overall chart and two
//! category charts (Sports and News, each its own videos), one run per region per hour,
//! and follow-ups of every video on a chart in the last 7 days, none more often than
//! every 6 hours (`[follow] days = 7, every = "6h"`).
//!
//! ```text
//! cargo bench --bench year -- charts-generate DIR [--days N]   # DIR/charts.db
//! cargo bench --bench year -- charts-check DIR                 # bulk SQL = the Store API?
//! cargo bench --bench year -- charts-measure DIR [--binary PATH] [--no-export]
//! cargo bench --bench year -- charts-search DIR [--binary PATH]  # search's times
//! ```
//!
//! One simulation drives two writers: bulk SQL (prepared statements in day-long
//! transactions, what `charts-generate` uses) and the product's own `Store` API, call
//! for call as a run makes them (`charts-check` writes two days both ways and
//! compares every table but the full-text index's, row by row). `charts-measure` reads
//! the bytes per snapshot row off `dbstat`, times the release binary's `video ID` and
//! takes the peak RSS of `export --per day` over one month and over the whole file.
//!
//! Here: `charts-generate`. Under `charts/`: the simulation (`simulation.rs`), its two
//! writers (`bulk.rs`, `via_store.rs`), and the other two modes (`check.rs`,
//! `measure.rs`).

#[path = "charts/bulk.rs"]
mod bulk;
#[path = "charts/check.rs"]
mod check;
#[path = "charts/measure.rs"]
mod measure;
#[path = "charts/search.rs"]
mod search;
#[path = "charts/simulation.rs"]
mod simulation;
#[path = "charts/via_store.rs"]
mod via_store;

use std::path::Path;
use std::time::Instant;
use trendsync::clock::{Clock, SystemClock};

use bulk::Bulk;
use simulation::simulate;

use super::{Res, file_size, mb};

pub(crate) use check::check;
pub(crate) use measure::measure;
pub(crate) use search::search;

fn fresh(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
}

/// The year ends at the last full hour, so `export --since 30d` is its last month.
fn year_end() -> i64 {
    SystemClock.now().to_secs().as_i64() / 3600 * 3600
}

pub(crate) fn generate(dir: &Path, days: u32) -> Res<()> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("charts.db");
    fresh(&path);
    let started = Instant::now();
    let mut bulk = Bulk::new(&path)?;
    let (places, follows, videos) = simulate(&mut bulk, days, year_end())?;
    drop(bulk);
    eprintln!(
        "wrote {} ({days} days: {places} places, {follows} follow-up rows, {videos} videos, {}) in {:.0?}",
        path.display(),
        mb(file_size(&path)),
        started.elapsed()
    );
    Ok(())
}
