//! What the store, the embedded limiter and the journal share about the one SQLite
//! file they all live in: how a connection is opened, how long it waits for other
//! processes, and its journaling. Each of them opens its connection here, so that
//! every writer of the file behaves the same way under contention. What tables the
//! file holds, and at which version, is [`crate::schema`]'s: every writer migrates
//! through it right after opening here.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// How long a statement waits for another process's write lock before failing with
/// "database is locked". Every transaction on the file takes milliseconds, so 10 s is
/// only reached when something is badly stuck.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

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
pub fn open_for_writing(path: &Path, durability: Durability) -> Result<Connection, OpenError> {
    let conn = Connection::open(path).map_err(|source| OpenError::Sqlite {
        doing: "opening the file",
        source,
    })?;
    prepare_for_writing(conn, durability)
}

/// [`open_for_writing`], but a file that does not exist is an error rather than a new
/// empty database.
pub fn open_existing_for_writing(
    path: &Path,
    durability: Durability,
) -> Result<Connection, OpenError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| OpenError::Sqlite {
        doing: "opening the file",
        source,
    })?;
    prepare_for_writing(conn, durability)
}

fn prepare_for_writing(conn: Connection, durability: Durability) -> Result<Connection, OpenError> {
    let step = |doing: &'static str| move |source| OpenError::Sqlite { doing, source };
    // First, so that everything after it (the WAL switch included) waits for other
    // processes instead of failing at once.
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(step("setting the busy timeout"))?;
    let mode = enable_wal(&conn).map_err(step("switching to WAL journaling"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(OpenError::NoWal { mode });
    }
    let (synchronous, doing) = durability.pragma();
    conn.pragma_update(None, "synchronous", synchronous)
        .map_err(step(doing))?;
    conn.pragma_update(None, "foreign_keys", true)
        .map_err(step("enabling foreign keys"))?;
    Ok(conn)
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
pub fn open_for_reading(path: &Path) -> rusqlite::Result<Connection> {
    let conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(_) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?,
    };
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_a_wal_database_leaves_no_files_behind() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        {
            let conn = Connection::open(&path).expect("creating");
            conn.pragma_update(None, "journal_mode", "WAL")
                .expect("WAL");
            conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
                .expect("writing");
        }
        let before = std::fs::read(&path).expect("reading the file");
        {
            let conn = open_for_reading(&path).expect("opening");
            let n: i64 = conn
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .expect("reading");
            assert_eq!(n, 1);
            assert!(
                conn.execute("INSERT INTO t VALUES (2)", []).is_err(),
                "query_only refuses writes"
            );
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("listing")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        assert_eq!(names, vec!["t.db"]);
        assert_eq!(std::fs::read(&path).expect("reading the file"), before);
    }

    #[test]
    fn writers_opening_a_file_together_each_get_wal_and_their_own_durability() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let opened: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let path = &path;
                    s.spawn(move || {
                        let durability = if i % 2 == 0 {
                            Durability::Normal
                        } else {
                            Durability::Full
                        };
                        let conn = open_for_writing(path, durability)?;
                        let synchronous: i64 = conn
                            .query_row("PRAGMA synchronous", [], |r| r.get(0))
                            .map_err(|source| OpenError::Sqlite {
                                doing: "reading synchronous",
                                source,
                            })?;
                        Ok::<_, OpenError>((durability, synchronous))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panic"))
                .collect()
        });
        for result in opened {
            let (durability, synchronous) = result.expect("every writer opens");
            // 1 is NORMAL, 2 is FULL.
            let want = match durability {
                Durability::Normal => 1,
                Durability::Full => 2,
            };
            assert_eq!(synchronous, want, "{durability:?}");
        }
        let conn = open_for_reading(&path).expect("opening");
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .expect("reading the journal mode");
        assert_eq!(mode, "wal");
    }

    #[test]
    fn a_missing_file_is_not_created_by_the_existing_opener() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("absent.db");
        assert!(open_existing_for_writing(&path, Durability::Full).is_err());
        assert!(!path.exists());
    }
}
