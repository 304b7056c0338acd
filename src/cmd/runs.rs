//! `trendsync runs`: the run history, one line per run and region, newest first.
//! Answers "which region failed last night, and why". Reads the database only.

use std::collections::HashMap;
use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;

use super::Ctx;
use super::shared::{ago, at, charts_text, one_line};
use crate::cli::RunsArgs;
use crate::output::json::print_json;
use crate::output::table::{self, Column, Table};
use crate::region_status::{Recorded, RegionStatus, in_progress};
use crate::runner::lock;
use crate::sqlite::Db;
use crate::store::{HistoryFilter, HistoryRow, Store};

#[derive(Debug, Serialize)]
struct RunJson<'a> {
    run_id: &'a str,
    kind: &'static str,
    region: Option<&'a str>,
    started_at: String,
    ended_at: Option<String>,
    status: &'a Recorded<RegionStatus>,
    pages: u64,
    videos: u64,
    units: u64,
    reason: Option<&'a str>,
    /// The charts stored of the region: null for the overall chart, else the category id.
    charts: Vec<Option<String>>,
}

#[derive(Debug, Serialize)]
struct RunsJson<'a> {
    runs: Vec<RunJson<'a>>,
}

pub fn run(ctx: &Ctx<'_>, args: &RunsArgs) -> Result<()> {
    let clock = ctx.clock.as_ref();
    let db = ctx.require_db()?;
    super::check_read_regions(ctx, &args.regions, || super::stored_regions(Some(db)))?;
    let now = clock.now().to_secs();
    let filter = HistoryFilter {
        since: args
            .since
            .map(|w| w.since(now))
            .transpose()
            .map_err(|e| crate::error::UsageError(format!("--since: {e}")))?
            .map(|s| s.as_i64()),
        regions: args
            .regions
            .iter()
            .map(|r| r.to_ascii_uppercase())
            .collect(),
        status: args.status,
        limit: args.limit,
    };
    let rows = read(db, &filter)?;
    if args.json {
        let runs = rows
            .iter()
            .map(|r| RunJson {
                run_id: &r.run_id,
                kind: r.kind.as_str(),
                region: r.region.as_deref(),
                started_at: at(r.started_at),
                ended_at: r.ended_at.map(at),
                status: &r.status,
                pages: r.pages,
                videos: r.videos,
                units: r.units,
                reason: r.reason.as_deref(),
                charts: r
                    .charts
                    .iter()
                    .map(|c| (*c != 0).then(|| c.to_string()))
                    .collect(),
            })
            .collect();
        return print_json(&RunsJson { runs });
    }
    let width = table::width();
    let mut out = table::Wrapped::new(std::io::stdout().lock(), width);
    if rows.is_empty() {
        writeln!(out, "no runs recorded match")?;
        return Ok(());
    }
    // Dropped from the right of this list first when the terminal is narrow.
    let mut lines = Table::new(vec![
        Column::text("started (UTC)", 4),
        Column::text("age", 2),
        Column::text("kind", 5),
        Column::text("region", 0),
        Column::text("status", 0),
        Column::number("pages", 7),
        Column::number("videos", 6),
        Column::number("units", 3),
        Column::text("run", 9),
        Column::text("charts", 8),
        Column::reason("reason"),
    ]);
    for r in &rows {
        lines.row(vec![
            at(r.started_at),
            ago(now.as_i64(), r.started_at),
            r.kind.as_str().to_owned(),
            r.region.as_deref().unwrap_or("-").to_owned(),
            r.status.to_string(),
            r.pages.to_string(),
            r.videos.to_string(),
            r.units.to_string(),
            r.run_id.clone(),
            charts_text(&r.charts),
            r.reason.as_deref().map_or(String::new(), one_line),
        ]);
    }
    lines.write(&mut out, width)?;
    Ok(())
}

/// The history lines; a `running` run whose process is gone is shown `abandoned`
/// (the next run records it so).
fn read(db: &Db, filter: &HistoryFilter) -> Result<Vec<HistoryRow>> {
    let Some(store) =
        Store::read_on(db).with_context(|| format!("opening {}", db.path().display()))?
    else {
        return Ok(Vec::new());
    };
    let db = db.path();
    let context = || format!("reading the run history from {}", db.display());
    let mut rows = store.history(filter).with_context(context)?;
    if filter.status == Some(RegionStatus::Abandoned) {
        for going in [RegionStatus::Queued, RegionStatus::Running] {
            let going = HistoryFilter {
                status: Some(going),
                ..filter.clone()
            };
            rows.extend(store.history(&going).with_context(context)?);
        }
    }
    let mut alive: HashMap<String, bool> = HashMap::new();
    for r in &mut rows {
        if in_progress(&r.status) {
            let live = *alive.entry(r.run_id.clone()).or_insert_with(|| {
                // Never call a run abandoned without knowing.
                lock::run_is_alive(db, &r.run_id).unwrap_or(true)
            });
            if !live {
                r.status = RegionStatus::Abandoned.into();
            }
        }
    }
    if let Some(want) = filter.status {
        rows.retain(|r| r.status == want);
    }
    rows.sort_by(|a, b| {
        (b.started_at, &b.run_id)
            .cmp(&(a.started_at, &a.run_id))
            .then_with(|| a.region.cmp(&b.region))
    });
    rows.truncate(usize::try_from(filter.limit).unwrap_or(usize::MAX));
    Ok(rows)
}
