//! Retention: deleting snapshots and follow-up counts older than a cutoff, then the
//! videos nothing refers to any more, in small transactions so a cron run that starts meanwhile waits at most
//! one of them.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, compact};

/// Fetches deleted per transaction: about 5,000 places, a few tens of milliseconds.
const FETCHES_PER_TX: usize = 25;

/// Videos looked at per transaction by the sweep for videos nothing refers to: one
/// index probe each, and a delete for the few that go.
const SWEEP_PER_TX: i64 = 2_000;

/// Pages of a fetch arrive minutes apart at most; a video last seen this long after
/// the cutoff certainly has a place in a fetch that is kept (used by the dry run).
const LONGEST_FETCH_S: i64 = 86_400;

/// The tables a prune deletes rows of, in the order its report names them.
const PRUNED_TABLES: [&str; 4] = ["fetches", "places", "extra_counts", "follow_counts"];

/// What [`Store::prune`] deleted, or would delete (`dry_run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PruneReport {
    pub(crate) dry_run: bool,
    /// Unix seconds: fetches that began before this are deleted.
    pub(crate) cutoff: i64,
    /// Rows deleted per table, by table name (`fetches`, `places`, `extra_counts`,
    /// `follow_counts`).
    pub(crate) deleted: Vec<(&'static str, u64)>,
    pub(crate) videos_deleted: u64,
    /// Bytes the file no longer uses: free pages inside it, or, after a vacuum, how
    /// much smaller the file is.
    pub(crate) bytes_freed: u64,
    /// Whether the prune stopped early when asked to (a signal); what it deleted up to
    /// then is committed, and the next prune finishes the rest.
    pub(crate) interrupted: bool,
}

impl PruneReport {
    /// A dry run's report where there is nothing to prune: no database yet.
    pub(crate) fn nothing(cutoff: i64) -> PruneReport {
        PruneReport {
            dry_run: true,
            cutoff,
            deleted: deleted([0; 4]),
            videos_deleted: 0,
            bytes_freed: 0,
            interrupted: false,
        }
    }
}

/// Rows deleted per table, in [`PRUNED_TABLES`]' order.
fn deleted(rows: [u64; 4]) -> Vec<(&'static str, u64)> {
    PRUNED_TABLES.into_iter().zip(rows).collect()
}

/// The videos a transaction took places or counts from: the regions they are no
/// longer seen in go, and the videos themselves when nothing refers to them (the FTS
/// trigger takes their index entries, the foreign keys their summary rows). Done in
/// the transaction that deleted their snapshots, so no interruption leaves them behind.
const DROP_REGIONS_UNSEEN: &str = "DELETE FROM video_regions WHERE video = ?1
     AND NOT EXISTS (SELECT 1 FROM places AS p JOIN fetches AS f ON f.num = p.fetch
                     WHERE p.video = ?1 AND f.region = video_regions.region)";
///
/// A follow-up's counts refer to their video too: without it they would go with it
/// (the foreign key cascades), newer than the cutoff or not.
const DROP_VIDEO_UNREFERENCED: &str = "DELETE FROM videos WHERE num = ?1
     AND NOT EXISTS (SELECT 1 FROM places WHERE video = ?1)
     AND NOT EXISTS (SELECT 1 FROM extra_counts WHERE video = ?1)
     AND NOT EXISTS (SELECT 1 FROM follow_counts WHERE video = ?1)";

/// A fetch older than the cutoff ?1 that prune may delete (`f` in `fetches`): not one
/// of a slot the sink's outbox still waits to ship (docs/commands.md, `--sink`), whose
/// rows are the only copy until the sink holds them.
const OLD_FETCH: &str = "f.fetched_at < ?1
     AND NOT EXISTS (SELECT 1 FROM sink_outbox AS o
                     JOIN run_nums AS r ON r.run_id = o.run_id
                     JOIN regions AS g ON g.code = o.region
                     WHERE o.shipped_at IS NULL AND r.num = f.run AND g.num = f.region)";

/// What pruning old snapshots was doing, for its errors.
const PRUNING: &str = "pruning old snapshots";

/// The file's pages before a prune: what it frees is measured against them.
struct PageCounts {
    size: i64,
    pages: i64,
    free: i64,
}

