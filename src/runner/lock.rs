//! One process at a time per region on a host, `prune --vacuum` against the commands
//! that write, and whether a run's process is still alive: all told by advisory locks on
//! byte ranges of one hidden file beside the database, `.NAME.lock` (docs/architecture.md,
//! "Locks"). One byte per region (from its two letters), one for maintenance, one per run
//! (from a hash of its id, past every region's).
//!
//! The locks are open-file-description locks (`F_OFD_SETLK`): each belongs to the open
//! file it was taken through and goes when that is closed, never when some other
//! descriptor of the same file is (which drops classic POSIX record locks). Each held
//! lock opens the file afresh, so two in one process exclude each other as two processes
//! do. The kernel drops them when the process ends, however it ends, so a `kill -9`
//! leaves no stuck lock; the file stays, empty, and is the only one.
//!
//! A run holds a lock of its own as well: a `running` row whose run lock is free was
//! left by a process that died, and the next run marks it abandoned.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::db_files::{DbFiles, Overwrite};
use crate::store::Store;

/// Taking a lock failed, or was refused.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// What is at the lock's path is the database or one of its companions, through a
    /// link someone made: opening it to lock would write there (exit 78).
    #[error(transparent)]
    Refused(#[from] Overwrite),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The database's one name: symbolic links and other spellings (`./`, `..`) of the
/// path resolved, so that every name of one file shares its locks (docs/schema.md). A
/// file not created yet is named by its directory's canonical path.
pub fn canonical(db: &Path) -> PathBuf {
    if let Ok(path) = std::fs::canonicalize(db) {
        return path;
    }
    let dir = crate::sqlite::directory_of(db);
    match (std::fs::canonicalize(dir), db.file_name()) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => db.to_path_buf(),
    }
}

/// The one lock file of the database at `db`: `.trendsync.db.lock` beside
/// `trendsync.db`, hidden from `ls` and from shell completion.
pub fn lock_path(db: &Path) -> PathBuf {
    let db = &canonical(db);
    let mut name = std::ffi::OsString::from(".");
    name.push(db.file_name().unwrap_or("trendsync.db".as_ref()));
    name.push(".lock");
    db.with_file_name(name)
}

/// Refuses a lock file that is the database `db` or one of its companions, through a
/// link someone made: opening it to lock would write there (78).
pub fn refuse_linked(db: &DbFiles) -> Result<(), Overwrite> {
    db.refuse_write(&lock_path(db.path()), "the lock file")
}

/// What a byte of the lock file stands for.
#[derive(Debug, Clone, Copy)]
pub enum Range<'a> {
    /// `prune --vacuum` (exclusive) against the commands that write (shared).
    Maintenance,
    /// One region's fetch.
    Region(&'a str),
    /// A run's process being alive.
    Run(&'a str),
}

/// Where regions other than two ASCII letters go (none passes the configuration; kept
/// apart from the letters' bytes all the same).
const OTHER_REGIONS: i64 = 1 << 12;
/// Where runs go: past every region.
const RUNS: i64 = 1 << 32;

impl Range<'_> {
    /// The byte's offset: stable across versions and processes, as every process on the
    /// host must agree on it.
    pub fn offset(self) -> i64 {
        match self {
            Range::Maintenance => 0,
            Range::Region(code) => match code.as_bytes() {
                [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => {
                    let letter = |c: &u8| i64::from(c.to_ascii_uppercase() - b'A');
                    1 + letter(a) * 26 + letter(b)
                }
                _ => OTHER_REGIONS + stable_hash(code, 1 << 20),
            },
            // A collision only makes a dead run look alive while the other one runs.
            Range::Run(id) => RUNS + stable_hash(id, 1 << 31),
        }
    }
}

/// FNV-1a of `text` below `below`: the same in every build, unlike std's hasher.
fn stable_hash(text: &str, below: u64) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    i64::try_from(h % below).unwrap_or(0)
}

/// A held lock on one byte of the lock file; released when dropped (its open file
/// description closed).
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// Opens the lock file afresh (a new open file description), creating it empty.
pub fn open(db: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(lock_path(db))
}

/// Shared (many holders) or exclusive (one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

/// Takes `range` through `file` if nobody holds it against `mode`: `Ok(Err(file))`,
/// the file given back, when someone does.
pub fn try_take(file: File, range: Range<'_>, mode: Mode) -> std::io::Result<Result<Held, File>> {
    match ofd::set(&file, range.offset(), mode, false) {
        Ok(()) => Ok(Ok(Held { _file: file })),
        Err(e) if ofd::is_contended(&e) => Ok(Err(file)),
        Err(e) => Err(e),
    }
}

/// Takes `range` through `file`, waiting as long as others hold it against `mode`.
pub fn take(file: File, range: Range<'_>, mode: Mode) -> std::io::Result<Held> {
    ofd::set(&file, range.offset(), mode, true)?;
    Ok(Held { _file: file })
}

