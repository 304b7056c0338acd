//! The upstream's changes of what its numbers and charts mean, shipped in the file as
//! the table `upstream_changes` (schema step 10), so that a series that crosses one can
//! be split there: every export row carries the id of the latest change in force when
//! it was fetched (`methodology`), `video` marks where a video's counts cross one, and
//! the view `video_history_marked` carries the mark for SQL.
//!
//! The list below is the one source: the step writes it into the table, and export and
//! `video` read it here, so a file at an older version exports the same marks. A change
//! of the upstream's added later is a new row here and a new step that writes the rows
//! the file lacks (`INSERT OR IGNORE`, as [`fill`] does).
//!
//! Each change takes effect at 00:00 UTC of the day the upstream's revision history
//! gives: the history names days, not times.

use rusqlite::{Connection, params};

use crate::sqlite::{Migration, StepError};

/// What a change changed the meaning of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Affects {
    /// The counts (views, likes, comments).
    Counts,
    /// Which videos a chart holds.
    Chart,
    /// How the quota is billed: it changes no number or chart an analyst reads, so it
    /// is never a row's `methodology`.
    Quota,
}

impl Affects {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Affects::Counts => "counts",
            Affects::Chart => "chart",
            Affects::Quota => "quota",
        }
    }
}

/// One change of the upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UpstreamChange {
    /// The day it took effect, `YYYY-MM-DD`: also its id.
    pub(crate) id: &'static str,
    /// Unix seconds: 00:00 UTC of that day.
    pub(crate) effective_at: i64,
    pub(crate) what: &'static str,
    pub(crate) affects: Affects,
}

/// Every change known to this build, oldest first.
pub(crate) const UPSTREAM_CHANGES: &[UpstreamChange] = &[
    UpstreamChange {
        id: "2025-03-31",
        effective_at: 1_743_379_200,
        what: "Shorts views count every start of a play or replay",
        affects: Affects::Counts,
    },
    UpstreamChange {
        id: "2025-07-21",
        effective_at: 1_753_056_000,
        what: "the mostPopular chart becomes the trending music, movies and gaming charts; the Trending page is retired",
        affects: Affects::Chart,
    },
    UpstreamChange {
        id: "2026-06-01",
        effective_at: 1_780_272_000,
        what: "the daily quota is billed in separate buckets: units for most methods, and search.list calls on their own (100 a day)",
        affects: Affects::Quota,
    },
    UpstreamChange {
        id: "2026-06-03",
        effective_at: 1_780_444_800,
        what: "videos.batchGetStats is billed from a bucket of its own",
        affects: Affects::Quota,
    },
    UpstreamChange {
        id: "2026-08-27",
        effective_at: 1_787_788_800,
        what: "public view counts are unified across formats, counted from the start of playback",
        affects: Affects::Counts,
    },
];

/// Whether a change alters what an exported number or chart means (quota changes do
/// not).
fn marks_data(c: &UpstreamChange) -> bool {
    c.affects != Affects::Quota
}

/// The id of the latest change in force at `secs` (unix seconds) among those that
/// change what the numbers or charts mean; `None` before the first.
pub(crate) fn methodology_at(secs: i64) -> Option<&'static str> {
    UPSTREAM_CHANGES
        .iter()
        .rfind(|c| marks_data(c) && c.effective_at <= secs)
        .map(|c| c.id)
}

/// The changes of meaning that took effect after `from` and at or before `to`: those
/// a series sampled at both times crosses.
pub(crate) fn crossed(from: i64, to: i64) -> impl Iterator<Item = &'static UpstreamChange> {
    UPSTREAM_CHANGES
        .iter()
        .filter(move |c| marks_data(c) && from < c.effective_at && c.effective_at <= to)
}

/// Step 10.
pub(crate) const STEP: Migration = Migration {
    description: "the upstream's changes of meaning, and the video history marked with them",
    sql: CREATE,
    data: Some(fill),
};

/// The table, its readable twin, and `video_history` with each sample's
/// `methodology` (a view of its own: `video_history` keeps its columns).
const CREATE: &str = "
CREATE TABLE upstream_changes (
    id           TEXT PRIMARY KEY,
    effective_at INTEGER NOT NULL,
    what         TEXT NOT NULL,
    affects      TEXT NOT NULL CHECK (affects IN ('counts', 'chart', 'quota'))
) STRICT;
CREATE VIEW upstream_changes_utc (id, effective_at, what, affects) AS
SELECT id, strftime('%Y-%m-%dT%H:%M:%SZ', effective_at, 'unixepoch'), what, affects
FROM upstream_changes;
CREATE VIEW video_history_marked (video_id, at, source, region, chart, search_name, rank,
                                  view_count, like_count, comment_count, run_id,
                                  methodology) AS
SELECT h.video_id, h.at, h.source, h.region, h.chart, h.search_name, h.rank,
       h.view_count, h.like_count, h.comment_count, h.run_id,
       (SELECT c.id FROM upstream_changes AS c
        WHERE c.affects <> 'quota' AND c.effective_at <= h.at
        ORDER BY c.effective_at DESC LIMIT 1)
FROM video_history AS h;
CREATE VIEW video_history_marked_utc (video_id, at, source, region, chart, search_name,
                                      rank, view_count, like_count, comment_count,
                                      run_id, methodology) AS
SELECT video_id, strftime('%Y-%m-%dT%H:%M:%SZ', at, 'unixepoch'), source, region, chart,
       search_name, rank, view_count, like_count, comment_count, run_id, methodology
FROM video_history_marked;
";

/// Writes the rows the file lacks: a later step that adds a change runs this again.
fn fill(conn: &Connection) -> Result<(), StepError> {
    let mut insert = conn.prepare(
        "INSERT OR IGNORE INTO upstream_changes (id, effective_at, what, affects)
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    for c in UPSTREAM_CHANGES {
        insert.execute(params![c.id, c.effective_at, c.what, c.affects.as_str()])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
