//! `status --coverage`: per region, the slots of its schedule that ended in a span, and
//! which of them were fetched (by which hosts) and which were missed, and why
//! (docs/commands.md, "`trendsync status`"). The one part of `status` that reads
//! Redis: the slot records live there, beside the budget (docs/budget.md, "A fleet:
//! slot leases"), whichever host wrote them.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;

use super::super::{Access, Ctx, load_config, open_limiter};
use crate::cli::StatusArgs;
use crate::config::Regions;
use crate::error::{MissingConfig, TryLater, UsageError};
use crate::output::human;
use crate::output::json::{print_json, rfc3339};
use crate::output::table::{self, Column, Table};
use crate::quota::Limiter;
use crate::quota::slots::{MissedReason, RECORD_KEPT, SlotRecord, SlotRef, SlotState, Verdict};

/// Without `--since`, the last week.
const DEFAULT_SPAN: Duration = Duration::from_secs(7 * 86_400);

/// The period and offset of each configured region's slots.
fn schedules(regions: &Regions) -> Vec<Schedule> {
    regions
        .regions
        .iter()
        .map(|r| {
            let (secs, offset_s) = crate::config::slot_schedule(r);
            Schedule {
                region: r.code.clone(),
                secs,
                offset_s,
            }
        })
        .collect()
}

/// One region's schedule of slots.
#[derive(Debug, Clone)]
pub(super) struct Schedule {
    pub(super) region: String,
    pub(super) secs: u32,
    /// Seconds into each period the slots start at (the region's `offset` minute).
    pub(super) offset_s: u32,
}

#[derive(Debug, Serialize, PartialEq)]
pub(super) struct CoverageJson {
    since: String,
    until: String,
    regions: Vec<RegionCoverage>,
    /// Slots missed across every region.
    missed: u64,
}

#[derive(Debug, Serialize, PartialEq)]
pub(super) struct RegionCoverage {
    region: String,
    slot_secs: u32,
    /// Slots that ended within the span.
    expected: u64,
    fetched: u64,
    missed: u64,
    /// A lease is live in the region now: its current slot (or one that ended, whose
    /// fetch runs past the end) is being fetched.
    in_progress: bool,
    /// The slots each host fetched.
    hosts: BTreeMap<String, u64>,
    missed_slots: Vec<MissedSlot>,
}

#[derive(Debug, Serialize, PartialEq)]
pub(super) struct MissedSlot {
    /// The slot's start.
    slot: String,
    reason: String,
    host: Option<String>,
    detail: Option<String>,
}

pub(super) async fn run(ctx: &Ctx<'_>, args: &StatusArgs) -> Result<()> {
    let config = load_config(ctx)?;
    if ctx.global.redis_url.is_none() {
        return Err(MissingConfig(
            "status --coverage reads the slot records of a fleet, which live in Redis beside the budget; \
             with the embedded limiter there are none (one host fetches every slot it runs): \
             give --redis-url (or TRENDSYNC_REDIS_URL) of the fleet's Redis"
                .to_owned(),
        )
        .into());
    }
    let redis = match open_limiter(ctx, &config.budget, Access::Read).await? {
        Limiter::Redis(redis) => redis,
        Limiter::Down { endpoint, reason } => {
            return Err(TryLater(format!(
                "the limiter at {endpoint} is unreachable ({reason}), and the slot records are kept there; \
                 try again when it answers"
            ))
            .into());
        }
        // Never with a Redis URL; said rather than assumed.
        Limiter::Embedded(_) => {
            return Err(MissingConfig("status --coverage needs --redis-url".to_owned()).into());
        }
    };
    let now_us = redis.redis_now_us().await?;
    let now_s = now_us.div_euclid(1_000_000);
    let since_s = match args.since {
        Some(w) => w
            .since(crate::clock::Secs::new(now_s))
            .map_err(|e| UsageError(format!("--since: {e}")))?
            .as_i64(),
        None => now_s - secs_of(DEFAULT_SPAN),
    };
    // Records are kept 36 days after their slot: further back, every slot would read
    // as missed by no host.
    let since_s = since_s.max(now_s - secs_of(RECORD_KEPT));
    let mut read = Vec::new();
    for s in schedules(&config.regions) {
        // Through the current slot, whose lease says whether a fetch is going on.
        let to_s = SlotRef::at(&s.region, now_s, s.secs, s.offset_s).end_s();
        let records = redis
            .slot_records(&s.region, s.secs, s.offset_s, since_s, to_s)
            .await?;
        read.push((s, records));
    }
    let report = coverage(&read, since_s, now_us);
    if args.json {
        print_json(&report)
    } else {
        print_text(&report, redis.endpoint())
    }
}

