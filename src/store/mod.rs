//! The SQLite store: its tables (its steps of the file's one schema, applied by
//! [`crate::schema`]), queries and full-text search.
//!
//! One [`Store`] wraps one SQLite connection to the database file. The store knows
//! nothing of quota or HTTP: the runner hands it plain [`VideoRecord`]s and run
//! bookkeeping, and asks it for region state and searches. All SQL lives in this
//! module.
//!
//! Durability model: WAL journaling with `synchronous=NORMAL`, and every write call is
//! exactly one `BEGIN IMMEDIATE` transaction, so a crash or `kill -9` at any point
//! leaves a consistent database (at worst the last page is missing) and the next run
//! works. Several processes may share the file; writers wait for each other up to
//! [`crate::sqlite::BUSY_TIMEOUT`].
//!
//! A `Store` is `Send` but not `Sync`: give each thread or task its own (opening is
//! cheap once the schema is current).

mod analysts;
pub(crate) mod best_matches;
pub(crate) mod changes;
pub(crate) mod chart_history;
mod charts;
mod compact;
mod error;
mod export;
pub(crate) mod fetch_slots;
mod follow;
mod history;
pub(crate) mod outbox;
mod prune;
mod read;
mod run_limiter;
pub(crate) mod schema;
pub(crate) mod slot_misses;
mod sql;
pub(crate) mod text_ids;
mod write;

#[cfg(test)]
pub(crate) mod test_support;
#[cfg(test)]
mod tests;

use std::path::Path;

pub(crate) use changes::{UpstreamChange, crossed, methodology_at};
pub(crate) use chart_history::ChartHistoryRow;
pub(crate) use error::QUERY_TIP;
pub use error::StoreError;
pub(crate) use export::{CountRow, ExportGrain, ExportRow, ExportSpan};
pub use fetch_slots::{LeasedSlot, SlotState};
pub use follow::{FollowCounts, FollowStored};
pub use history::{CallCount, RegionOutcome};
pub(crate) use history::{HistoryFilter, HistoryRow, RunStart};
pub(crate) use outbox::{QueuedSlot, SinkBacklog, SlotFetch};
pub(crate) use prune::PruneReport;
pub use read::{ChartSpan, CountPoint, CountSource};
pub(crate) use run_limiter::{LastRunLimiter, RunLimiter};
pub use slot_misses::SlotMiss;

use crate::clock::Secs;
use crate::sqlite::{Db, Held, Migration, OpenError};

/// The error of an open that failed, as the store says it.
fn open_error(path: &Path, e: OpenError) -> StoreError {
    match e {
        OpenError::Sqlite { doing, source } => StoreError::Open {
            path: path.to_path_buf(),
            context: doing.to_string(),
            source,
        },
        OpenError::NoWal { mode } => StoreError::NoWal {
            path: path.to_path_buf(),
            mode,
        },
    }
}

/// Page cache per connection, in KiB.
const CACHE_KIB: i64 = 32 * 1024;

/// WAL size, in pages (4 KiB), at which a commit checkpoints by itself: ~40 MiB.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

pub use crate::video::VideoRecord;

use crate::region_status::{Recorded, RegionStatus};

/// What started a run; `backfill` may spend the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    Run,
    Backfill,
}

impl RunKind {
    /// The word stored in `runs.kind`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunKind::Run => "run",
            RunKind::Backfill => "backfill",
        }
    }

    fn from_db(word: &str) -> Option<RunKind> {
        match word {
            "run" => Some(RunKind::Run),
            "backfill" => Some(RunKind::Backfill),
            _ => None,
        }
    }
}

/// How a run ended, recorded by [`Store::finish_run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    /// One a run ends with: `complete`, `budget_exhausted`, `upstream_quota_exhausted`,
    /// `failed`, `skipped` or `interrupted`.
    pub status: RegionStatus,
    pub units: u64,
    pub calls: u64,
    pub stop_reason: Option<String>,
    pub ended_at: Secs,
    /// How long the run took, as its process measured it.
    pub duration_us: u64,
}

