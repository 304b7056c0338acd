//! What the read-only commands require of `--db`: a trendsync database that exists.
//!
//! Those commands answer from the file alone, so a typo in `--db` would otherwise show
//! an empty world (no runs, a whole budget, every region stale) and exit 0. They also
//! create nothing (DESIGN.md 2): SQLite would make a new empty file of a name that
//! does not exist.

use std::io::Read;
use std::path::Path;

use anyhow::Result;

use crate::error::MissingConfig;
use crate::schema::Contents;

/// What to do about a `--db` that holds no trendsync database yet.
const WHAT_TO_DO: &str = "run `trendsync run` first to create it, or check --db (TRENDSYNC_DB)";

/// The first bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Refuses (78) a `--db` that does not exist, is not a regular file, or is not a
/// trendsync database, saying which and what to do. Looks without creating or
/// changing anything. What cannot be looked at (a file this user may not read) is
/// left to the command's own open, which says why.
pub(crate) fn require(db: &Path) -> Result<()> {
    super::refuse_missing_directory(db)?;
    let refuse = |what: &str| -> Result<()> {
        Err(MissingConfig(format!("--db {}: {what}", db.display())).into())
    };
    let meta = match std::fs::metadata(db) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return refuse(&format!("no such file; {WHAT_TO_DO}"));
        }
        Err(_) => return Ok(()),
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        return refuse(&format!(
            "is a directory, not a database file; name the file in it (e.g. --db {}), or check --db (TRENDSYNC_DB)",
            db.join("trendsync.db").display()
        ));
    }
    if !kind.is_file() {
        return refuse(&format!(
            "is {}, not a database file; check --db (TRENDSYNC_DB)",
            crate::atomic::describe(kind)
        ));
    }
    if meta.len() == 0 {
        return refuse(&format!(
            "is an empty file, not yet a trendsync database; {WHAT_TO_DO}"
        ));
    }
    let mut head = [0u8; 16];
    let Ok(mut file) = std::fs::File::open(db) else {
        return Ok(());
    };
    if file.read_exact(&mut head).is_err() || &head != SQLITE_MAGIC {
        return refuse(
            "is not an SQLite database (it does not start with SQLite's header); check --db (TRENDSYNC_DB)",
        );
    }
    let contents = crate::sqlite::open_for_reading(db).and_then(|c| crate::schema::contents(&c));
    match contents {
        Ok(Contents::Trendsync) | Err(_) => Ok(()),
        Ok(Contents::Empty) => refuse(&format!(
            "is an empty SQLite database, not yet a trendsync database; {WHAT_TO_DO}"
        )),
        Ok(Contents::Foreign) => refuse(
            "is an SQLite database, but not trendsync's (none of its tables are there); check --db (TRENDSYNC_DB)",
        ),
    }
}
