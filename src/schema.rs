//! The one schema of the SQLite file, composed: which steps make up the file and in
//! which order. The store, the embedded limiter and the journal keep their tables in
//! the same `--db` file; each owner writes only its own steps (`store/schema.rs`,
//! `quota/schema.rs`), the machinery that applies a list knows no owner
//! ([`crate::sqlite`]), and this module, above them all, lists the steps once and
//! passes the list down to every opener. The openers the rest of the program calls
//! ([`Store::open`], [`EmbeddedLimiter::open`], [`Journal::open`] and their read-only
//! kin) are defined here for that reason: each hands the owner the file's list.
//!
//! The store brings the file up through the whole list. The limiter and the journal
//! run only their own steps, ahead of the store's, on a file the store has versioned
//! ([`crate::sqlite::migrate_own`]): `budget charge` never runs a data step of the
//! store's, which may take minutes on a year's file, and the file's `user_version`
//! stays what the steps in order have made it, until `run`, `backfill` or `prune`
//! brings it up. A new file is created whole by whichever opener comes first.
//!
//! History, for files written before this list was one:
//! - versions 1 to 3 were the store's own and are its steps here, unchanged;
//! - the limiter created its tables on open and kept `quota_schema` (version 1); the
//!   journal created its tables on open and added the ledger's columns when missing.
//!   Neither touched `user_version`, so a file only ever used by the limiter or the
//!   journal is at version 0. Step 4 creates their tables `IF NOT EXISTS` (an older
//!   file may hold them, rows and all), adds the ledger's columns to a journal that
//!   lacks them, and drops `quota_schema`.
//!
//! An older trendsync given a file at version 4: its store refuses it as newer than it
//! knows; its limiter and journal never looked at `user_version` and find the tables
//! they expect, and its limiter recreates `quota_schema` holding version 1. That table
//! is harmless: the file is already at version 4, so step 4 does not run again to drop
//! it, and nothing of this build reads it.

use std::path::Path;
use std::sync::Arc;

use crate::clock::Clock;
use crate::quota::{
    BucketFigures, Budget, EmbeddedLimiter, FiguresError, Journal, JournalError, LimiterError,
};
use crate::sqlite::{Db, Migration, user_version, version_of};
use crate::store::{Store, StoreError};

/// The schema of the whole file, oldest step first. `user_version` = how many of these
/// are applied. Append only.
pub(crate) const MIGRATIONS: &[Migration] = &[
    crate::store::schema::VIDEOS,
    crate::store::schema::RUN_OUTCOMES,
    crate::store::schema::COMPACT,
    crate::quota::schema::TABLES,
    crate::store::schema::CHARTS,
    crate::store::schema::FOLLOW_UPS,
    crate::store::schema::ANALYSTS,
    crate::quota::schema::CLOCK_SKEW,
    crate::store::schema::RUN_DURATIONS,
    crate::store::changes::STEP,
    crate::store::chart_history::STEP,
    crate::store::text_ids::STEP,
    crate::store::schema::RUN_LIMITERS,
    crate::quota::schema::UPSTREAM_SPENT,
    crate::quota::schema::CALL_LOG,
    crate::store::best_matches::STEP,
    crate::store::best_matches::COUNTS,
    crate::quota::schema::LAST_FIGURES,
    crate::quota::schema::LAST_FIGURES_AS_OF,
    crate::store::slot_misses::STEP,
    crate::store::fetch_slots::STEP,
    crate::store::outbox::STEP,
];

/// The highest schema version this build knows: what the store brings the file to.
pub fn latest_version() -> u32 {
    version_of(MIGRATIONS)
}

/// What an SQLite file holds, as far as trendsync can tell without changing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// trendsync's tables, at some version (possibly a newer one than this build's,
    /// which the open that follows refuses with its own error).
    Trendsync,
    /// No tables at all: a file SQLite created but nobody filled.
    Empty,
    /// Tables, but none of trendsync's: another program's database.
    Foreign,
}

/// Tells what the file behind `conn` holds. A file at a version of [`MIGRATIONS`], or
/// of a newer trendsync's list, holds `runs` (version 1 created it); one at version 0
/// that an older trendsync's limiter or journal wrote holds their `quota_` tables. A
/// `user_version` alone proves nothing: another program's file may set any.
pub fn contents(conn: &rusqlite::Connection) -> rusqlite::Result<Contents> {
    let version = user_version(conn)?;
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table'")?
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let ours = |name: &str| {
        if version > 0 {
            name == "runs"
        } else {
            matches!(name, "quota_entry" | "quota_journal")
        }
    };
    Ok(if tables.iter().any(|t| ours(t)) {
        Contents::Trendsync
    } else if tables.is_empty() {
        Contents::Empty
    } else {
        Contents::Foreign
    })
}

