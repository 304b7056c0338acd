//! What the store, the embedded limiter and the journal share about the one SQLite
//! file they all live in: how a connection is opened, how long it waits for other
//! processes, its journaling, and how the file's schema moves forward. Each of them
//! opens its connection here, so that every writer of the file behaves the same way
//! under contention.
//!
//! The schema: every table in the file, whoever owns it, comes from one append-only
//! list of steps ([`Migration`]), and `PRAGMA user_version` is how many of them the
//! file has had. This module only applies a list; it knows no owner. Each owner writes
//! its own steps beside its code (`store/schema.rs`, `quota/schema.rs`), and the
//! file's list is composed once, above them (`crate::schema`), and passed down to
//! every opener. The store brings the file up through the whole list ([`migrate`]);
//! the limiter and the journal run only their own steps ([`migrate_own`]). An open
//! that only reads never migrates: it refuses a file newer than its list
//! ([`check_readable`]) and otherwise reads what is there.
//!
//! Steps are append-only: a step that shipped is never edited, a change is a new step.
//! The pending steps run in one `BEGIN IMMEDIATE` transaction that also bumps
//! `user_version`, so a crash leaves the file at the version it had, or at the latest:
//! never between two steps.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

mod db;

pub use db::{Db, Held};
pub(crate) use db::{application_id, open_untouched, raw_header};

/// How long a statement waits for another process's write lock before failing with
/// "database is locked". Every transaction on the file takes milliseconds, so 10 s is
/// only reached when something is badly stuck.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How much a commit survives. In WAL mode neither setting can corrupt the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=NORMAL`: a crash loses nothing committed; a power cut may lose the
    /// last commits. For what the next run can fetch again.
    Normal,
    /// `synchronous=FULL`: a commit is on disk before it returns, power cut or not.
    /// For rows that are the only trace of something that cannot be redone.
    Full,
}

impl Durability {
    fn pragma(self) -> (&'static str, &'static str) {
        match self {
            Durability::Normal => ("NORMAL", "setting synchronous=NORMAL"),
            Durability::Full => ("FULL", "setting synchronous=FULL"),
        }
    }

    fn code(self) -> u8 {
        match self {
            Durability::Normal => 1,
            Durability::Full => 2,
        }
    }
}

/// Why a connection for writing could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// One step of opening failed; `doing` names it.
    #[error("{doing}")]
    Sqlite {
        doing: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite would not switch the file to WAL journaling (e.g. a network file system
    /// without shared memory). Without WAL, concurrent processes would block each
    /// other's reads, so the file is refused rather than used degraded.
    #[error(
        "the database cannot use WAL journaling (SQLite kept journal_mode={mode}); \
         keep it on a local file system"
    )]
    NoWal { mode: String },
}

/// Opens (creating if needed) the database at `path` to read and write it: waits up
/// to [`BUSY_TIMEOUT`] for other processes, journals in WAL mode, commits with
/// `durability`, and enforces foreign keys.
pub(crate) fn open_for_writing(
    path: &Path,
    durability: Durability,
) -> Result<Connection, OpenError> {
    let conn = Connection::open(path).map_err(|source| OpenError::Sqlite {
        doing: "opening the file",
        source,
    })?;
    prepare_for_writing(conn, durability)
}

/// Prepares `conn` to write as every writer of the file is: see [`open_for_writing`].
pub(crate) fn prepare_for_writing(
    conn: Connection,
    durability: Durability,
) -> Result<Connection, OpenError> {
    prepare_connection(&conn, durability)?;
    Ok(conn)
}

fn prepare_connection(conn: &Connection, durability: Durability) -> Result<(), OpenError> {
    let step = |doing: &'static str| move |source| OpenError::Sqlite { doing, source };
    // First, so that everything after it (the WAL switch included) waits for other
    // processes instead of failing at once.
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(step("setting the busy timeout"))?;
    let mode = enable_wal(conn).map_err(step("switching to WAL journaling"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::NoWal { mode });
    }
    let (synchronous, doing) = durability.pragma();
    conn.pragma_update(None, "synchronous", synchronous)
        .map_err(step(doing))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(step("enabling foreign keys"))?;
    Ok(())
}

