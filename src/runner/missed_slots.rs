//! At a run's end on Redis, the fleet's misses of late: the records of each region's
//! last [`LOOK_BACK`] ended slots are read, and the misses among them noted in the
//! database, where `trendsync_slots_missed_total` counts them (docs/metrics.md). Every
//! host of a fleet notes every miss, whoever's slot it was, so the alert fires from
//! whichever host's metrics are scraped.

use std::sync::Arc;

use tokio::task::JoinSet;

use crate::config::{Region, slot_schedule};
use crate::error::chain;
use crate::quota::slots::{MissedReason, SlotRecord, SlotRef, Verdict, slot_starts};
use crate::store::SlotMiss;

use super::run::Run;

/// How many ended slots of each region a run reads back: two days of hourly slots, so
/// that a fleet that was down a whole day is seen by its next run.
pub(super) const LOOK_BACK: i64 = 48;

/// Reads the last [`LOOK_BACK`] ended slots of each of `regions` and notes their
/// misses. The regions are read all at once, each in its own request, so that a run
/// waits for about one round trip here, not one a region (BENCHMARKS.md, "The cost
/// of the slot leases"). Nothing on the embedded limiter or one found down; a failure
/// is logged and changes nothing of the run.
pub(super) async fn note_missed_slots(run: &Arc<Run>, regions: &[Region]) {
    let Some(redis) = run.meter.redis() else {
        return;
    };
    let now_us = match redis.redis_now_us().await {
        Ok(now) => now,
        Err(e) => {
            tracing::warn!("reading the fleet's slot records: {}", chain(&e));
            return;
        }
    };
    let now_s = now_us.div_euclid(1_000_000);
    let mut reads = JoinSet::new();
    for (i, region) in regions.iter().enumerate() {
        let (secs, offset_s) = slot_schedule(region);
        let current = SlotRef::at(&region.code, now_s, secs, offset_s);
        let from_s = current.start_s - LOOK_BACK * i64::from(secs);
        let run = Arc::clone(run);
        reads.spawn(async move {
            let redis = run.meter.redis()?;
            let read = redis
                .slot_records(&current.region, secs, offset_s, from_s, current.start_s)
                .await;
            Some((i, current, from_s, read))
        });
    }
    let mut read = Vec::new();
    while let Some(joined) = reads.join_next().await {
        match joined {
            Ok(Some(one)) => read.push(one),
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("reading the fleet's slot records: {e}");
                return;
            }
        }
    }
    // In the regions' order, as before the reads went at once.
    read.sort_by_key(|(i, ..)| *i);
    let mut misses = Vec::new();
    for (_, current, from_s, records) in read {
        match records {
            Ok(records) => misses.extend(missed_among(&current, from_s, &records, now_us)),
            Err(e) => {
                tracing::warn!(
                    "reading the slot records of region {}: {}",
                    current.region,
                    chain(&e)
                );
                return;
            }
        }
    }
    match run.record.slot_misses(misses).await {
        Ok(0) => {}
        Ok(n) => tracing::info!("{n} missed slots of the fleet seen for the first time"),
        Err(e) => tracing::warn!(run_id = %run.settings.run_id, "{}", chain(&e)),
    }
}

/// The misses among the slots of `current`'s region that started from `from_s` and
/// ended before `current`, whose records are `records`, at `now_us` on Redis's clock:
/// a missed record, or no record at all after the region's first record in that span
/// (before it, the fleet was not running yet: a new fleet is not a day of misses). A
/// lease still live past its slot's end is not (yet) a miss.
pub(super) fn missed_among(
    current: &SlotRef,
    from_s: i64,
    records: &[SlotRecord],
    now_us: i64,
) -> Vec<SlotMiss> {
    let Some(first) = records.iter().map(|r| r.start_s).min() else {
        return Vec::new();
    };
    let region = &current.region;
    let miss = |start_s: i64, reason: &str| SlotMiss {
        region: region.clone(),
        slot_start: start_s,
        reason: reason.to_owned(),
    };
    slot_starts(
        region,
        current.secs,
        offset_of(current),
        from_s,
        current.start_s,
    )
    .into_iter()
    .filter_map(|start| match records.iter().find(|r| r.start_s == start) {
        Some(r) => match r.state.verdict(now_us) {
            Verdict::Missed { reason, .. } => Some(miss(start, reason)),
            Verdict::Fetched(_) | Verdict::Live => None,
        },
        None if start > first => Some(miss(start, MissedReason::NoHostRan.as_str())),
        None => None,
    })
    .collect()
}

/// The offset `slot` starts at within its period.
fn offset_of(slot: &SlotRef) -> u32 {
    u32::try_from(slot.start_s.rem_euclid(i64::from(slot.secs.max(1)))).unwrap_or(0)
}

#[cfg(test)]
mod tests;
