//! The fleet's missed slots this host has seen (docs/metrics.md,
//! `trendsync_slots_missed_total`): each run on Redis reads the records of the slots
//! that ended lately and notes here the misses it had not noted yet, so that the count
//! per region only grows, as a Prometheus counter must, whichever host's run writes
//! the metrics next. Never pruned: one small row per missed slot.

use std::collections::BTreeMap;

use rusqlite::params;

use super::{Store, StoreError};
use crate::clock::Secs;
use crate::sqlite::Migration;

/// The step that creates the table; not among the store's reader steps, since a
/// reader that finds it missing reads no misses ([`Store::slot_misses_by_region`]).
pub(crate) const STEP: Migration = Migration {
    description: "the fleet's missed slots this host has seen, for the metrics",
    sql: SQL,
    data: None,
};

const SQL: &str = "
CREATE TABLE slot_misses (
    region     TEXT    NOT NULL,
    slot_start INTEGER NOT NULL,   -- the slot's id: its start, Unix seconds
    reason     TEXT    NOT NULL,   -- no_host_ran, budget, upstream, limiter_down, ...
    seen_at    INTEGER NOT NULL,   -- when this host first saw it missed, Unix seconds
    PRIMARY KEY (region, slot_start)
) WITHOUT ROWID;
";

/// One missed slot, as a fleet's records say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMiss {
    pub region: String,
    pub slot_start: i64,
    pub reason: String,
}

impl Store {
    /// Notes `misses` seen at `seen_at`; those noted before keep their first note.
    /// Returns how many were new.
    pub fn note_slot_misses(
        &self,
        misses: &[SlotMiss],
        seen_at: Secs,
    ) -> Result<usize, StoreError> {
        (|| {
            let tx = self.write_tx()?;
            let mut added = 0;
            {
                let mut insert = tx.prepare_cached(
                    "INSERT INTO slot_misses (region, slot_start, reason, seen_at)
                     VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING",
                )?;
                for m in misses {
                    added += insert.execute(params![
                        m.region,
                        m.slot_start,
                        m.reason,
                        seen_at.as_i64()
                    ])?;
                }
            }
            tx.commit()?;
            Ok(added)
        })()
        .map_err(self.err("noting the fleet's missed slots"))
    }

    /// The missed slots noted per region; none when the file predates the table.
    pub(crate) fn slot_misses_by_region(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        (|| {
            let present: bool = self.conn.query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'slot_misses')",
                [],
                |row| row.get(0),
            )?;
            if !present {
                return Ok(BTreeMap::new());
            }
            let mut stmt = self
                .conn
                .prepare_cached("SELECT region, count(*) FROM slot_misses GROUP BY region")?;
            let rows = stmt.query_map([], |row| {
                let n: i64 = row.get(1)?;
                Ok((row.get(0)?, u64::try_from(n).unwrap_or(0)))
            })?;
            rows.collect::<rusqlite::Result<BTreeMap<String, u64>>>()
        })()
        .map_err(self.err("reading the fleet's missed slots"))
    }
}

#[cfg(test)]
mod tests;
