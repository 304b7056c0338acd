//! The one schema of the SQLite file: every table in it, whoever owns it, comes from
//! one append-only list of migrations, and `PRAGMA user_version` is how many of them
//! the file has had.
//!
//! The store, the embedded limiter and the journal keep their tables in the same
//! `--db` file. Each owner writes its own steps beside its own code (the store's in
//! `store/schema.rs`, the limiter's and the journal's in `quota/schema.rs`); this
//! module only lists them in order and applies them. Every writer (a store, a
//! limiter or a journal opened to write) brings the file to the latest version
//! through `migrate` before it touches a table, so nobody creates tables on their
//! own and a file never holds a table its version does not account for. An open that
//! only reads never migrates: it refuses a file newer than this build and otherwise
//! reads what is there.
//!
//! Steps are append-only: a step that shipped is never edited, a change is a new step.
//! The pending steps run in one `BEGIN IMMEDIATE` transaction that also bumps
//! `user_version`, so a crash leaves the file at the version it had, or at the latest:
//! never between two steps.
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

use std::path::{Path, PathBuf};

use rusqlite::{Connection, TransactionBehavior};

/// One forward step of the schema.
#[derive(Clone, Copy)]
pub(crate) struct Migration {
    /// What the step does, for logs.
    pub(crate) description: &'static str,
    /// Whose tables the step creates or changes.
    pub(crate) owner: Owner,
    pub(crate) sql: &'static str,
    /// Code run after `sql` in the same transaction, for a step that moves data in a
    /// way one SQL batch cannot do at speed or with progress shown, or that depends on
    /// what an older file holds.
    pub(crate) data: Option<DataStep>,
}

/// The part of trendsync whose tables a step is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Runs, videos, snapshots, searches (`store`).
    Store,
    /// The embedded limiter's window and the journal (`quota`).
    Quota,
}

/// The version at which `owner`'s tables took the shape this build reads: the steps
/// after it belong to others. A read-only open needs only that much, so `status` right
/// after an upgrade of trendsync reads a file no writer has brought forward yet.
pub(crate) fn shaped_for(owner: Owner, migrations: &[Migration]) -> u32 {
    let steps = migrations
        .iter()
        .rposition(|m| m.owner == owner)
        .map_or(0, |at| at + 1);
    version_of(&migrations[..steps])
}

/// A migration step's data part: runs inside the step's transaction.
pub(crate) type DataStep = fn(&Connection) -> Result<(), StepError>;

/// The schema of the whole file, oldest step first. `user_version` = how many of these
/// are applied. Append only.
pub(crate) const MIGRATIONS: &[Migration] = &[
    crate::store::schema::VIDEOS,
    crate::store::schema::RUN_OUTCOMES,
    crate::store::schema::COMPACT,
    crate::quota::schema::TABLES,
    crate::store::schema::CHARTS,
    crate::store::schema::FOLLOW_UPS,
    crate::store::schema::RUN_DURATIONS,
];

/// The highest schema version this build knows: what every writer brings the file to.
pub fn latest_version() -> u32 {
    version_of(MIGRATIONS)
}

fn version_of(migrations: &[Migration]) -> u32 {
    // The list is a handful of entries; it cannot overflow u32.
    migrations.len() as u32
}

/// Why a step could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The file holds something the step cannot carry forward without losing or
    /// misreading it; the step changed nothing.
    #[error("{0}")]
    Refused(String),
}

/// The file's schema cannot be used by this build, or could not be brought up to it.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file was written by a newer trendsync whose schema this build does not
    /// know. Using it anyway could corrupt what that version relies on.
    #[error(
        "the database {} has schema version {found}, but this build of trendsync supports \
         at most version {supported}; upgrade trendsync to use this database",
        path.display()
    )]
    Newer {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A forward step failed; its transaction was rolled back, so the file is still at
    /// the version before it.
    #[error("cannot upgrade the database {} to schema version {to_version}", path.display())]
    Step {
        path: PathBuf,
        to_version: u32,
        #[source]
        source: StepError,
    },
}