impl Store {
    /// Opens (creating if needed) the database for reading and writing and upgrades its
    /// schema, the whole file's, to this build's version.
    ///
    /// Refuses a database from a newer trendsync ([`crate::sqlite::SchemaError::Newer`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
        Store::open_with(path.as_ref(), MIGRATIONS)
    }

    /// Creates (or upgrades) a database only as far as schema `version`, as the
    /// trendsync that introduced that version left its files: for tools that build an
    /// older database to upgrade, such as the year benchmark. A `version` beyond this
    /// build's means this build's.
    pub fn create_at_version(path: impl AsRef<Path>, version: u32) -> Result<(), StoreError> {
        let steps = (version as usize).min(MIGRATIONS.len());
        Store::open_with(path.as_ref(), &MIGRATIONS[..steps]).map(drop)
    }

    /// Opens the database for `--dry-run` and the commands that only read: see
    /// [`Store::open_read_only_with`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Option<Store>, StoreError> {
        Store::open_read_only_with(path.as_ref(), MIGRATIONS)
    }

    /// The store on the command's connection, to write: the file brought up to this
    /// build's schema ([`Store::writing`]).
    pub fn on(db: &Db) -> Result<Store, StoreError> {
        Store::writing(db, MIGRATIONS)
    }

    /// The store on the command's connection, only to read ([`Store::reading`]).
    pub fn read_on(db: &Db) -> Result<Option<Store>, StoreError> {
        Store::reading(db, MIGRATIONS, crate::store::schema::STEPS)
    }
}

impl EmbeddedLimiter {
    /// Opens (creating if needed) the database at `path` for charging under `budget`
    /// (none: the window as it stands), deciding by `clock`.
    pub fn open(
        path: &Path,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> Result<EmbeddedLimiter, LimiterError> {
        EmbeddedLimiter::open_in(path, budget_key, clock, budget, MIGRATIONS)
    }

    /// Opens `path` only to read the window as it stands by `clock`, counted under
    /// `budget` when one is given: creates nothing, writes nothing and never migrates.
    /// A missing file is an empty window; so is a file whose schema predates the
    /// limiter's tables, and an older file that holds them is read as it is (their
    /// columns never changed). A file newer than this build is refused.
    pub fn open_read_only(
        path: &Path,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> Result<EmbeddedLimiter, LimiterError> {
        EmbeddedLimiter::open_read_only_in(path, budget_key, clock, budget, MIGRATIONS)
    }

    /// The limiter on the command's connection, for charging ([`EmbeddedLimiter::on`]).
    pub fn charging(
        db: &Db,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> Result<EmbeddedLimiter, LimiterError> {
        EmbeddedLimiter::on(db, budget_key, clock, budget, MIGRATIONS)
    }

    /// The limiter on the command's connection (none: no file at `path`), only to
    /// read the window ([`EmbeddedLimiter::reading`]).
    pub fn reading_on(
        db: Option<&Db>,
        path: &Path,
        budget_key: &str,
        clock: Arc<dyn Clock>,
        budget: Option<Arc<Budget>>,
    ) -> Result<EmbeddedLimiter, LimiterError> {
        EmbeddedLimiter::reading(db, path, budget_key, clock, budget, MIGRATIONS)
    }
}

/// Records `skew` as the last one seen on its clock in the database at `db`, bringing
/// the limiter's own tables up to date first: what a run does with each answer's
/// `Date` (docs/budget.md), for tools and tests that drive
/// the limiter as a run would.
pub fn record_skew(
    db: &Path,
    skew: &crate::quota::skew::Skew,
) -> Result<(), crate::quota::skew::SkewError> {
    let db =
        Db::open_for_writing(db).map_err(|e| crate::quota::skew::SkewError::opening(db, &e))?;
    record_skew_on(&db, skew)
}

/// [`record_skew`] on the command's connection.
pub fn record_skew_on(
    db: &Db,
    skew: &crate::quota::skew::Skew,
) -> Result<(), crate::quota::skew::SkewError> {
    crate::quota::skew::record(db, MIGRATIONS, skew)
}

/// Records `figures` as the last known figures of budget `key` on the command's
/// connection ([`crate::quota::figures::record`]): what a run does with the figures the
/// limiter reported at its end, read at `as_of`.
pub fn record_figures_on(
    db: &Db,
    key: &str,
    figures: &[BucketFigures],
    as_of: crate::clock::Micros,
) -> Result<(), FiguresError> {
    crate::quota::figures::record(db, MIGRATIONS, key, figures, as_of)
}

impl Journal {
    /// Opens the journal in the database at `path`, creating the file if needed and
    /// bringing the journal's tables up to date; it reads the time from `clock`.
    pub fn open(path: &Path, clock: Arc<dyn Clock>) -> Result<Journal, JournalError> {
        Journal::open_in(path, MIGRATIONS, clock)
    }

    /// Opens the journal only if the database exists and holds any rows of this
    /// host's calls (unmetered or in the ledger); creates nothing otherwise.
    pub fn open_if_any(
        path: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        Journal::open_if_any_in(path, MIGRATIONS, clock)
    }

    /// Opens the journal only if the database exists and holds journalled calls:
    /// creates nothing otherwise, so commands that only read leave no trace.
    pub fn open_if_pending(
        path: &Path,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        Journal::open_if_pending_in(path, MIGRATIONS, clock)
    }

    /// The journal on the command's connection, to write ([`Journal::on`]).
    pub fn with(db: &Db, clock: Arc<dyn Clock>) -> Result<Journal, JournalError> {
        Journal::on(db, MIGRATIONS, clock)
    }

    /// [`Journal::open_if_any`] on the command's connection (none: no file).
    pub fn any_on(db: Option<&Db>, clock: Arc<dyn Clock>) -> Result<Option<Journal>, JournalError> {
        Journal::if_any(db, MIGRATIONS, clock)
    }

    /// [`Journal::open_if_pending`] on the command's connection (none: no file).
    pub fn pending_on(
        db: Option<&Db>,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Journal>, JournalError> {
        Journal::if_pending(db, MIGRATIONS, clock)
    }
}

#[cfg(test)]
mod tests;
