//! One command's connection to the database file, opened once and shared by everything
//! that reads or writes the file in that command: the store, the embedded limiter, the
//! journal and the clock's skew record. Opening the file again for each of them would
//! check its schema again, cost an open each, and could meet a file that was swapped
//! meanwhile; one handle is also one identity (docs/architecture.md, "One context per
//! command").
//!
//! The connection sits behind a re-entrant lock: a store holds it for as long as it
//! lives (its guard is owned, so a store is a plain value), and the same thread may
//! take it again meanwhile (a store's method reading the skew record, say). Another
//! thread (the limiter's work, run off the async threads) waits its turn, so a store
//! is never kept across an `.await` that needs the file.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use parking_lot::lock_api::ArcReentrantMutexGuard;
use parking_lot::{RawMutex, RawThreadId, ReentrantMutex};
use rusqlite::Connection;

use super::{Durability, OpenError};
use crate::db_files::DbFiles;

/// The connection, held: dereferences to the [`Connection`].
pub type Held = ArcReentrantMutexGuard<RawMutex, RawThreadId, Connection>;

/// A command's one connection to the database file.
#[derive(Clone)]
pub struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    /// The file and its companions, which nothing the command writes may be.
    files: DbFiles,
    conn: Arc<ReentrantMutex<Connection>>,
    /// Whether the connection may write: off for a reader until something it does must
    /// write (the journal's replay), which [`Db::make_writable`] allows.
    writable: AtomicBool,
    /// Whether SQLite opened the file read-write (a file this user may write), so that
    /// [`Db::make_writable`] can work without opening it again.
    can_write: bool,
    /// The `synchronous` setting in force, as [`Durability::code`].
    synchronous: AtomicU8,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("path", &self.inner.path)
            .field("writable", &self.is_writable())
            .finish()
    }
}

impl Db {
    /// Opens (creating if needed) the file at `path` to read and write it, prepared as
    /// every writer of the file is ([`super::open_for_writing`]), committing with
    /// `synchronous=NORMAL` until a writer asks for more ([`Db::lock_durable`]).
    pub fn open_for_writing(path: &Path) -> Result<Db, OpenError> {
        let conn = super::open_for_writing(path, Durability::Normal)?;
        Ok(Db::writing(path, conn))
    }

    /// A connection that [`super::open_for_writing`] or its kin prepared.
    pub(crate) fn writing(path: &Path, conn: Connection) -> Db {
        Db::new(path, conn, true, true)
    }

    /// Opens the existing file at `path` only to read it ([`super::open_for_reading`]).
    pub fn open_for_reading(path: &Path) -> rusqlite::Result<Db> {
        let conn = super::open_for_reading(path)?;
        Ok(Db::reading(path, conn))
    }

    /// A connection that [`super::open_for_reading`] prepared (`query_only`).
    pub(crate) fn reading(path: &Path, conn: Connection) -> Db {
        let can_write = !conn.is_readonly("main").unwrap_or(true);
        Db::new(path, conn, false, can_write)
    }

    fn new(path: &Path, conn: Connection, writable: bool, can_write: bool) -> Db {
        Db {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                files: DbFiles::of(path),
                conn: Arc::new(ReentrantMutex::new(conn)),
                writable: AtomicBool::new(writable),
                can_write,
                synchronous: AtomicU8::new(Durability::Normal.code()),
            }),
        }
    }

    /// The path the file was opened by.
    pub(crate) fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The identity of the file and its companions, known from this open: what no
    /// path a command writes may be.
    pub(crate) fn files(&self) -> &DbFiles {
        &self.inner.files
    }

    /// Whether the connection may write.
    pub(crate) fn is_writable(&self) -> bool {
        self.inner.writable.load(Ordering::Acquire)
    }

    /// The connection, held until the guard is dropped.
    pub(crate) fn lock(&self) -> Held {
        self.inner.conn.lock_arc()
    }

    /// The connection, held, committing with `durability` from now on.
    pub(crate) fn lock_durable(&self, durability: Durability) -> rusqlite::Result<Held> {
        let held = self.lock();
        if self.is_writable() && self.inner.synchronous.load(Ordering::Acquire) != durability.code()
        {
            held.pragma_update(None, "synchronous", durability.pragma().0)?;
            self.inner
                .synchronous
                .store(durability.code(), Ordering::Release);
        }
        Ok(held)
    }

    /// Lets a connection opened to read write too, for a reader that must (the calls
    /// journalled while the limiter was down are replayed by whoever reads the budget
    /// next). A file opened read-only (one this user may not write) stays so: the error
    /// says why.
    pub(crate) fn make_writable(&self) -> Result<(), OpenError> {
        if self.is_writable() {
            return Ok(());
        }
        if !self.inner.can_write {
            return Err(OpenError::Sqlite {
                doing: "opening the file to write",
                source: rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_READONLY),
                    Some("the file was opened read-only".to_owned()),
                ),
            });
        }
        let held = self.lock();
        held.pragma_update(None, "query_only", false)
            .map_err(|source| OpenError::Sqlite {
                doing: "allowing writes",
                source,
            })?;
        super::prepare_connection(&held, Durability::Normal)?;
        self.inner.writable.store(true, Ordering::Release);
        Ok(())
    }
}