/// One row of `runs`. `status` is `running` until the run is finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunRecord {
    pub(crate) run_id: String,
    pub(crate) kind: RunKind,
    pub(crate) started_at: i64,
    pub(crate) ended_at: Option<i64>,
    pub(crate) status: Recorded<RegionStatus>,
    pub(crate) units: Option<u64>,
    pub(crate) calls: Option<u64>,
    pub(crate) stop_reason: Option<String>,
    /// How long it took, to the microsecond (none before schema 7, or while it runs).
    pub(crate) duration_us: Option<u64>,
}

/// What the store remembers about a region between runs (unix seconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RegionState {
    pub(crate) region: String,
    pub(crate) last_complete_at: Option<i64>,
    pub(crate) last_attempt_at: Option<i64>,
    pub(crate) last_status: Option<Recorded<RegionStatus>>,
}

#[cfg(test)]
/// One fetch's counts for a video (a row of `video_stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatsRow {
    pub(crate) fetched_at: i64,
    pub(crate) run_id: String,
    pub(crate) view_count: Option<i64>,
    pub(crate) like_count: Option<i64>,
    pub(crate) comment_count: Option<i64>,
}

/// One result of [`Store::search`], best first.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    pub video_id: String,
    pub title: String,
    pub channel_title: String,
    /// A short excerpt of the best-matching column, matched terms in `[` `]`.
    pub snippet: String,
    pub view_count: Option<i64>,
    pub published_at: String,
    /// Regions where the video was seen (a trending chart or a regional search),
    /// sorted.
    pub regions: Vec<String>,
}

/// The trendsync database, as the store reads and writes it: the command's one
/// connection ([`Db`]), held for as long as the store lives.
pub struct Store {
    conn: Held,
    db: Db,
    read_only: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db.path())
            .field("read_only", &self.read_only)
            .finish()
    }
}

impl Store {
    /// Opens (creating if needed) the database for reading and writing and upgrades its
    /// schema to `migrations`, the whole file's list of steps, every owner's.
    ///
    /// Refuses a database from a newer trendsync ([`crate::sqlite::SchemaError::Newer`]).
    pub(crate) fn open_with(path: &Path, migrations: &[Migration]) -> Result<Store, StoreError> {
        let db = Db::open_for_writing(path).map_err(|e| open_error(path, e))?;
        Store::writing(&db, migrations)
    }

