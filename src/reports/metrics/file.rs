//! Writing `--metrics-file` after a run (docs/metrics.md): the picture read, told and
//! rendered, then put in place atomically, so that the collector, which reads the file
//! at any moment, sees the previous run's file or this one's, never half of one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::picture::{BudgetFigures, LimiterHealth, Picture};
use crate::db_files::DbFiles;
use crate::quota::Budget;
use crate::runner::outcome::RunReport;
use crate::runner::upstream::METHODS;
use crate::sqlite::Db;
use crate::store::{Store, StoreError};

/// Writing `--metrics-file` after a run failed.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("reading the metrics from {}", .db.display())]
    Read {
        db: PathBuf,
        source: Box<StoreError>,
    },
    #[error("writing the metrics file")]
    Write(#[source] WriteError),
    #[error("reading the metrics")]
    Skew(#[source] crate::quota::skew::SkewError),
    #[error("reading the metrics")]
    Journal(#[source] crate::quota::JournalError),
    #[error("reading the metrics")]
    Figures(#[source] crate::quota::FiguresError),
}

/// Writes `--metrics-file` after a run. Every run sharing the file writes the whole
/// picture from the database `db`, not only its own regions, so the file is right
/// whoever wrote it last; the budget's window is the one `report` carries (none when
/// the limiter could not say). `configured` are the codes of every region in
/// regions.toml, fetched by this run or not: they, and only they, get region series.
pub fn write_after_run(
    path: &Path,
    db: &Db,
    budget: &Budget,
    configured: &[&str],
    report: &RunReport,
) -> Result<(), MetricsError> {
    let configured: Vec<String> = configured.iter().map(|c| (*c).to_owned()).collect();
    // While the limiter does not answer, the buckets' series stay, with the last known
    // figures (`trendsync_limiter_up 0` says they are not current): an alert on a
    // nearly spent bucket must not go quiet when the limiter is down.
    let buckets = match &report.budget {
        Some(buckets) => Some(buckets.clone()),
        None => {
            crate::quota::figures::last_known(Some(db), budget).map_err(MetricsError::Figures)?
        }
    };
    let numbers = buckets.map(|buckets| BudgetFigures {
        key: budget.key.clone(),
        buckets,
    });
    let read = |source| MetricsError::Read {
        db: db.path().to_path_buf(),
        source: Box::new(source),
    };
    let mut picture = match Store::read_on(db).map_err(read)? {
        Some(store) => Picture::read(&store, numbers, configured).map_err(read)?,
        None => Picture {
            configured,
            ..Picture::default()
        },
    };
    picture.skews = crate::quota::skew::recorded(Some(db)).map_err(MetricsError::Skew)?;
    picture.limiter = Some(LimiterHealth {
        key: budget.key.clone(),
        up: report.limiter_up,
        pending_calls: crate::quota::pending_calls(Some(db), &budget.key)
            .map_err(MetricsError::Journal)?,
    });
    write_atomically(path, &picture.exposition(&METHODS).render(), db.files())
        .map_err(MetricsError::Write)?;
    tracing::debug!(path = %path.display(), "metrics written");
    Ok(())
}

/// Writing the metrics file failed.
pub type WriteError = crate::atomic::AtomicError;

/// Replaces `path` with `text` atomically ([`crate::atomic::write`]): a new file gets
/// mode 0644, since the collector runs as another user and must read it whatever the
/// umask; a file already there keeps its own mode. Never over `protected`'s files.
pub fn write_atomically(path: &Path, text: &str, protected: &DbFiles) -> Result<(), WriteError> {
    crate::atomic::write(path, "--metrics-file", protected, Some(0o644), |file| {
        file.write_all(text.as_bytes())
            .map_err(|source| WriteError::Io {
                doing: "writing",
                path: path.to_path_buf(),
                source,
            })
    })
}