/// A held region lock; released on drop.
pub type RegionLock = Held;

/// Takes the region's lock if no other process (or open file) holds it: `Ok(None)`
/// when one does.
pub fn try_lock(db: &DbFiles, region: &str) -> Result<Option<RegionLock>, LockError> {
    refuse_linked(db)?;
    let file = open(db.path())?;
    Ok(try_take(file, Range::Region(region), Mode::Exclusive)?.ok())
}

/// Held by a run from before its `running` row is written until after its outcome is:
/// a `running` row whose run lock is free belongs to a process that died, so the next
/// process may mark it `abandoned` (docs/schema.md). Taking the lock before the row
/// exists is what keeps a live run from ever looking dead.
pub type RunLock = Held;

/// Takes the lock of a new run.
pub fn lock_run(db: &DbFiles, run_id: &str) -> Result<RunLock, LockError> {
    refuse_linked(db)?;
    let file = open(db.path())?;
    Ok(take(file, Range::Run(run_id), Mode::Exclusive)?)
}

/// Whether the process of run `run_id` is still alive on this host: its lock is held.
/// Creates nothing and takes nothing; no lock file means no run holds a lock.
pub fn run_is_alive(db: &Path, run_id: &str) -> std::io::Result<bool> {
    let file = match File::open(lock_path(db)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    ofd::is_held(&file, Range::Run(run_id).offset())
}

/// The system calls: open-file-description locks on one byte.
mod ofd {
    use super::*;

    #[cfg(any(target_os = "linux", target_os = "android"))]
    use libc::{F_OFD_GETLK as GETLK, F_OFD_SETLK as SETLK, F_OFD_SETLKW as SETLKW};
    // Elsewhere the classic record locks, whose weakness (any close of the file in the
    // process drops them) the one-open-file-per-lock habit here does not meet: trendsync
    // ships for Linux (docs/architecture.md, "Locks").
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    use libc::{F_GETLK as GETLK, F_SETLK as SETLK, F_SETLKW as SETLKW};

    fn request(offset: i64, kind: libc::c_int) -> libc::flock {
        // SAFETY: `flock` is a plain C struct of integers, for which all zeroes is a
        // valid value (and `l_pid` must be 0 for open-file-description locks).
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = kind as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = offset;
        fl.l_len = 1;
        fl
    }

    fn fcntl(file: &File, cmd: libc::c_int, fl: &mut libc::flock) -> std::io::Result<()> {
        loop {
            // SAFETY: the descriptor is `file`'s, open while borrowed; `fl` is a valid,
            // exclusively borrowed `flock` that the call reads and (for GETLK) writes.
            let rc = unsafe { libc::fcntl(file.as_raw_fd(), cmd, std::ptr::from_mut(fl)) };
            if rc != -1 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    pub(super) fn set(file: &File, offset: i64, mode: Mode, wait: bool) -> std::io::Result<()> {
        let kind = match mode {
            Mode::Shared => libc::F_RDLCK,
            Mode::Exclusive => libc::F_WRLCK,
        };
        fcntl(
            file,
            if wait { SETLKW } else { SETLK },
            &mut request(offset, kind),
        )
    }

    /// Whether someone holds any lock on the byte at `offset`.
    pub(super) fn is_held(file: &File, offset: i64) -> std::io::Result<bool> {
        let mut fl = request(offset, libc::F_WRLCK);
        fcntl(file, GETLK, &mut fl)?;
        Ok(libc::c_int::from(fl.l_type) != libc::F_UNLCK)
    }

    pub(super) fn is_contended(e: &std::io::Error) -> bool {
        matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EACCES))
    }
}

/// Marks the runs a dead process left `running` as `abandoned`: those whose run lock
/// nobody holds. Never fails the command: the history is only bookkeeping.
pub fn mark_abandoned(store: &Store, db: &Path) {
    let running = match store.running_runs() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("{e}; runs left by killed processes stay `running` for now");
            return;
        }
    };
    for r in running {
        match run_is_alive(db, &r.run_id) {
            Ok(true) => {}
            Ok(false) => match store.abandon_run(&r.run_id) {
                Ok(true) => {
                    tracing::warn!(
                        run_id = %r.run_id,
                        status = "abandoned",
                        "{} {} started at {} was left running by a process that died; marked abandoned",
                        r.kind.as_str(),
                        r.run_id,
                        crate::output::human::timestamp_s(r.started_at)
                    );
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(run_id = %r.run_id, "{e}"),
            },
            Err(e) => tracing::warn!(
                run_id = %r.run_id,
                "cannot tell whether run {} is alive from {}: {e}",
                r.run_id,
                lock_path(db).display()
            ),
        }
    }
}

#[cfg(test)]
mod tests;