    /// The store on the command's connection `db`, opened to write: upgrades the file's
    /// schema to `migrations`, the whole file's list of steps, every owner's.
    pub(crate) fn writing(db: &Db, migrations: &[Migration]) -> Result<Store, StoreError> {
        let path = db.path();
        let open_err = |context: &'static str| {
            move |source| StoreError::Open {
                path: path.to_path_buf(),
                context: context.to_string(),
                source,
            }
        };
        let conn = db.lock();
        // FTS5 merges read back recent index segments; the 2 MiB default cache makes
        // them go to the OS for pages it just wrote. Grows only as used.
        conn.pragma_update(None, "cache_size", -CACHE_KIB)
            .map_err(open_err("setting the page cache size"))?;
        // Checkpoints (WAL -> database, with fsync) are the one expensive I/O step. At
        // the default 1000 pages one lands on every few stored pages; at this size a
        // run's pages (~10 MB of WAL) never trigger one, and finish_run checkpoints
        // once instead. Still bounded when runs die before finishing.
        conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)
            .map_err(open_err("setting the WAL checkpoint size"))?;
        conn.set_prepared_statement_cache_capacity(32);

        crate::sqlite::migrate(&conn, path, migrations)?;
        let store = Store {
            conn,
            db: db.clone(),
            read_only: false,
        };
        store.finish_upgrade()?;
        Ok(store)
    }

    /// The store again on a connection a store was already made on ([`Store::writing`]
    /// or [`Store::reading`]): nothing is checked again.
    pub(crate) fn resume(db: &Db) -> Store {
        Store {
            conn: db.lock(),
            db: db.clone(),
            read_only: !db.is_writable(),
        }
    }

    /// Opens the database for `--dry-run`, which must write nothing: see
    /// [`Store::reading`]. `Ok(None)` when the file does not exist (it is not created).
    ///
    /// `migrations` is the whole file's list of steps.
    pub(crate) fn open_read_only_with(
        path: &Path,
        migrations: &[Migration],
    ) -> Result<Option<Store>, StoreError> {
        // When existence cannot be determined, go on: SQLite's error will say why.
        if matches!(path.try_exists(), Ok(false)) {
            return Ok(None);
        }
        // No SQLITE_OPEN_CREATE: a file removed since the check above is an error, not
        // a new empty file.
        let db = Db::open_for_reading(path).map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            context: "opening the file to read".to_owned(),
            source,
        })?;
        Store::reading(&db, migrations, schema::STEPS)
    }

    /// The store on the command's connection `db`, only to read, the store's own steps
    /// being `own` and the file's `migrations`:
    /// - `Ok(None)` when the file is at schema version 0: a new empty file, or one that
    ///   only an older trendsync's embedded limiter or journal wrote (they did not
    ///   version the file). Either way it holds none of the store's tables, so nothing
    ///   is stored and every region is as stale as it can be.
    /// - A file whose store tables are older than this build's is an error
    ///   ([`StoreError::OlderSchema`]) rather than a guess at which parts are missing: a
    ///   reader never migrates, and one real run upgrades the file. Later steps that
    ///   change only other tables (the limiter's) are not needed to read it.
    /// - A newer schema is refused as in [`Store::open`], with the same error.
    ///
    /// On a connection opened to read (`query_only`), every write method fails and the
    /// file's content is never changed.
    pub(crate) fn reading(
        db: &Db,
        migrations: &[Migration],
        own: &[Migration],
    ) -> Result<Option<Store>, StoreError> {
        let path = db.path();
        let conn = db.lock();
        let found = crate::sqlite::user_version(&conn).map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            context: "reading the schema version".to_owned(),
            source,
        })?;
        let supported = crate::sqlite::version_of(migrations);
        crate::sqlite::check_readable(path, found, supported)?;
        if found == 0 {
            return Ok(None);
        }
        // Steps after the store's own change other tables only: a file that has not had
        // them yet holds the store's tables as this build reads them.
        let needed = crate::sqlite::version_after(migrations, own);
        if found < needed {
            return Err(StoreError::OlderSchema {
                path: path.to_path_buf(),
                found,
                supported,
            });
        }
        Ok(Some(Store {
            conn,
            db: db.clone(),
            read_only: !db.is_writable(),
        }))
    }

    /// The file this store was opened on.
    pub(crate) fn path(&self) -> &Path {
        self.db.path()
    }

    /// The connection this store is on.
    pub(crate) fn db(&self) -> &Db {
        &self.db
    }

    #[cfg(test)]
    /// Whether this store came from [`Store::open_read_only`].
    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// `PRAGMA integrity_check` says "ok" and, on a writable store, the full-text index
    /// agrees with the videos table (FTS5 `integrity-check`, which is formally a write
    /// and so cannot run read-only). Problems found are logged at warn level.
    pub fn integrity_check(&self) -> Result<bool, StoreError> {
        let problems = (|| {
            let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
        })()
        .map_err(self.err("checking database integrity"))?;
        if problems != ["ok"] {
            for problem in &problems {
                tracing::warn!(path = %self.path().display(), problem, "integrity check");
            }
            return Ok(false);
        }
        if self.read_only {
            return Ok(true);
        }
        match self.conn.execute(
            "INSERT INTO videos_fts (videos_fts, rank) VALUES ('integrity-check', 1)",
            [],
        ) {
            Ok(_) => Ok(true),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
                tracing::warn!(path = %self.path().display(), error = %e, "full-text index check");
                Ok(false)
            }
            Err(e) => Err(self.err("checking the full-text index")(e)),
        }
    }

    /// Copies what the WAL holds into the database file (a passive checkpoint: it
    /// never waits for, nor blocks, other connections, and does what it can).
    ///
    /// [`Store::finish_run`] calls this so that the fsyncs of a checkpoint happen once
    /// per run instead of in the middle of storing pages.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        let (busy, log, done): (i64, i64, i64) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .map_err(self.err("checkpointing the WAL"))?;
        tracing::debug!(busy, wal_pages = log, checkpointed = done, "WAL checkpoint");
        Ok(())
    }

    /// Maps a SQLite error to [`StoreError::Sqlite`] saying what was being done.
    fn err(&self, context: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> StoreError {
        let path = self.path().to_path_buf();
        let context = context.into();
        move |source| StoreError::Sqlite {
            path,
            context,
            source,
        }
    }
}
