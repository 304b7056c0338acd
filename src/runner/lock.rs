//! One process at a time per region on a host: an advisory lock file per region
//! beside the database. The kernel drops the lock when the process ends, however it
//! ends, so a `kill -9` leaves no stuck lock.
//!
//! A run holds a lock of its own as well: a `running` row whose run lock is free was
//! left by a process that died, and the next run marks it abandoned.

use std::fs::{File, OpenOptions, TryLockError};
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

/// A held region lock; released on drop.
#[derive(Debug)]
pub struct RegionLock {
    _file: File,
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

/// The lock file of `region` for the database at `db`.
pub fn lock_path(db: &Path, region: &str) -> PathBuf {
    let db = &canonical(db);
    let mut name = db
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "trendsync.db".into());
    name.push(format!(".{region}.lock"));
    db.with_file_name(name)
}

/// Refuses a region's lock file that is the database `db` or one of its companions.
pub fn refuse_region_lock(db: &DbFiles, region: &str) -> Result<(), Overwrite> {
    db.refuse_write(
        &lock_path(db.path(), region),
        &format!("the lock file of region {region}"),
    )
}

/// Takes the region's lock if no other process holds it: `Ok(None)` when one does.
pub fn try_lock(db: &DbFiles, region: &str) -> Result<Option<RegionLock>, LockError> {
    refuse_region_lock(db, region)?;
    let path = lock_path(db.path(), region);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(RegionLock { _file: file })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Held by a run from before its `running` row is written until after its outcome is:
/// a `running` row whose run lock is free belongs to a process that died, so the next
/// process may mark it `abandoned` (docs/schema.md). Taking the lock before the row
/// exists is what keeps a live run from ever looking dead.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
}

/// The lock file of run `run_id` for the database at `db`.
pub fn run_lock_path(db: &Path, run_id: &str) -> PathBuf {
    let db = &canonical(db);
    let mut name = db
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "trendsync.db".into());
    name.push(format!(".run-{run_id}.lock"));
    db.with_file_name(name)
}

/// Takes the lock of a new run.
pub fn lock_run(db: &DbFiles, run_id: &str) -> Result<RunLock, LockError> {
    let path = run_lock_path(db.path(), run_id);
    db.refuse_write(&path, "the run's lock file")?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    file.lock()?;
    Ok(RunLock { file, path })
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Removed while still held, so no other process can take a lock on this file
        // and mistake the (finished) run for a dead one; one that opened it before
        // finds the run's row no longer `running`.
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// Whether the process of run `run_id` is still alive on this host: its lock is held.
/// Creates nothing; a lock file that is gone means the run's process is too.
pub fn run_is_alive(db: &Path, run_id: &str) -> std::io::Result<bool> {
    let path = run_lock_path(db, run_id);
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match file.try_lock_shared() {
        Ok(()) => Ok(false),
        Err(TryLockError::WouldBlock) => Ok(true),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// Removes the lock file a dead run left behind.
pub fn remove_dead_run_lock(db: &Path, run_id: &str) {
    let _ = std::fs::remove_file(run_lock_path(db, run_id));
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
                    remove_dead_run_lock(db, &r.run_id);
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
                run_lock_path(db, &r.run_id).display()
            ),
        }
    }
}

#[cfg(test)]
mod tests;