/// `PRAGMA journal_mode=WAL`, retried while another connection holds a lock.
///
/// Changing the journal mode needs an exclusive lock, and SQLite returns SQLITE_BUSY
/// for it without consulting the busy handler when that could deadlock, which is
/// exactly what happens when several processes open a fresh file at once. Every
/// writer of the file goes through here, so none of them fails on that race.
fn enable_wal(conn: &Connection) -> rusqlite::Result<String> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(2);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0)) {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// Opens an existing database so that it is left exactly as found. A connection opened
/// with SQLITE_OPEN_READ_ONLY on a WAL database creates `-wal` and `-shm` files it then
/// cannot remove; a read-write connection that never writes (`query_only`) removes
/// them again when it closes. Only a file this user cannot write falls back to
/// SQLITE_OPEN_READ_ONLY.
///
/// A WAL database read with SQLITE_OPEN_READ_ONLY still needs its `-shm` file, or a
/// directory to create it in: a file in a directory this user may only read (a
/// snapshot, a health-check account) fails its first read. Such a file is opened
/// `immutable` instead, which skips the locks and the WAL, but only when that cannot
/// misread it: no `-wal` beside it (every write is in the file itself) and no write
/// permission on it for anyone (nobody can change it while it is read).
pub(crate) fn open_for_reading(path: &Path) -> rusqlite::Result<Connection> {
    prepare_for_reading(path, open_plain(path, false)?)
}

/// Opens the file at `path` and does nothing else: SQLite has read its header, and
/// taken no lock, opened no `-wal` or `-shm` and written nothing, so the file can still
/// be judged ([`db::raw_header`]) before it is read or written. Read-write when this user
/// may write it (SQLite opens a file it may not write read-only even when asked for
/// read-write), else read-only; with `create`, a missing file is created empty.
pub(crate) fn open_plain(path: &Path, create: bool) -> rusqlite::Result<Connection> {
    let create = if create {
        OpenFlags::SQLITE_OPEN_CREATE
    } else {
        OpenFlags::empty()
    };
    match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX | create,
    ) {
        Ok(conn) => Ok(conn),
        Err(_) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        ),
    }
}

/// Prepares a connection from [`open_plain`] to read: see [`open_for_reading`].
pub(crate) fn prepare_for_reading(path: &Path, conn: Connection) -> rusqlite::Result<Connection> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // A real read of the schema: opening reads nothing, and the header alone
    // (`user_version`) is read without the WAL index, so neither shows what fails.
    let conn = match read_schema(&conn) {
        Ok(()) => conn,
        Err(e) if frozen(path) => {
            drop(conn);
            open_immutable(path).map_err(|_| e)?
        }
        Err(e) => return Err(e),
    };
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

/// Reads the schema table, which a WAL database cannot answer without its index.
fn read_schema(conn: &Connection) -> rusqlite::Result<()> {
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
        r.get::<_, i64>(0)
    })
    .map(drop)
}

/// The directory the database at `path` is in (`.` for a bare file name).
pub(crate) fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// The file SQLite keeps beside the database at `path`: `suffix` is `-wal` or `-shm`.
pub(crate) fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Whether nobody can change the file at `path`: no write permission for anyone, and no
/// `-wal` beside it holding writes not yet in the file.
fn frozen(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let unwritable = std::fs::metadata(path)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o222 == 0);
        unwritable && matches!(beside(path, "-wal").try_exists(), Ok(false))
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Opens `path` as an immutable database (`?immutable=1`): no locks, no WAL.
fn open_immutable(path: &Path) -> rusqlite::Result<Connection> {
    let conn = open_read_only_uri(path, "immutable=1")?;
    read_schema(&conn)?;
    Ok(conn)
}

