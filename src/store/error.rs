//! Errors of the store.
//!
//! Each variant says what was being attempted and on which file, so the message printed
//! at the top (the whole chain, `crate::error::chain`) is one a person can act on. The SQLite error
//! itself travels as `source`, never repeated in our own `Display`, so it prints once.

use std::path::PathBuf;

/// How to write a search query that [`StoreError::BadQuery`] refused.
pub(crate) const QUERY_TIP: &str = "words are matched as typed (`cat video` finds both words); to \
    search for text with punctuation or the words AND, OR, NOT, NEAR, wrap it in double \
    quotes, e.g. '\"rock and roll\"', and write a double quote inside quotes as two (\"\")";

/// Everything the store can fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be opened or prepared for use (permissions, not a database,
    /// WAL not possible on this file system, ...).
    #[error("cannot open the database {}: {context}", path.display())]
    Open {
        path: PathBuf,
        context: String,
        #[source]
        source: rusqlite::Error,
    },

    /// SQLite would not switch the file to WAL journaling (e.g. a network file system
    /// without shared memory). Without WAL, concurrent runs would block each other's
    /// reads, so the store refuses rather than silently running degraded.
    #[error(
        "the database {} cannot use WAL journaling (SQLite kept journal_mode={mode}); \
         keep it on a local file system",
        path.display()
    )]
    NoWal { path: PathBuf, mode: String },

    /// The file's schema is newer than this build's, or could not be brought up to it
    /// (the same error the limiter and the journal give for the file).
    #[error(transparent)]
    Schema(#[from] crate::sqlite::SchemaError),

    /// A read-only open (`status`, `runs`, `search`, `export`, `video`, `--dry-run`)
    /// found a schema older than this build's. Read-only opens never migrate, because
    /// those commands write nothing; the message names a command that upgrades.
    #[error(
        "the database {} has schema version {found}, older than this build's version \
         {supported}, and read-only commands (status, runs, search, export, video, dry \
         runs) do not upgrade it; upgrade it with `trendsync --db {} prune --older-than \
         36500d` (it calls nothing and deletes nothing younger than 100 years), or let \
         the next `trendsync run` do it",
        path.display(),
        path.display()
    )]
    OlderSchema {
        path: PathBuf,
        found: u32,
        supported: u32,
    },

    /// The search query is not valid FTS5 syntax. This is the person's input, not a
    /// fault of the database, so the CLI can exit with a usage error (2).
    /// [`QUERY_TIP`] says how to write one.
    #[error("the search query {query:?} is not valid: {message}")]
    BadQuery { query: String, message: String },

    /// `finish_run` was given a run id that `begin_run` never recorded.
    #[error("no run {run_id:?} in the database {}", path.display())]
    UnknownRun { path: PathBuf, run_id: String },

    /// Any other SQLite failure, with what was being done.
    #[error("{context} (database {})", path.display())]
    Sqlite {
        path: PathBuf,
        context: String,
        #[source]
        source: rusqlite::Error,
    },
}
