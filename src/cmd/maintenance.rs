//! `prune --vacuum` rewrites the whole file and holds SQLite's write lock while it
//! does: a minute or more on a year's file, far past the busy timeout of a writer's
//! statements. So the vacuum announces itself: it holds the maintenance byte of the
//! database's lock file (docs/architecture.md, "Locks") exclusively, and every command that writes holds it shared for its whole
//! life. A writer that finds a vacuum under way waits for it before it starts (no
//! half-recorded run), and one that waits past [`WRITER_PATIENCE`] stops cleanly with
//! 75, "database busy", for the next cron tick to resume.

use std::time::{Duration, Instant};

use crate::db_files::DbFiles;
use crate::error::TryLater;
use crate::output::human;
use crate::runner::lock::{self, Mode, Range};

/// How long a writer waits for a vacuum: longer than a year's file takes.
pub(crate) const WRITER_PATIENCE: Duration = Duration::from_secs(15 * 60);

/// Between two looks at the lock while waiting.
const POLL: Duration = Duration::from_millis(100);

/// The lock (the maintenance byte of the database's lock file, docs/architecture.md,
/// "Locks"), held until dropped.
#[derive(Debug)]
pub(crate) struct Held(#[allow(dead_code)] lock::Held);

/// Refuses a lock file that is the database or one of its companions, through a link
/// someone made: opening it to lock would write there (78).
fn refuse_linked(db: &DbFiles) -> anyhow::Result<()> {
    lock::refuse_linked(db)?;
    Ok(())
}

/// Taken by a command that writes the database, before it opens it: waits while a
/// vacuum holds the file, up to `patience`, then gives up with 75. `None` when there is
/// no directory to put the lock in (opening the database says why).
pub(crate) fn for_writing(db: &DbFiles, patience: Duration) -> anyhow::Result<Option<Held>> {
    refuse_linked(db)?;
    let db = db.path();
    let mut file = match lock::open(db) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            tracing::warn!(
                "cannot open {} ({e}); going on without waiting for a vacuum",
                lock::lock_path(db).display()
            );
            return Ok(None);
        }
    };
    let started = Instant::now();
    let mut said = false;
    loop {
        match lock::try_take(file, Range::Maintenance, Mode::Shared) {
            Ok(Ok(held)) => return Ok(Some(Held(held))),
            Ok(Err(back)) => file = back,
            Err(e) => {
                tracing::warn!(
                    "cannot lock {} ({e}); going on without waiting for a vacuum",
                    lock::lock_path(db).display()
                );
                return Ok(None);
            }
        }
        if started.elapsed() >= patience {
            return Err(TryLater(format!(
                "database busy: {} has been held by `prune --vacuum` for {} and still is; \
                 nothing was done, the next run resumes",
                db.display(),
                human::duration(started.elapsed())
            ))
            .into());
        }
        if !said {
            tracing::info!(
                "waiting for `prune --vacuum` to finish with {} (up to {})",
                db.display(),
                human::duration(patience)
            );
            said = true;
        }
        std::thread::sleep(POLL);
    }
}

/// Taken by `prune --vacuum` around the vacuum: waits for the writers under way to
/// finish, then keeps new ones waiting until dropped.
pub(crate) fn for_vacuum(db: &DbFiles) -> anyhow::Result<Held> {
    refuse_linked(db)?;
    let db = db.path();
    let file = lock::open(db)?;
    match lock::try_take(file, Range::Maintenance, Mode::Exclusive)? {
        Ok(held) => Ok(Held(held)),
        Err(file) => {
            tracing::info!(
                "waiting for the commands writing {} to finish before the vacuum",
                db.display()
            );
            Ok(Held(lock::take(file, Range::Maintenance, Mode::Exclusive)?))
        }
    }
}

#[cfg(test)]
mod tests;