/// Opens `path` read-only as a URI with `query` (SQLite's URI parameters).
fn open_read_only_uri(path: &Path, query: &str) -> rusqlite::Result<Connection> {
    let absolute = std::fs::canonicalize(path)
        .map_err(|_| rusqlite::Error::InvalidPath(path.to_path_buf()))?;
    let mut uri = url::Url::from_file_path(&absolute)
        .map_err(|()| rusqlite::Error::InvalidPath(path.to_path_buf()))?;
    uri.set_query(Some(query));
    Connection::open_with_flags(
        uri.as_str(),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
}

/// One forward step of the schema.
#[derive(Clone, Copy)]
pub(crate) struct Migration {
    /// What the step does, for logs.
    pub(crate) description: &'static str,
    pub(crate) sql: &'static str,
    /// Code run after `sql` in the same transaction, for a step that moves data in a
    /// way one SQL batch cannot do at speed or with progress shown, or that depends on
    /// what an older file holds.
    pub(crate) data: Option<DataStep>,
}

/// A migration step's data part: runs inside the step's transaction.
pub(crate) type DataStep = fn(&Connection) -> Result<(), StepError>;

pub(crate) fn version_of(migrations: &[Migration]) -> u32 {
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

/// The version of the file at `path`, refused when newer than `latest`.
fn readable_version(conn: &Connection, path: &Path, latest: u32) -> Result<u32, SchemaError> {
    let found = user_version(conn).map_err(|e| step_failed(path, latest, e.into()))?;
    check_readable(path, found, latest)?;
    Ok(found)
}

fn step_failed(path: &Path, to_version: u32, source: StepError) -> SchemaError {
    SchemaError::Step {
        path: path.to_path_buf(),
        to_version,
        source,
    }
}

/// Brings the file at `path` up to `migrations.len()`, every pending step in one
/// transaction. The store calls this with the file's list right after opening it; tests
/// pass shorter or longer lists.
///
/// Safe with several processes opening a file at once, whichever of the store, the
/// limiter and the journal they are (see [`migrate_own`]): the upgrade takes the write
/// lock (`BEGIN IMMEDIATE`, which waits out the busy timeout) and re-reads the version
/// inside it,
/// so steps another process has just applied are not applied twice. Returns the
/// version the file was at before.
pub(crate) fn migrate(
    conn: &Connection,
    path: &Path,
    migrations: &[Migration],
) -> Result<u32, SchemaError> {
    let latest = version_of(migrations);
    let failed = |to_version: u32| move |source| step_failed(path, to_version, source);
    let before = readable_version(conn, path, latest)?;
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

impl Migration {
    /// Whether `other` is this step (steps are constants; their text tells them apart).
    fn is(&self, other: &Migration) -> bool {
        self.description == other.description && self.sql == other.sql
    }
}

/// The version at which every step of `own` is in a file laid out by `file`: the
/// position of the last of them, 0 when `file` holds none. A reader of `own`'s tables
/// needs the file that far and no further.
pub(crate) fn version_after(file: &[Migration], own: &[Migration]) -> u32 {
    let steps = file
        .iter()
        .rposition(|m| own.iter().any(|o| o.is(m)))
        .map_or(0, |at| at + 1);
    version_of(&file[..steps])
}

/// For an opener that must not run other owners' steps: the limiter and the journal,
/// which open the file inside `budget charge`, where a data step of the store's (which
/// may take minutes on a year's file) must never run. Brings the file at `path`, laid
/// out by `file`, far enough for the tables of `own`:
/// - a file at version 0 (new, or written only by builds that did not version it)
///   holds none of the store's tables, so no step has rows to move: it is brought up
///   whole, as [`migrate`] does, and its version says so;
/// - any other file gets only the steps of `own` it has not had, ahead of the others,
///   in one `BEGIN IMMEDIATE` transaction, and keeps its `user_version`, which stays
///   honest: the steps before them have not run. When the store brings the file up, it
///   runs them again in their place, so a step an owner runs ahead must be harmless
///   to run twice (tables `IF NOT EXISTS`, columns added when missing) and must only
///   create or add to its own tables.
///
/// Refuses a file newer than `file` as [`migrate`] does. Returns the version the file
/// was at.
pub(crate) fn migrate_own(
    conn: &Connection,
    path: &Path,
    file: &[Migration],
    own: &[Migration],
) -> Result<u32, SchemaError> {
    let latest = version_of(file);
    let before = readable_version(conn, path, latest)?;
    if before == 0 {
        return migrate(conn, path, file);
    }
    let needed = version_after(file, own);
    if before >= needed {
        return Ok(before);
    }
    let ahead = (|| -> Result<(), (u32, StepError)> {
        let early = |e: rusqlite::Error| (needed, StepError::from(e));
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
            .map_err(early)?;
        let current = user_version(&tx).map_err(early)?;
        let pending = file
            .iter()
            .enumerate()
            .skip(current as usize)
            .filter(|(_, m)| own.iter().any(|o| o.is(m)));
        for (at, migration) in pending {
            let version = version_of(&file[..=at]);
            // Debug only: until the store brings the file up, every open runs it again.
            tracing::debug!(
                version,
                description = migration.description,
                "bringing these tables forward ahead of the file's other steps"
            );
            let failed_at = |e: StepError| (version, e);
            tx.execute_batch(migration.sql)
                .map_err(|e| failed_at(e.into()))?;
            if let Some(data) = migration.data {
                data(&tx).map_err(failed_at)?;
            }
        }
        tx.commit().map_err(early)
    })();
    ahead.map_err(|(version, source)| step_failed(path, version, source))?;
    Ok(before)
}

#[cfg(test)]
mod tests;