fn secs_of(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// What `records` (each region's, from `since_s` through its current slot) say at
/// `now_us` (Redis's clock): the slots that ended since `since_s` are expected; each
/// is fetched, missed (with the record's reason, or `no_host_ran` without one), or
/// still held by a live lease past its end.
pub(super) fn coverage(
    read: &[(Schedule, Vec<SlotRecord>)],
    since_s: i64,
    now_us: i64,
) -> CoverageJson {
    let now_s = now_us.div_euclid(1_000_000);
    let regions: Vec<RegionCoverage> = read
        .iter()
        .map(|(s, records)| {
            let current = SlotRef::at(&s.region, now_s, s.secs, s.offset_s);
            let by_start: BTreeMap<i64, &SlotState> =
                records.iter().map(|r| (r.start_s, &r.state)).collect();
            let mut c = RegionCoverage {
                region: s.region.clone(),
                slot_secs: s.secs,
                expected: 0,
                fetched: 0,
                missed: 0,
                in_progress: false,
                hosts: BTreeMap::new(),
                missed_slots: Vec::new(),
            };
            let verdict = |start: i64| by_start.get(&start).map(|state| state.verdict(now_us));
            c.in_progress = verdict(current.start_s) == Some(Verdict::Live);
            for start in crate::quota::slots::slot_starts(
                &s.region,
                s.secs,
                s.offset_s,
                since_s,
                current.start_s,
            ) {
                c.expected += 1;
                let missed = |reason: &str, host: Option<&str>, detail: Option<&str>| MissedSlot {
                    slot: rfc3339(start.saturating_mul(1_000_000)),
                    reason: reason.to_owned(),
                    host: host.map(str::to_owned),
                    detail: detail.map(str::to_owned),
                };
                match verdict(start) {
                    Some(Verdict::Fetched(by)) => {
                        c.fetched += 1;
                        *c.hosts.entry(by.host.clone()).or_default() += 1;
                    }
                    Some(Verdict::Missed {
                        reason,
                        host,
                        detail,
                    }) => c.missed_slots.push(missed(reason, host, detail)),
                    Some(Verdict::Live) => c.in_progress = true,
                    None => {
                        c.missed_slots
                            .push(missed(MissedReason::NoHostRan.as_str(), None, None))
                    }
                }
            }
            c.missed = c.missed_slots.len() as u64;
            c
        })
        .collect();
    CoverageJson {
        since: rfc3339(since_s.saturating_mul(1_000_000)),
        until: rfc3339(now_us),
        missed: regions.iter().map(|r| r.missed).sum(),
        regions,
    }
}

fn print_text(report: &CoverageJson, endpoint: &str) -> Result<()> {
    let width = table::width();
    let mut out = table::Wrapped::new(std::io::stdout().lock(), width);
    writeln!(
        out,
        "coverage from {} to {} (the slot records on {endpoint}, by its clock):",
        report.since, report.until
    )?;
    let mut regions = Table::new(vec![
        Column::text("region", 0),
        Column::text("slot", 3),
        Column::number("expected", 0),
        Column::number("fetched", 0),
        Column::number("missed", 0),
        Column::text("now", 2),
        Column::reason("hosts"),
    ]);
    for r in &report.regions {
        let hosts: Vec<String> = r.hosts.iter().map(|(h, n)| format!("{h} {n}")).collect();
        regions.row(vec![
            r.region.clone(),
            human::duration(Duration::from_secs(u64::from(r.slot_secs))),
            r.expected.to_string(),
            r.fetched.to_string(),
            r.missed.to_string(),
            if r.in_progress { "fetching" } else { "-" }.to_owned(),
            hosts.join(", "),
        ]);
    }
    regions.write(&mut out, width)?;
    for r in &report.regions {
        for m in &r.missed_slots {
            let mut line = format!("missed  {} {}: {}", r.region, m.slot, m.reason);
            if let Some(host) = &m.host {
                line.push_str(&format!(" (host {host})"));
            }
            if let Some(detail) = &m.detail {
                line.push_str(&format!(": {}", super::super::shared::one_line(detail)));
            }
            writeln!(out, "{line}")?;
        }
    }
    let expected: u64 = report.regions.iter().map(|r| r.expected).sum();
    writeln!(
        out,
        "{} of {expected} slots missed across {} regions",
        report.missed,
        report.regions.len()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests;
