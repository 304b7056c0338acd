//! What the commands require of `--db`: the read-only ones, a trendsync database that
//! exists; the ones that write, nothing there yet or a file trendsync may write.
//!
//! Those commands answer from the file alone, so a typo in `--db` would otherwise show
//! an empty world (no runs, a whole budget, every region stale) and exit 0. They also
//! create nothing (docs/commands.md): SQLite would make a new empty file of a name that
//! does not exist.

use std::fs::OpenOptions;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::Connection;

use crate::error::MissingConfig;
use crate::schema::Contents;
use crate::sqlite::Db;

/// What to do about a `--db` that holds no trendsync database yet.
const WHAT_TO_DO: &str = "run `trendsync run` first to create it, or check --db (TRENDSYNC_DB)";

/// The first bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// What `--db` names, as far as can be told without creating or changing anything.
pub(crate) enum Found {
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

/// trendsync's application id in the SQLite header (bytes 68 to 71): `trnd`. Every
/// file a writer of this build opens carries it, so that a later command knows the file
/// for its own from the header alone, before reading a page of it.
pub(crate) const APPLICATION_ID: u32 = u32::from_be_bytes(*b"trnd");

/// The command's database, as its one open found it.
pub(crate) struct Opened {
    /// What the path held.
    pub found: Found,
    /// The command's connection; none when there was no file to read, or an empty one.
    pub db: Option<Db>,
}

/// Opens `--db` once for the command, judging it first with that same open: what the
/// path is, by its metadata; whose file it is, by the application id in the header
/// SQLite read when it opened the file, before a page of it is read. A file that does
/// not carry trendsync's id (another program's, or one no writer of this build has
/// opened yet) is looked at through a connection that can change nothing in it or
/// beside it, and opened for the command only once it proves to be trendsync's.
///
/// A file that is refused is left byte for byte as it was, its `-wal` and `-shm` with
/// it. A reader gets no connection for a missing or empty file; a writer creates it,
/// unless it must not (`create`: `prune` changes a database, and makes none).
pub(crate) fn open(db: &Path, writes: bool, create: bool) -> Result<Opened> {
    let refuse = |why: String| -> anyhow::Error {
        MissingConfig(format!("--db {}: {why}", db.display())).into()
    };
    let found = match look(db) {
        Found::Refused(why) => return Err(refuse(why)),
        found => found,
    };
    if (!writes && matches!(found, Found::Nothing | Found::Blank))
        || (!create && matches!(found, Found::Nothing))
    {
        return Ok(Opened { found, db: None });
    }
    let exists = !matches!(found, Found::Nothing);
    if writes && !exists {
        refuse_unwritable(db)?;
    }
    let conn = crate::sqlite::open_plain(db, !exists).map_err(|e| refuse(unusable(&e)))?;
    let (found, conn) = if exists && !matches!(found, Found::Blank) {
        judge(db, conn).map_err(refuse)?
    } else {
        (found, conn)
    };
    if !writes {
        let conn =
            crate::sqlite::prepare_for_reading(db, conn).map_err(|e| refuse(unusable(&e)))?;
        return Ok(Opened {
            found,
            db: Some(Db::reading(db, conn)),
        });
    }
    if conn.is_readonly("main").unwrap_or(false) {
        return Err(refuse(format!(
            "this user cannot write it (Permission denied: SQLite could open it only to read); {WRITERS_NEED}"
        )));
    }
    // Before SQLite creates its -wal and -shm beside the file.
    if exists {
        refuse_unwritable(db)?;
    }
    let conn = crate::sqlite::prepare_for_writing(conn, crate::sqlite::Durability::Normal)
        .map_err(|e| match e {
            crate::sqlite::OpenError::Sqlite { source, .. } => refuse(unusable(&source)),
            e => anyhow::Error::new(e).context(format!("opening the database {}", db.display())),
        })?;
    mark(&conn).with_context(|| format!("marking {} as trendsync's database", db.display()))?;
    // Whatever was there, it is now a database this command may write.
    Ok(Opened {
        found: Found::Ours,
        db: Some(Db::writing(db, conn)),
    })
}

/// Gives the file trendsync's application id, unless it has it: a write, so only once.
fn mark(conn: &Connection) -> rusqlite::Result<()> {
    let id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    // The header holds the id as a signed 32-bit integer.
    let ours = i32::from_be_bytes(APPLICATION_ID.to_be_bytes());
    if id != ours {
        // PRAGMA takes no bound parameters; the value is our own constant.
        conn.execute_batch(&format!("PRAGMA application_id = {ours}"))?;
    }
    Ok(())
}

/// What the commands that write need of the path, said when they cannot write it.
const WRITERS_NEED: &str = "the commands that write need the file and its directory (for the -wal and -shm files beside it) writable: run them as the database's owner, or give --db (TRENDSYNC_DB) a path this user can write";

/// Why SQLite could not open or read the file, in its words, with what to do.
fn unusable(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
            format!(
                "is damaged or truncated (SQLite: {e}); restore it from a backup, or check --db (TRENDSYNC_DB)"
            )
        }
        Some(
            rusqlite::ErrorCode::CannotOpen
            | rusqlite::ErrorCode::PermissionDenied
            | rusqlite::ErrorCode::ReadOnly,
        ) => format!(
            "cannot be read (SQLite: {e}); a user who may only read it needs its -wal and -shm files readable beside it, or a file nobody can write (then it is read as a snapshot)"
        ),
        _ => format!(
            "cannot be opened (SQLite: {e}); check its permissions and those of its directory, or run as a user who may read it"
        ),
    }
}