/// What deleting the old fetches removed, and whether `stop` ended it early.
#[derive(Default)]
struct SnapshotsDeleted {
    fetches: u64,
    places: u64,
    videos: u64,
    interrupted: bool,
}

/// What the sweep of the videos deleted, and whether `stop` ended it early.
#[derive(Default)]
struct Swept {
    follow_counts: u64,
    videos: u64,
    interrupted: bool,
}

/// Deletes the fetches of `chunk` with their places, then the videos only they
/// referred to, in the transaction `tx`, and commits: (places, fetches, videos).
fn delete_fetch_chunk(
    tx: rusqlite::Transaction<'_>,
    chunk: &[i64],
) -> rusqlite::Result<(u64, u64, u64)> {
    let (mut p, mut f) = (0u64, 0u64);
    let mut affected = BTreeSet::new();
    {
        let mut videos = tx.prepare_cached("SELECT video FROM places WHERE fetch = ?1")?;
        let mut del_places = tx.prepare_cached("DELETE FROM places WHERE fetch = ?1")?;
        let mut del_fetch = tx.prepare_cached("DELETE FROM fetches WHERE num = ?1")?;
        for &fetch in chunk {
            let rows = videos.query_map([fetch], |r| r.get::<_, i64>(0))?;
            for video in rows {
                affected.insert(video?);
            }
            p += del_places.execute([fetch])? as u64;
            f += del_fetch.execute([fetch])? as u64;
        }
    }
    let v = drop_unreferenced(&tx, &affected)?;
    tx.commit()?;
    Ok((p, f, v))
}

impl Store {
    /// Deletes the chart and search snapshots whose fetch began before `cutoff` (unix
    /// seconds), the counts kept beside them and the follow-ups' counts taken before
    /// it, then every video nothing refers to any more (its full-text entry with it), and with `vacuum` gives the space back
    /// to the file system. Never touches the budget's tables. With `dry_run`, counts
    /// what it would delete and writes nothing.
    pub(crate) fn prune(
        &self,
        cutoff: i64,
        dry_run: bool,
        vacuum: bool,
    ) -> Result<PruneReport, StoreError> {
        if dry_run {
            return self.prune_dry_run(cutoff);
        }
        self.prune_until(cutoff, vacuum, &|| false)
    }

    /// [`Store::prune`] that asks `stop` before each transaction and, when it says so,
    /// ends there (no vacuum) with `interrupted` set. Every transaction leaves the file
    /// whole: the snapshots it deleted and the videos they alone referred to go
    /// together. Videos an older prune left behind (killed between its phases) are
    /// collected too, whichever prune removed their snapshots.
    pub(crate) fn prune_until(
        &self,
        cutoff: i64,
        vacuum: bool,
        stop: &dyn Fn() -> bool,
    ) -> Result<PruneReport, StoreError> {
        let before = self.page_counts()?;
        let old = self.fetches_before(cutoff)?;
        let bar = crate::output::progress::Task::new("pruning", old.len() as u64);
        let snapshots = self.delete_fetches(&old, stop, &bar)?;
        let mut videos_deleted = snapshots.videos;
        let mut interrupted = snapshots.interrupted || stop();
        let (mut extra, mut follow) = (0, 0);
        if !interrupted {
            let (n, v) = self.delete_counts_before(cutoff)?;
            extra = n;
            videos_deleted += v;
            let swept = self.sweep_unreferenced(cutoff, stop)?;
            follow = swept.follow_counts;
            videos_deleted += swept.videos;
            interrupted = swept.interrupted;
        }
        bar.finish();
        if !interrupted {
            use super::best_matches::{COMMON, KEEP, STALE};
            // Said, so that a prune that takes longer on some days says why.
            if self.refresh_best_matches(STALE, COMMON, KEEP)? {
                tracing::info!(
                    "rebuilt the best matches search keeps for common words, as enough videos were added or changed since they were built"
                );
            } else {
                let appended = self.append_best_matches()?;
                if appended > 0 {
                    tracing::info!(
                        "added {appended} match{} of the videos stored since the last prune to the best matches search keeps for common words",
                        if appended == 1 { "" } else { "es" }
                    );
                }
            }
        }
        let bytes_freed = self.bytes_freed(&before, vacuum && !interrupted)?;
        Ok(PruneReport {
            dry_run: false,
            cutoff,
            deleted: deleted([snapshots.fetches, snapshots.places, extra, follow]),
            videos_deleted,
            bytes_freed: bytes_freed as u64,
            interrupted,
        })
    }