/// Reads `PRAGMA user_version`.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// For an open that only reads (and so never migrates): refuses a file at `found`,
/// newer than `supported`, with the same error a writer gets.
pub(crate) fn check_readable(path: &Path, found: u32, supported: u32) -> Result<(), SchemaError> {
    if found > supported {
        return Err(SchemaError::Newer {
            path: path.to_path_buf(),
            found,
            supported,
        });
    }
    Ok(())
}

/// Brings the file at `path` up to `migrations.len()`, every pending step in one
/// transaction. Every writer of the file calls this with [`MIGRATIONS`] right after
/// opening it; tests pass shorter or longer lists.
///
/// Safe with several processes opening a file at once, whichever of the store, the
/// limiter and the journal they are: the upgrade takes the write lock (`BEGIN
/// IMMEDIATE`, which waits out the busy timeout) and re-reads the version inside it,
/// so steps another process has just applied are not applied twice. Returns the
/// version the file was at before.
pub(crate) fn migrate(
    conn: &Connection,
    path: &Path,
    migrations: &[Migration],
) -> Result<u32, SchemaError> {
    let latest = version_of(migrations);
    let failed = |to_version: u32| {
        move |source: StepError| SchemaError::Step {
            path: path.to_path_buf(),
            to_version,
            source,
        }
    };
    let before = user_version(conn).map_err(|e| failed(latest)(e.into()))?;
    check_readable(path, before, latest)?;
    if before == latest {
        // The common case: no write lock taken on every open.
        return Ok(before);
    }
    // A step may rebuild a table that others refer to (SQLite's only way to change a
    // table's constraints), and with foreign keys on, dropping the old table would
    // delete every row referring to it through ON DELETE CASCADE. The pragma does
    // nothing inside a transaction, so it is switched off around the upgrade's and back
    // on after it, whatever the outcome. A step that rebuilds a table keeps the rows'
    // keys, so every reference stays true.
    let enforced: bool = conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .map_err(|e| failed(latest)(e.into()))?;
    if enforced {
        conn.execute_batch("PRAGMA foreign_keys = OFF")
            .map_err(|e| failed(latest)(e.into()))?;
    }
    let upgraded = apply(conn, path, migrations, latest);
    if enforced {
        // The connection goes on without enforcement only if this fails, which SQLite
        // does not do outside a transaction.
        if let Err(e) = conn.execute_batch("PRAGMA foreign_keys = ON") {
            tracing::warn!(error = %e, "turning foreign keys back on after the upgrade");
        }
    }
    match upgraded {
        Ok(current) => check_readable(path, current, latest).map(|()| before),
        Err((next, source)) => Err(failed(next)(source)),
    }
}

/// Applies the pending steps of `migrations` in one transaction; on failure, the
/// version that was being applied and why.
fn apply(
    conn: &Connection,
    path: &Path,
    migrations: &[Migration],
    latest: u32,
) -> Result<u32, (u32, StepError)> {
    // The version being applied, used to label an error.
    let mut next = latest;
    let upgraded = (|| -> Result<u32, StepError> {
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        let current = user_version(&tx)?;
        if current >= latest {
            // Another process upgraded it meanwhile (or went beyond this build).
            return Ok(current);
        }
        // A new file gets one line; an existing one a line per step, since a step may
        // take minutes on a long history.
        let empty: bool =
            tx.query_row("SELECT count(*) = 0 FROM sqlite_schema", [], |r| r.get(0))?;
        if empty {
            tracing::info!(version = latest, path = %path.display(), "creating the database");
        }
        for (at, migration) in (current..latest).zip(&migrations[current as usize..]) {
            next = at + 1;
            if !empty {
                tracing::info!(
                    version = next,
                    description = migration.description,
                    "upgrading database schema"
                );
            }
            tx.execute_batch(migration.sql)?;
            if let Some(data) = migration.data {
                data(&tx)?;
            }
        }
        // PRAGMA takes no bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {latest}"))?;
        tx.commit()?;
        Ok(latest)
    })();
    upgraded.map_err(|source| (next, source))
}

#[cfg(test)]
mod tests;