/// Looks at `db`'s metadata: what a path that is no database file holds.
fn look(db: &Path) -> Found {
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
    Found::Ours
}

/// Whose file `conn` opened, by its header: trendsync's id, or else its tables, read
/// without changing anything. Returns the connection to go on with: `conn` itself, or
/// one opened again once the file proved to be trendsync's (a file no writer of this
/// build has opened yet; the next writer marks it).
fn judge(db: &Path, conn: Connection) -> Result<(Found, Connection), String> {
    let header = crate::sqlite::raw_header(&conn).map_err(|e| {
        format!("cannot be read ({e}); check its permissions, or run as a user who may read it")
    })?;
    if &header[..SQLITE_MAGIC.len()] != SQLITE_MAGIC {
        return Err(
            "is not an SQLite database (it does not start with SQLite's header); check --db (TRENDSYNC_DB)"
                .to_owned(),
        );
    }
    if crate::sqlite::application_id(&header) == APPLICATION_ID {
        return Ok((Found::Ours, conn));
    }
    // Closed before anything read a page: SQLite has taken no lock and opened nothing
    // beside the file, so closing changes nothing either.
    drop(conn);
    let contents = crate::sqlite::open_untouched(db)
        .and_then(|c| c.map(|c| crate::schema::contents(&c)).transpose());
    let found = match contents {
        Ok(Some(Contents::Trendsync) | None) => Found::Ours,
        Ok(Some(Contents::Empty)) => Found::NoTables,
        Ok(Some(Contents::Foreign)) => return Err(
            "is an SQLite database, but not trendsync's (none of its tables are there); trendsync reads and writes only its own database files: check --db (TRENDSYNC_DB), or give a new path"
                .to_owned(),
        ),
        Err(e) => match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                return Err(unusable(&e));
            }
            // Not readable without writing (a file another process is creating, say):
            // the open that follows says what it finds.
            _ => Found::Ours,
        },
    };
    let conn = crate::sqlite::open_plain(db, false).map_err(|e| unusable(&e))?;
    Ok((found, conn))
}

/// Refuses (78) what a command that must read an existing database found instead: no
/// file, an empty one, or an SQLite file with no tables yet, saying what to do.
pub(crate) fn require(db: &Path, found: &Found) -> Result<()> {
    let refuse = |what: &str| -> Result<()> {
        Err(MissingConfig(format!("--db {}: {what}", db.display())).into())
    };
    match found {
        Found::Nothing => refuse(&format!("no such file; {WHAT_TO_DO}")),
        Found::Blank => refuse(&format!(
            "is an empty file, not yet a trendsync database; {WHAT_TO_DO}"
        )),
        Found::NoTables => refuse(&format!(
            "is an empty SQLite database, not yet a trendsync database; {WHAT_TO_DO}"
        )),
        Found::Ours => Ok(()),
        Found::Refused(why) => refuse(why),
    }
}

/// Refuses (78) a `--db` that this user cannot write, for the commands that write: a
/// file it may not write, or a directory it may not create files in (the database
/// itself, or the `-wal` and `-shm` files SQLite keeps beside it), a read-only file
/// system included. Found by trying, without changing anything that is there: a probe
/// file is created beside it and removed at once (the file itself is judged by the
/// command's one open, [`open`]). Any other failure is left to that open, which says
/// what it is.
pub(crate) fn refuse_unwritable(db: &Path) -> Result<()> {
    let refuse = |what: &str, e: std::io::Error| -> Result<()> {
        Err(MissingConfig(format!(
            "--db {}: this user cannot write {what} ({e}); {WRITERS_NEED}",
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
