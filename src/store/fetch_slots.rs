//! The fleet's slots as the store keeps them (docs/schema.md, `fetch_slots`): each
//! fetch made under a lease notes the slot, the lease's fencing token and whether it
//! is the slot's current data (and makes the analysts' views show current fetches
//! only). A leased fetch is `fetching` from its first page until
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

-- The analysts' views show current fetches only, as export does; their `_utc` twins
-- and `video_history_marked` read them by name and follow.
DROP VIEW trending;
CREATE VIEW trending (run_id, region, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.search = 0 AND f.chart = 0
  AND NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current');

DROP VIEW chart_places;
CREATE VIEW chart_places (run_id, region, chart, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, CAST(nullif(f.chart, 0) AS TEXT), p.rank, v.id,
       f.fetched_at + p.offset_s
FROM fetches AS f
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE f.search = 0
  AND NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current');

DROP VIEW search_results;
CREATE VIEW search_results (run_id, region, search_name, rank, video_id, fetched_at) AS
SELECT r.run_id, g.code, s.name, p.rank, v.id, f.fetched_at + p.offset_s
FROM fetches AS f
JOIN searches AS s ON s.num = f.search
JOIN run_nums AS r ON r.num = f.run
JOIN regions AS g ON g.num = f.region
JOIN places AS p ON p.fetch = f.num
JOIN videos AS v ON v.num = p.video
WHERE NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current');

DROP VIEW video_stats;
CREATE VIEW video_stats (video_id, fetched_at, run_id, view_count, like_count, comment_count) AS
SELECT v.id, f.fetched_at + p.offset_s, r.run_id, p.views, p.likes, p.comments
FROM places AS p
JOIN fetches AS f ON f.num = p.fetch
JOIN run_nums AS r ON r.num = f.run
JOIN videos AS v ON v.num = p.video
WHERE NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current')
UNION ALL
SELECT v.id, e.fetched_at, r.run_id, e.views, e.likes, e.comments
FROM extra_counts AS e
JOIN run_nums AS r ON r.num = e.run
JOIN videos AS v ON v.num = e.video;

DROP VIEW video_history;
CREATE VIEW video_history (video_id, at, source, region, chart, search_name, rank,
                           view_count, like_count, comment_count, run_id) AS
SELECT v.id, f.fetched_at + p.offset_s,
       CASE WHEN f.search = 0 THEN 'chart' ELSE 'search' END,
       g.code, CAST(nullif(f.chart, 0) AS TEXT),
       (SELECT s.name FROM searches AS s WHERE s.num = f.search),
       p.rank, p.views, p.likes, p.comments, r.run_id
FROM places AS p
JOIN fetches AS f ON f.num = p.fetch
JOIN videos AS v ON v.num = p.video
JOIN regions AS g ON g.num = f.region
JOIN run_nums AS r ON r.num = f.run
WHERE NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current')
UNION ALL
SELECT v.id, e.fetched_at, 'chart', NULL, NULL, NULL, NULL, e.views, e.likes, e.comments,
       r.run_id
FROM extra_counts AS e
JOIN videos AS v ON v.num = e.video
JOIN run_nums AS r ON r.num = e.run
UNION ALL
SELECT v.id, c.at, 'follow', NULL, NULL, NULL, NULL, c.views, c.likes, c.comments, NULL
FROM follow_counts AS c
JOIN videos AS v ON v.num = c.video;

DROP VIEW chart_history;
CREATE VIEW chart_history (video_id, region, chart, first_seen, last_seen, days_on_chart,
                           fetches, best_rank, best_rank_at, entries, view_count,
                           like_count, comment_count) AS
WITH chart_fetches AS (
    SELECT f.num, f.region, f.chart, f.fetched_at,
           row_number() OVER (PARTITION BY f.region, f.chart ORDER BY f.fetched_at, f.num) AS ord
    FROM fetches AS f
    WHERE f.search = 0
      AND NOT EXISTS (SELECT 1 FROM fetch_slots AS fs WHERE fs.fetch = f.num AND fs.state <> 'current')
), seen AS (
    SELECT p.video, c.region, c.chart, c.fetched_at AS started,
           c.fetched_at + p.offset_s AS at, p.rank, p.views, p.likes, p.comments,
           CASE WHEN lag(c.ord) OVER w = c.ord - 1 THEN 0 ELSE 1 END AS starts,
           row_number() OVER (PARTITION BY p.video, c.region, c.chart
                              ORDER BY p.rank, c.fetched_at + p.offset_s) AS by_rank,
           row_number() OVER (PARTITION BY p.video, c.region, c.chart
                              ORDER BY c.ord DESC) AS by_recency
    FROM places AS p
    JOIN chart_fetches AS c ON c.num = p.fetch
    WINDOW w AS (PARTITION BY p.video, c.region, c.chart ORDER BY c.ord)
)
SELECT v.id, g.code, CAST(nullif(s.chart, 0) AS TEXT), min(s.at), max(s.at),
       count(DISTINCT s.started / 86400), count(*), min(s.rank),
       max(CASE WHEN s.by_rank = 1 THEN s.at END), sum(s.starts),
       max(CASE WHEN s.by_recency = 1 THEN s.views END),
       max(CASE WHEN s.by_recency = 1 THEN s.likes END),
       max(CASE WHEN s.by_recency = 1 THEN s.comments END)
FROM seen AS s
JOIN videos AS v ON v.num = s.video
JOIN regions AS g ON g.num = s.region
GROUP BY s.video, s.region, s.chart;
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
    #[cfg(test)]
    pub(crate) fn mark_slot(
        &self,
        run_id: &str,
        region: &str,
        state: SlotState,
    ) -> Result<(), StoreError> {
        self.mark_slots(run_id, &[(region.to_owned(), state)])
    }

    /// Marks every leased fetch of `run_id`'s regions with the state given for each,
    /// in one transaction: a run finishes all its slots with one commit, not one a
    /// region (BENCHMARKS.md, "The cost of the slot leases").
    pub(crate) fn mark_slots(
        &self,
        run_id: &str,
        marks: &[(String, SlotState)],
    ) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            {
                let mut update = tx.prepare_cached(
                    "UPDATE fetch_slots SET state = ?3
                     WHERE fetch IN (SELECT f.num FROM fetches AS f
                                     JOIN run_nums AS r ON r.num = f.run
                                     JOIN regions AS g ON g.num = f.region
                                     WHERE r.run_id = ?1 AND g.code = ?2)",
                )?;
                for (region, state) in marks {
                    update.execute(params![run_id, region, state.as_str()])?;
                }
            }
            tx.commit()
        })()
        .map_err(self.err(format!(
            "marking the leased fetches of {} in run {run_id}",
            marks
                .iter()
                .map(|(region, state)| format!("{region} {}", state.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }

    /// Notes `token`, given to a claim of this host's, as the largest when it is:
    /// before any page is stored under it, so that a claim that stored nothing still
    /// raises the next claim's floor.
    pub(crate) fn note_slot_token(&self, token: i64) -> Result<(), StoreError> {
        (|| {
            let tx = self.write_tx()?;
            tx.execute(
                "INSERT INTO slot_tokens (id, largest) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET largest = max(largest, excluded.largest)",
                [token],
            )?;
            tx.commit()
        })()
        .map_err(self.err(format!("noting fencing token {token}")))
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