    /// The file's page size, pages and free pages, to tell afterwards what was freed.
    fn page_counts(&self) -> Result<PageCounts, StoreError> {
        Ok(PageCounts {
            size: self.pragma_i64("page_size")?,
            pages: self.pragma_i64("page_count")?,
            free: self.pragma_i64("freelist_count")?,
        })
    }

    /// The fetches that began before `cutoff`, oldest first.
    fn fetches_before(&self, cutoff: i64) -> Result<Vec<i64>, StoreError> {
        (|| {
            let mut stmt = self.conn.prepare(&format!(
                "SELECT num FROM fetches AS f WHERE {OLD_FETCH} ORDER BY num"
            ))?;
            let rows = stmt.query_map([cutoff], |r| r.get(0))?;
            rows.collect::<rusqlite::Result<Vec<i64>>>()
        })()
        .map_err(self.err(PRUNING))
    }

    /// Deletes the fetches `old`, their places and the videos only they referred to,
    /// [`FETCHES_PER_TX`] fetches a transaction, until done or `stop` says so.
    fn delete_fetches(
        &self,
        old: &[i64],
        stop: &dyn Fn() -> bool,
        bar: &crate::output::progress::Task,
    ) -> Result<SnapshotsDeleted, StoreError> {
        let mut done = SnapshotsDeleted::default();
        for chunk in old.chunks(FETCHES_PER_TX) {
            if stop() {
                done.interrupted = true;
                break;
            }
            let (p, f, v) = self
                .yielding(|| delete_fetch_chunk(self.write_tx()?, chunk))
                .map_err(self.err(PRUNING))?;
            done.places += p;
            done.fetches += f;
            done.videos += v;
            bar.inc(chunk.len() as u64);
        }
        Ok(done)
    }

    /// Deletes the counts kept beside the snapshots taken before `cutoff`, and the videos
    /// only they referred to, in one transaction: the rows deleted and the videos.
    fn delete_counts_before(&self, cutoff: i64) -> Result<(u64, u64), StoreError> {
        self.yielding(|| {
            let tx = self.write_tx()?;
            let affected = {
                let mut stmt =
                    tx.prepare("SELECT DISTINCT video FROM extra_counts WHERE fetched_at < ?1")?;
                let rows = stmt.query_map([cutoff], |r| r.get::<_, i64>(0))?;
                rows.collect::<rusqlite::Result<BTreeSet<i64>>>()?
            };
            let n = tx.execute("DELETE FROM extra_counts WHERE fetched_at < ?1", [cutoff])?;
            let v = drop_unreferenced(&tx, &affected)?;
            tx.commit()?;
            Ok((n as u64, v))
        })
        .map_err(self.err(PRUNING))
    }

    /// Bytes the file no longer uses since `before`: after a vacuum (when `vacuum`), how
    /// much smaller it is; otherwise how many more free pages it holds.
    fn bytes_freed(&self, before: &PageCounts, vacuum: bool) -> Result<i64, StoreError> {
        Ok(if vacuum {
            self.vacuum()?;
            (before.pages - self.pragma_i64("page_count")?).max(0) * before.size
        } else {
            (self.pragma_i64("freelist_count")? - before.free).max(0) * before.size
        })
    }

