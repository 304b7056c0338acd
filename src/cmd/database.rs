//! What the commands require of `--db`: the read-only ones, a trendsync database that
//! exists; the ones that write, nothing there yet or a file trendsync may write.
//!
//! Those commands answer from the file alone, so a typo in `--db` would otherwise show
//! an empty world (no runs, a whole budget, every region stale) and exit 0. They also
//! create nothing (docs/commands.md): SQLite would make a new empty file of a name that
//! does not exist.

use std::fs::OpenOptions;
use std::io::Read;
use std::path::Path;

use anyhow::Result;

use crate::error::MissingConfig;
use crate::schema::Contents;

/// What to do about a `--db` that holds no trendsync database yet.
const WHAT_TO_DO: &str = "run `trendsync run` first to create it, or check --db (TRENDSYNC_DB)";

/// The first bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What `--db` names, as far as can be told without creating or changing anything.
enum Found {
    /// Nothing at the path: the writers create it.
    Nothing,
    /// A trendsync database, or one whose contents could not be read for a reason the
    /// command's own open will say (a lock held, say).
    Ours,
    /// A zero-length file: what `touch` or a first run killed early leaves.
    Blank,
    /// An SQLite database with no tables yet.
    NoTables,
    /// Not usable, and why, in words that end with what to do.
    Refused(String),
}

/// Looks at `db`.
fn inspect(db: &Path) -> Found {
    let meta = match std::fs::metadata(db) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Nothing,
        Err(e) => {
            return Found::Refused(format!(
                "cannot be looked at ({e}); check the permissions of its directory, or run as a user who may read it"
            ));
        }
    };
    let kind = meta.file_type();
    if kind.is_dir() {
        return Found::Refused(format!(
            "is a directory, not a database file; name the file in it (e.g. --db {}), or check --db (TRENDSYNC_DB)",
            db.join("trendsync.db").display()
        ));
    }
    if !kind.is_file() {
        return Found::Refused(format!(
            "is {}, not a database file; check --db (TRENDSYNC_DB)",
            crate::atomic::describe(kind)
        ));
    }
    if meta.len() == 0 {
        return Found::Blank;
    }
    let mut head = [0u8; 16];
    let mut file = match std::fs::File::open(db) {
        Ok(file) => file,
        Err(e) => {
            return Found::Refused(format!(
                "cannot be read ({e}); check its permissions, or run as a user who may read it"
            ));
        }
    };
    if file.read_exact(&mut head).is_err() || &head != SQLITE_MAGIC {
        return Found::Refused(
            "is not an SQLite database (it does not start with SQLite's header); check --db (TRENDSYNC_DB)"
                .to_owned(),
        );
    }
    let contents = crate::sqlite::open_for_reading(db).and_then(|c| crate::schema::contents(&c));
    match contents {
        Ok(Contents::Trendsync) => Found::Ours,
        Ok(Contents::Empty) => Found::NoTables,
        Ok(Contents::Foreign) => Found::Refused(
            "is an SQLite database, but not trendsync's (none of its tables are there); trendsync reads and writes only its own database files: check --db (TRENDSYNC_DB), or give a new path"
                .to_owned(),
        ),
        Err(e) => match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                Found::Refused(format!(
                    "is damaged or truncated (SQLite: {e}); restore it from a backup, or check --db (TRENDSYNC_DB)"
                ))
            }
            Some(
                rusqlite::ErrorCode::CannotOpen
                | rusqlite::ErrorCode::PermissionDenied
                | rusqlite::ErrorCode::ReadOnly,
            ) => Found::Refused(format!(
                "cannot be read (SQLite: {e}); a user who may only read it needs its -wal and -shm files readable beside it, or a file nobody can write (then it is read as a snapshot)"
            )),
            _ => Found::Ours,
        },
    }
}

/// Refuses (78) a `--db` that does not exist, is not a regular file, or is not a
/// trendsync database, saying which and what to do. Looks without creating or
/// changing anything.
pub(crate) fn require(db: &Path) -> Result<()> {
    super::refuse_missing_directory(db)?;
    let refuse = |what: &str| -> Result<()> {
        Err(MissingConfig(format!("--db {}: {what}", db.display())).into())
    };
    match inspect(db) {
        Found::Nothing => refuse(&format!("no such file; {WHAT_TO_DO}")),
        Found::Blank => refuse(&format!(
            "is an empty file, not yet a trendsync database; {WHAT_TO_DO}"
        )),
        Found::NoTables => refuse(&format!(
            "is an empty SQLite database, not yet a trendsync database; {WHAT_TO_DO}"
        )),
        Found::Ours => Ok(()),
        Found::Refused(why) => refuse(&why),
    }
}

/// Refuses (78) a `--db` that a command which writes must not touch: anything but a
/// trendsync database, an empty SQLite file, or nothing (which it creates). Another
/// program's SQLite file is left byte for byte as it was.
pub(crate) fn refuse_foreign(db: &Path) -> Result<()> {
    match inspect(db) {
        Found::Refused(why) => Err(MissingConfig(format!("--db {}: {why}", db.display())).into()),
        Found::Nothing | Found::Blank | Found::NoTables | Found::Ours => Ok(()),
    }
}

/// Refuses (78) a `--db` that this user cannot write, for the commands that write: a
/// file it may not write, or a directory it may not create files in (the database
/// itself, or the `-wal` and `-shm` files SQLite keeps beside it), a read-only file
/// system included. Found by trying, without changing anything that is there: the file
/// is opened for writing and closed, and a probe file is created beside it and removed
/// at once. Any other failure is left to the command's own open, which says what it is.
pub(crate) fn refuse_unwritable(db: &Path) -> Result<()> {
    let refuse = |what: &str, e: std::io::Error| -> Result<()> {
        Err(MissingConfig(format!(
            "--db {}: this user cannot write {what} ({e}); the commands that write need the file and its directory (for the -wal and -shm files beside it) writable: run them as the database's owner, or give --db (TRENDSYNC_DB) a path this user can write",
            db.display()
        ))
        .into())
    };
    let denied = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
        )
    };
    if db.is_file()
        && let Err(e) = OpenOptions::new().read(true).write(true).open(db)
        && denied(&e)
    {
        return refuse("it", e);
    }
    // SQLite keeps the -wal and -shm beside the file a symbolic link points to.
    let real = crate::runner::lock::canonical(db);
    let db = real.as_path();
    // With both beside it already, SQLite creates nothing in the directory.
    let beside = |suffix: &str| crate::sqlite::beside(db, suffix).is_file();
    if db.is_file() && beside("-wal") && beside("-shm") {
        return Ok(());
    }
    let dir = crate::sqlite::directory_of(db);
    let probe = dir.join(format!(".trendsync-write-probe-{}", std::process::id()));
    match OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            if let Err(e) = std::fs::remove_file(&probe) {
                tracing::debug!("removing {}: {e}", probe.display());
            }
            Ok(())
        }
        Err(e) if denied(&e) => refuse(&format!("in its directory {}", dir.display()), e),
        Err(_) => Ok(()),
    }
}
