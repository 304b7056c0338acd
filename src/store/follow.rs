//! Follow-ups (schema step 6): the counts of videos after they left the charts
//! (docs/upstream.md), stored as a series of their own, and what the runner needs
//! to choose whom to refresh without reading the snapshots.
//!
//! `follow_state` holds, per video ever on a chart, when it was last on one and when
//! its counts were last stored by any source (a chart, a search, a follow-up): the
//! videos due are those charted recently and counted long enough ago, stalest first,
//! one index walk. The write path keeps it up to date.

use rusqlite::params;

use super::{Store, StoreError};
use crate::clock::Secs;

/// Step 6: the follow-ups' series and state, and the mark of a video the upstream no
/// longer shows.
pub(crate) const CREATE: &str = r#"
-- When a follow-up last found the video missing (gone or private): the export's
-- video_error_or_removed. NULL while the upstream shows it.
ALTER TABLE videos ADD COLUMN removed_at INTEGER;

-- Per video that was on a chart: when it was last on one, and when its counts were
-- last stored (by a chart, a search or a follow-up).
CREATE TABLE follow_state (
    video      INTEGER PRIMARY KEY REFERENCES videos (num) ON DELETE CASCADE,
    charted_at INTEGER NOT NULL,
    counted_at INTEGER NOT NULL
) STRICT;
CREATE INDEX follow_state_by_counted ON follow_state (counted_at);

-- The counts a follow-up saw, one narrow row per video and time, no chart place.
CREATE TABLE follow_counts (
    video    INTEGER NOT NULL REFERENCES videos (num) ON DELETE CASCADE,
    at       INTEGER NOT NULL,
    views    INTEGER,
    likes    INTEGER,
    comments INTEGER,
    PRIMARY KEY (video, at)
) STRICT, WITHOUT ROWID;
"#;

/// The most days a follow-up looks back (`[follow] days` is at most this): the upgrade
/// fills `follow_state` from this much of the newest snapshots, so a file upgraded today
/// follows the same videos as one that had the table all along.
pub(crate) const LOOK_BACK_S: i64 = 31 * 86_400;

/// Fills `follow_state` from the snapshots of the last [`LOOK_BACK_S`] before the
/// newest fetch (no clock needed: the file's own newest time). Reads one month of
/// places, not the year.
pub(crate) fn fill_state(conn: &rusqlite::Connection) -> Result<(), crate::sqlite::StepError> {
    conn.execute(
        "INSERT INTO follow_state (video, charted_at, counted_at)
         SELECT p.video,
                max(CASE WHEN f.search = 0 THEN f.fetched_at + p.offset_s END),
                max(f.fetched_at + p.offset_s)
         FROM fetches AS f JOIN places AS p ON p.fetch = f.num
         WHERE f.fetched_at >= (SELECT max(fetched_at) FROM fetches) - ?1
         GROUP BY p.video
         HAVING max(CASE WHEN f.search = 0 THEN 1 END) IS NOT NULL",
        [LOOK_BACK_S],
    )?;
    Ok(())
}

/// One video's counts from a follow-up (`None`: hidden or absent upstream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowCounts {
    pub video_id: String,
    pub view_count: Option<i64>,
    pub like_count: Option<i64>,
    pub comment_count: Option<i64>,
}

/// What [`Store::store_follow_ups`] stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FollowStored {
    /// Videos whose counts were stored.
    pub counted: usize,
    /// Videos asked for that the answer left out, marked removed.
    pub removed: usize,
}

impl Store {
    /// The ids of the videos due for a follow-up: on a chart at or after
    /// `charted_since`, counts last stored at or before `counted_before`, stalest
    /// first (unix seconds).
    pub(crate) fn due_for_follow_up(
        &self,
        charted_since: i64,
        counted_before: i64,
    ) -> Result<Vec<String>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare_cached(
                "SELECT v.id FROM follow_state AS s JOIN videos AS v ON v.num = s.video
                 WHERE s.counted_at <= ?2 AND s.charted_at >= ?1
                 ORDER BY s.counted_at, s.video",
            )?;
            let rows = stmt.query_map(params![charted_since, counted_before], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
        })()
        .map_err(self.err("choosing the videos due for a follow-up"))
    }

    /// Stores one follow-up's answer at `at`: the counts of each video in `counts` as
    /// a point of its series (and its latest counts), and every video of `asked` the
    /// answer left out marked removed. Every video asked for counts as refreshed at
    /// `at`, so none is asked again before its turn. One transaction.
    pub fn store_follow_ups(
        &self,
        asked: &[String],
        counts: &[FollowCounts],
        at: Secs,
    ) -> Result<FollowStored, StoreError> {
        let at = at.as_i64();
        (|| {
            let tx = self.write_tx()?;
            let mut stored = FollowStored::default();
            {
                let mut num = tx.prepare_cached("SELECT num FROM videos WHERE id = ?1")?;
                let mut point = tx.prepare_cached(
                    "INSERT INTO follow_counts (video, at, views, likes, comments)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (video, at) DO UPDATE SET
                         views = excluded.views, likes = excluded.likes,
                         comments = excluded.comments",
                )?;
                // Newer counts than a chart's become the video's latest.
                let mut latest = tx.prepare_cached(
                    "UPDATE videos SET view_count = ?2, like_count = ?3, comment_count = ?4,
                         removed_at = NULL
                     WHERE num = ?1 AND last_seen_at <= ?5",
                )?;
                let mut refreshed = tx.prepare_cached(
                    "UPDATE follow_state SET counted_at = max(counted_at, ?2) WHERE video = ?1",
                )?;
                let mut removed =
                    tx.prepare_cached("UPDATE videos SET removed_at = ?2 WHERE num = ?1")?;
                for id in asked {
                    let Some(video): Option<i64> =
                        rusqlite::OptionalExtension::optional(num.query_row([id], |r| r.get(0)))?
                    else {
                        continue;
                    };
                    match counts.iter().find(|c| &c.video_id == id) {
                        Some(c) => {
                            point.execute(params![
                                video,
                                at,
                                c.view_count,
                                c.like_count,
                                c.comment_count
                            ])?;
                            latest.execute(params![
                                video,
                                c.view_count,
                                c.like_count,
                                c.comment_count,
                                at
                            ])?;
                            stored.counted += 1;
                        }
                        None => {
                            removed.execute(params![video, at])?;
                            stored.removed += 1;
                        }
                    }
                    refreshed.execute(params![video, at])?;
                }
            }
            tx.commit()?;
            Ok(stored)
        })()
        .map_err(self.err("storing a follow-up's counts"))
    }
}

/// Notes, in the write path of a page, that `video` was seen at `at`: on a chart
/// (`charted`) or in a search.
pub(super) fn seen(
    tx: &rusqlite::Transaction<'_>,
    video: i64,
    at: i64,
    charted: bool,
) -> rusqlite::Result<()> {
    if charted {
        tx.prepare_cached(
            "INSERT INTO follow_state (video, charted_at, counted_at) VALUES (?1, ?2, ?2)
             ON CONFLICT (video) DO UPDATE SET
                 charted_at = max(charted_at, excluded.charted_at),
                 counted_at = max(counted_at, excluded.counted_at)",
        )?
        .execute(params![video, at])?;
    } else {
        tx.prepare_cached(
            "UPDATE follow_state SET counted_at = max(counted_at, ?2) WHERE video = ?1",
        )?
        .execute(params![video, at])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