    /// Walks the videos in order of their numbers, a batch per transaction: deletes
    /// their follow-up counts taken before `cutoff` (the primary key's range, no
    /// scan of the newer ones' table), then every video of the batch nothing refers
    /// to any more: those the follow-ups alone kept, and what an older prune left when
    /// it was killed between deleting snapshots and deleting their videos. One index
    /// probe per video. Stops between transactions when `stop` says so; the next
    /// prune walks again from the start.
    fn sweep_unreferenced(
        &self,
        cutoff: i64,
        stop: &dyn Fn() -> bool,
    ) -> Result<Swept, StoreError> {
        let context = "deleting old follow-up counts and the videos nothing refers to";
        let mut after = i64::MIN;
        let mut swept = Swept::default();
        loop {
            if stop() {
                swept.interrupted = true;
                return Ok(swept);
            }
            let batch: Option<(i64, u64, u64)> = self
                .yielding(|| {
                    let tx = self.write_tx()?;
                    let last: Option<i64> = tx.query_row(
                        "SELECT max(num) FROM (SELECT num FROM videos WHERE num > ?1
                                               ORDER BY num LIMIT ?2)",
                        params![after, SWEEP_PER_TX],
                        |r| r.get(0),
                    )?;
                    let Some(last) = last else {
                        return Ok(None);
                    };
                    let follow = tx.execute(
                        "DELETE FROM follow_counts WHERE video > ?1 AND video <= ?2 AND at < ?3",
                        params![after, last, cutoff],
                    )?;
                    let n = tx.execute(
                        "DELETE FROM videos WHERE num > ?1 AND num <= ?2
                         AND NOT EXISTS (SELECT 1 FROM places WHERE video = videos.num)
                         AND NOT EXISTS (SELECT 1 FROM extra_counts WHERE video = videos.num)
                         AND NOT EXISTS (SELECT 1 FROM follow_counts WHERE video = videos.num)",
                        params![after, last],
                    )?;
                    tx.commit()?;
                    Ok(Some((last, follow as u64, n as u64)))
                })
                .map_err(self.err(context))?;
            match batch {
                Some((last, follow, n)) => {
                    after = last;
                    swept.follow_counts += follow;
                    swept.videos += n;
                }
                None => return Ok(swept),
            }
        }
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
        // A dry run reads a file as it is: one older than the outbox has none to keep.
        let old_fetch = if self.has_outbox().map_err(self.err(PRUNING))? {
            OLD_FETCH
        } else {
            "f.fetched_at < ?1"
        };
        let fetches = count(&format!(
            "SELECT count(*) FROM fetches AS f WHERE {old_fetch} AND ?2 = ?2"
        ))?;
        let places = count(&format!(
            "SELECT count(*) FROM places
             WHERE fetch IN (SELECT num FROM fetches AS f WHERE {old_fetch} AND ?2 = ?2)"
        ))?;
        let extra = count("SELECT count(*) FROM extra_counts WHERE fetched_at < ?1 AND ?2 = ?2")?;
        let follow = count("SELECT count(*) FROM follow_counts WHERE at < ?1 AND ?2 = ?2")?;
        let videos = count(
            "SELECT count(*) FROM videos AS v
             WHERE (v.last_seen_at < ?1 + ?2
                    OR NOT EXISTS (SELECT 1 FROM places WHERE video = v.num))
               AND NOT EXISTS (SELECT 1 FROM places AS p JOIN fetches AS f ON f.num = p.fetch
                               WHERE p.video = v.num AND f.fetched_at >= ?1)
               AND NOT EXISTS (SELECT 1 FROM extra_counts AS e
                               WHERE e.video = v.num AND e.fetched_at >= ?1)
               AND NOT EXISTS (SELECT 1 FROM follow_counts AS c
                               WHERE c.video = v.num AND c.at >= ?1)",
        )?;
        Ok(PruneReport {
            dry_run: true,
            cutoff,
            deleted: deleted([fetches, places, extra, follow]),
            videos_deleted: videos,
            bytes_freed: 0,
            interrupted: false,
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
    pub(crate) fn vacuum(&self) -> Result<(), StoreError> {
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
        tracing::info!(path = %self.path().display(), "giving the space the upgrade freed back to the file system (VACUUM)");
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
    pub(crate) fn file_bytes(&self) -> Result<u64, StoreError> {
        Ok((self.pragma_i64("page_count")? * self.pragma_i64("page_size")?).max(0) as u64)
    }
}

/// Within `tx`: the regions `videos` are no longer seen in, and the videos nothing
/// refers to any more. Returns how many videos went.
fn drop_unreferenced(
    tx: &rusqlite::Transaction<'_>,
    videos: &BTreeSet<i64>,
) -> rusqlite::Result<u64> {
    let mut regions = tx.prepare_cached(DROP_REGIONS_UNSEEN)?;
    let mut video = tx.prepare_cached(DROP_VIDEO_UNREFERENCED)?;
    let mut n = 0u64;
    for &num in videos {
        regions.execute([num])?;
        n += video.execute([num])? as u64;
    }
    Ok(n)
}
