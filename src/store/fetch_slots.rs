//! The fleet's slots as the store keeps them (docs/schema.md, `fetch_slots`): each
//! fetch made under a lease notes the slot, the lease's fencing token and whether it
//! is the slot's current data. A leased fetch is `fetching` from its first page until
//! its run finishes the slot: `current` when the slot's record took this run's finish,
//! `fenced` when another run held the slot by then. Only `current` ones are data:
//! `export` and the reads built on it skip the others, and a fetch whose process was
//! killed stays `fetching`, never current. A fetch without a row (the embedded
//! limiter, or a file older than this step) is current, as it always was.
//!
//! The largest token ever noted is kept apart from the rows, which `prune` deletes
//! with their fetches: a claim is given a token above it (docs/commands.md, "Several
//! hosts"), whatever the slots' keeper has lost.

use rusqlite::{Transaction, params};

use super::{Store, StoreError};
use crate::sqlite::Migration;

/// The step that adds the slots of leased fetches.
pub(crate) const STEP: Migration = Migration {
    description: "each leased fetch's slot and fencing token, and whether it is current",
    sql: SQL,
    data: None,
};

const SQL: &str = "
CREATE TABLE fetch_slots (
    fetch      INTEGER PRIMARY KEY REFERENCES fetches (num) ON DELETE CASCADE,
    slot_start INTEGER NOT NULL,
    slot_secs  INTEGER NOT NULL CHECK (slot_secs > 0),
    token      INTEGER NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('fetching', 'current', 'fenced'))
) STRICT;
CREATE TABLE slot_tokens (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    largest INTEGER NOT NULL
) STRICT;
";

/// The slot a fetch is made under, and the lease's fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeasedSlot {
    /// The slot's start, in Unix seconds: its id.
    pub slot_start: i64,
    pub slot_secs: u32,
    pub token: i64,
}

/// Where a leased fetch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// Pages are being stored; not data yet (and never, if the process dies).
    Fetching,
    /// The slot's record took this run's finish: the slot's data.
    Current,
    /// Another run held the slot when this one finished: not data.
    Fenced,
}

impl SlotState {
    pub fn as_str(self) -> &'static str {
        match self {
            SlotState::Fetching => "fetching",
            SlotState::Current => "current",
            SlotState::Fenced => "fenced",
        }
    }
}

/// A leased fetch as the tests read it: (region, chart, slot start, token, state).
#[cfg(test)]
pub(crate) type LeasedRow = (String, u32, i64, i64, String);

/// Notes `fetch` as made under `lease`, `fetching`, in the transaction that stores its
/// first page (a later page finds the row there), and raises the largest token kept.
pub(super) fn note_lease(
    tx: &Transaction<'_>,
    fetch: i64,
    lease: &LeasedSlot,
) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO fetch_slots (fetch, slot_start, slot_secs, token, state)
         VALUES (?1, ?2, ?3, ?4, 'fetching')
         ON CONFLICT (fetch) DO NOTHING",
    )?
    .execute(params![
        fetch,
        lease.slot_start,
        lease.slot_secs,
        lease.token
    ])?;
    tx.prepare_cached(
        "INSERT INTO slot_tokens (id, largest) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET largest = max(largest, excluded.largest)",
    )?
    .execute([lease.token])?;
    Ok(())
}

impl Store {
    /// Marks every leased fetch of `run_id`'s `region` `state`.
    pub(crate) fn mark_slot(
        &self,
        run_id: &str,
        region: &str,
        state: SlotState,
    ) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "UPDATE fetch_slots SET state = ?3
                 WHERE fetch IN (SELECT f.num FROM fetches AS f
                                 JOIN run_nums AS r ON r.num = f.run
                                 JOIN regions AS g ON g.num = f.region
                                 WHERE r.run_id = ?1 AND g.code = ?2)",
                params![run_id, region, state.as_str()],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!(
            "marking the fetches of {region} in run {run_id} {}",
            state.as_str()
        )))
    }

    /// The largest fencing token this file has noted, 0 when none.
    pub(crate) fn largest_slot_token(&self) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached("SELECT coalesce(max(largest), 0) FROM slot_tokens")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .map_err(self.err("reading the largest fencing token noted"))
    }

    /// Notes that another host fetched `region`'s slot, finishing at `at_s`: the
    /// region's last complete fetch is then that one, when later than its own
    /// (docs/commands.md, `status`: a region another host fetched counts as fresh).
    pub(crate) fn mark_done_elsewhere(&self, region: &str, at_s: i64) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "INSERT INTO region_state (region, last_complete_at) VALUES (?1, ?2)
                 ON CONFLICT (region) DO UPDATE SET
                     last_complete_at = max(coalesce(last_complete_at, excluded.last_complete_at),
                                            excluded.last_complete_at)",
                params![region, at_s],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("noting that another host fetched {region}'s slot")))
    }

    #[cfg(test)]
    /// Every leased fetch of `run_id`: (region, chart, slot start, token, state).
    pub(crate) fn fetch_slots_of(&self, run_id: &str) -> Result<Vec<LeasedRow>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT g.code, f.chart, s.slot_start, s.token, s.state
                 FROM fetch_slots AS s
                 JOIN fetches AS f ON f.num = s.fetch
                 JOIN run_nums AS r ON r.num = f.run
                 JOIN regions AS g ON g.num = f.region
                 WHERE r.run_id = ?1 ORDER BY g.code, f.search, f.chart",
            )?;
            let rows = stmt.query_map([run_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
        })()
        .map_err(self.err(format!("reading the leased fetches of run {run_id}")))
    }
}

#[cfg(test)]
mod tests;
