//! Retention: deleting snapshots older than a cutoff, then the videos nothing refers to
//! any more, in small transactions so a cron run that starts meanwhile waits at most
//! one of them.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, compact};

/// Fetches deleted per transaction: about 5,000 places, a few tens of milliseconds.
const FETCHES_PER_TX: usize = 25;

/// Videos checked per transaction in the second phase: deleting one takes its
/// full-text entries out too, a few hundred microseconds.
const VIDEOS_PER_TX: usize = 200;

/// Pages of a fetch arrive minutes apart at most; a video last seen this long after
/// the cutoff certainly has a place in a fetch that is kept (used by the dry run).
const LONGEST_FETCH_S: i64 = 86_400;

/// What [`Store::prune`] deleted, or would delete (`dry_run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneReport {
    pub dry_run: bool,
    /// Unix seconds: fetches that began before this are deleted.
    pub cutoff: i64,
    /// Rows deleted per table, by table name (`fetches`, `places`, `extra_counts`).
    pub deleted: Vec<(&'static str, u64)>,
    pub videos_deleted: u64,
    /// Bytes the file no longer uses: free pages inside it, or, after a vacuum, how
    /// much smaller the file is.
    pub bytes_freed: u64,
}

impl Store {
    /// Deletes the chart and search snapshots whose fetch began before `cutoff` (unix
    /// seconds), the counts kept beside them, then every video no snapshot refers to
    /// any more (its full-text entry with it), and with `vacuum` gives the space back
    /// to the file system. Never touches the budget's tables. With `dry_run`, counts
    /// what it would delete and writes nothing.
    pub fn prune(
        &self,
        cutoff: i64,
        dry_run: bool,
        vacuum: bool,
    ) -> Result<PruneReport, StoreError> {
        if dry_run {
            return self.prune_dry_run(cutoff);
        }
        let context = "pruning old snapshots";
        let page_size = self.pragma_i64("page_size")?;
        let (pages_before, free_before) = (
            self.pragma_i64("page_count")?,
            self.pragma_i64("freelist_count")?,
        );
        let old: Vec<i64> = (|| {
            let mut stmt = self
                .conn
                .prepare("SELECT num FROM fetches WHERE fetched_at < ?1 ORDER BY num")?;
            let rows = stmt.query_map([cutoff], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<Vec<i64>>>()
        })()
        .map_err(self.err(context))?;
        let bar = crate::progress::Task::new("pruning", old.len() as u64);
        let mut affected = BTreeSet::new();
        let (mut places, mut fetches) = (0u64, 0u64);
        for chunk in old.chunks(FETCHES_PER_TX) {
            let (p, f) = self
                .yielding(|| {
                    let tx = self.write_tx()?;
                    let (mut p, mut f) = (0u64, 0u64);
                    {
                        let mut videos =
                            tx.prepare_cached("SELECT video FROM places WHERE fetch = ?1")?;
                        let mut del_places =
                            tx.prepare_cached("DELETE FROM places WHERE fetch = ?1")?;
                        let mut del_fetch =
                            tx.prepare_cached("DELETE FROM fetches WHERE num = ?1")?;
                        for &fetch in chunk {
                            let rows = videos.query_map([fetch], |r| r.get::<_, i64>(0))?;
                            for video in rows {
                                affected.insert(video?);
                            }
                            p += del_places.execute([fetch])? as u64;
                            f += del_fetch.execute([fetch])? as u64;
                        }
                    }
                    tx.commit()?;
                    Ok((p, f))
                })
                .map_err(self.err(context))?;
            places += p;
            fetches += f;
            bar.inc(chunk.len() as u64);
        }
        let extra = self
            .yielding(|| {
                let tx = self.write_tx()?;
                {
                    let mut stmt = tx
                        .prepare("SELECT DISTINCT video FROM extra_counts WHERE fetched_at < ?1")?;
                    let rows = stmt.query_map([cutoff], |r| r.get::<_, i64>(0))?;
                    for video in rows {
                        affected.insert(video?);
                    }
                }
                let n = tx.execute("DELETE FROM extra_counts WHERE fetched_at < ?1", [cutoff])?;
                tx.commit()?;
                Ok(n as u64)
            })
            .map_err(self.err(context))?;
        // The videos whose places went: drop the regions they are no longer seen in,
        // and the videos themselves when nothing refers to them (the FTS trigger takes
        // their index entries, the foreign keys their summary rows).
        let affected: Vec<i64> = affected.into_iter().collect();
        let mut videos_deleted = 0u64;
        for chunk in affected.chunks(VIDEOS_PER_TX) {
            videos_deleted += self
                .yielding(|| {
                    let tx = self.write_tx()?;
                    let mut n = 0u64;
                    {
                        let mut regions = tx.prepare_cached(
                            "DELETE FROM video_regions WHERE video = ?1
                             AND NOT EXISTS (SELECT 1 FROM places AS p JOIN fetches AS f ON f.num = p.fetch
                                             WHERE p.video = ?1 AND f.region = video_regions.region)",
                        )?;
                        let mut video = tx.prepare_cached(
                            "DELETE FROM videos WHERE num = ?1
                             AND NOT EXISTS (SELECT 1 FROM places WHERE video = ?1)
                             AND NOT EXISTS (SELECT 1 FROM extra_counts WHERE video = ?1)",
                        )?;
                        for &num in chunk {
                            regions.execute([num])?;
                            n += video.execute([num])? as u64;
                        }
                    }
                    tx.commit()?;
                    Ok(n)
                })
                .map_err(self.err(context))?;
        }
        bar.finish();
        let bytes_freed = if vacuum {
            self.vacuum()?;
            (pages_before - self.pragma_i64("page_count")?).max(0) * page_size
        } else {
            (self.pragma_i64("freelist_count")? - free_before).max(0) * page_size
        };
        Ok(PruneReport {
            dry_run: false,
            cutoff,
            deleted: vec![
                ("fetches", fetches),
                ("places", places),
                ("extra_counts", extra),
            ],
            videos_deleted,
            bytes_freed: bytes_freed as u64,
        })
    }

    fn prune_dry_run(&self, cutoff: i64) -> Result<PruneReport, StoreError> {
        let count = |sql: &str| {
            self.conn
                .query_row(sql, params![cutoff, LONGEST_FETCH_S], |r| {
                    r.get::<_, i64>(0)
                })
                .map(|n| n.max(0) as u64)
                .map_err(self.err("counting what prune would delete"))
        };
        let fetches = count("SELECT count(*) FROM fetches WHERE fetched_at < ?1 AND ?2 = ?2")?;
        let places = count(
            "SELECT count(*) FROM places
             WHERE fetch IN (SELECT num FROM fetches WHERE fetched_at < ?1 AND ?2 = ?2)",
        )?;
        let extra = count("SELECT count(*) FROM extra_counts WHERE fetched_at < ?1 AND ?2 = ?2")?;
        let videos = count(
            "SELECT count(*) FROM videos AS v
             WHERE v.last_seen_at < ?1 + ?2
               AND NOT EXISTS (SELECT 1 FROM places AS p JOIN fetches AS f ON f.num = p.fetch
                               WHERE p.video = v.num AND f.fetched_at >= ?1)
               AND NOT EXISTS (SELECT 1 FROM extra_counts AS e
                               WHERE e.video = v.num AND e.fetched_at >= ?1)",
        )?;
        Ok(PruneReport {
            dry_run: true,
            cutoff,
            deleted: vec![
                ("fetches", fetches),
                ("places", places),
                ("extra_counts", extra),
            ],
            videos_deleted: videos,
            bytes_freed: 0,
        })
    }

    /// Runs one short write transaction, then pauses about as long as it took, so that
    /// a cron run waiting for the lock (its busy handler polls) gets its turn.
    fn yielding<T>(&self, tx: impl FnOnce() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        let started = Instant::now();
        let out = tx()?;
        std::thread::sleep(
            started
                .elapsed()
                .clamp(Duration::from_millis(1), Duration::from_millis(50)),
        );
        Ok(out)
    }

    /// Rebuilds the file without its free pages (`VACUUM`), then truncates the WAL so
    /// the space is given back. Writers wait while it runs.
    pub fn vacuum(&self) -> Result<(), StoreError> {
        self.conn
            .execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(self.err("vacuuming the database"))
    }

    /// Finishes what an upgrade left owed: a vacuum, once, after the compact layout's
    /// upgrade emptied the old tables. A kill during it leaves the mark, so the next
    /// open vacuums again.
    pub(crate) fn finish_upgrade(&self) -> Result<(), StoreError> {
        let pending: Option<String> = (|| {
            let has_meta: bool = self.conn.query_row(
                "SELECT count(*) > 0 FROM sqlite_schema WHERE type = 'table' AND name = 'store_meta'",
                [],
                |r| r.get(0),
            )?;
            if !has_meta {
                return Ok(None);
            }
            self.conn
                .query_row(
                    "SELECT value FROM store_meta WHERE key = ?1",
                    [compact::VACUUM_PENDING],
                    |r| r.get(0),
                )
                .optional()
        })()
        .map_err(self.err("reading whether the upgrade is finished"))?;
        if pending.is_none() {
            return Ok(());
        }
        tracing::info!(path = %self.path.display(), "giving the space the upgrade freed back to the file system (VACUUM)");
        self.vacuum()?;
        self.conn
            .execute(
                "DELETE FROM store_meta WHERE key = ?1",
                [compact::VACUUM_PENDING],
            )
            .map_err(self.err("noting that the upgrade is finished"))?;
        Ok(())
    }

    fn pragma_i64(&self, name: &str) -> Result<i64, StoreError> {
        self.conn
            .query_row(&format!("PRAGMA {name}"), [], |r| r.get(0))
            .map_err(self.err(format!("reading PRAGMA {name}")))
    }

    /// The database file's size in bytes (pages in use and free).
    pub fn file_bytes(&self) -> Result<u64, StoreError> {
        Ok((self.pragma_i64("page_count")? * self.pragma_i64("page_size")?).max(0) as u64)
    }
}