/// The first 100 bytes of the file behind `conn`, SQLite's header, read through the
/// handle SQLite opened and before anything reads the file through SQLite: no lock
/// taken, no `-wal` or `-shm` opened, nothing written. This is how a file is judged
/// before a single page of it is trusted (whose it is, from its application id) with
/// the one open of the command. A file shorter than the header reads as zeros past its
/// end.
pub(crate) fn raw_header(conn: &Connection) -> rusqlite::Result<[u8; 100]> {
    use std::ffi::c_void;
    let mut header = [0u8; 100];
    let mut file: *mut rusqlite::ffi::sqlite3_file = std::ptr::null_mut();
    // SAFETY: `conn.handle()` is the live connection's handle, used only during this
    // call while `conn` is borrowed. SQLITE_FCNTL_FILE_POINTER writes the main
    // database's `sqlite3_file*` (owned by SQLite, valid while the connection is open)
    // into `file`; its methods are SQLite's own VFS, whose `xRead` reads `header.len()`
    // bytes into `header` at offset 0 and zero-fills a short read.
    let rc = unsafe {
        let handle = conn.handle();
        let found = rusqlite::ffi::sqlite3_file_control(
            handle,
            c"main".as_ptr(),
            rusqlite::ffi::SQLITE_FCNTL_FILE_POINTER,
            (&raw mut file).cast::<c_void>(),
        );
        if found != rusqlite::ffi::SQLITE_OK || file.is_null() || (*file).pMethods.is_null() {
            rusqlite::ffi::SQLITE_NOTFOUND
        } else {
            match (*(*file).pMethods).xRead {
                Some(read) => read(
                    file,
                    header.as_mut_ptr().cast::<c_void>(),
                    header.len() as i32,
                    0,
                ),
                None => rusqlite::ffi::SQLITE_NOTFOUND,
            }
        }
    };
    if rc == rusqlite::ffi::SQLITE_OK || rc == rusqlite::ffi::SQLITE_IOERR_SHORT_READ {
        Ok(header)
    } else {
        Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rc),
            Some("reading the file's header".to_owned()),
        ))
    }
}

/// The application id in a header read by [`raw_header`] (bytes 68 to 71, big-endian).
pub(crate) fn application_id(header: &[u8; 100]) -> u32 {
    u32::from_be_bytes([header[68], header[69], header[70], header[71]])
}

/// Opens the file at `path` so that reading it changes nothing, in it or beside it,
/// whoever's it is: with a `-wal` beside it, read-only and with its `-shm` only read
/// (SQLite then reads the WAL into memory instead of sharing the index); without one,
/// as an immutable file. For judging a file not yet known to be trendsync's; `None`
/// when that cannot be done without writing (a `-wal` with no `-shm` beside it).
pub(crate) fn open_untouched(path: &Path) -> rusqlite::Result<Option<Connection>> {
    let wal = matches!(super::beside(path, "-wal").try_exists(), Ok(true));
    let shm = matches!(super::beside(path, "-shm").try_exists(), Ok(true));
    let query = match (wal, shm) {
        (false, _) => "immutable=1",
        (true, true) => "mode=ro&readonly_shm=1",
        (true, false) => return Ok(None),
    };
    let conn = super::open_read_only_uri(path, query)?;
    Ok(Some(conn))
}
