//! One process at a time per region on a host: an advisory lock file per region
//! beside the database. The kernel drops the lock when the process ends, however it
//! ends, so a `kill -9` leaves no stuck lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// A held region lock; released on drop.
#[derive(Debug)]
pub struct RegionLock {
    _file: File,
}

/// The lock file of `region` for the database at `db`.
pub fn lock_path(db: &Path, region: &str) -> PathBuf {
    let mut name = db
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "trendsync.db".into());
    name.push(format!(".{region}.lock"));
    db.with_file_name(name)
}

/// Takes the region's lock if no other process holds it: `Ok(None)` when one does.
pub fn try_lock(db: &Path, region: &str) -> std::io::Result<Option<RegionLock>> {
    let path = lock_path(db, region);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(RegionLock { _file: file })),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_until_released() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("t.db");
        let held = try_lock(&db, "US").expect("locking").expect("free");
        assert!(
            try_lock(&db, "US").expect("locking").is_none(),
            "a second holder is refused"
        );
        assert!(
            try_lock(&db, "GB").expect("locking").is_some(),
            "other regions are independent"
        );
        drop(held);
        assert!(try_lock(&db, "US").expect("locking").is_some());
        assert_eq!(lock_path(&db, "US"), dir.path().join("t.db.US.lock"));
    }
}
