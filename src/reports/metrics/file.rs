//! Writing `--metrics-file` after a run (docs/metrics.md): the picture read, told and
//! rendered, then put in place atomically, so that the collector, which reads the file
//! at any moment, sees the previous run's file or this one's, never half of one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::picture::{BudgetFigures, LimiterHealth, Picture, Refused};
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
    let mut picture = read_picture(db, numbers, Some(configured))?;
    picture.limiter = Some(LimiterHealth {
        key: budget.key.clone(),
        up: Some(report.limiter_up),
        pending_calls: crate::quota::pending_calls(Some(db), &budget.key)
            .map_err(MetricsError::Journal)?,
    });
    write(path, &picture, db.files())
}

/// What `--db` is to a run refused by its configuration.
pub enum Database<'a> {
    /// trendsync's database, opened: the whole picture is read from it.
    Read(&'a Db),
    /// No file there yet: no run has recorded anything.
    NoFile,
    /// A file that could not be opened as trendsync's (refused, foreign, damaged):
    /// nothing is read from it, nor said of the regions.
    Unknown,
}

/// What a run or backfill refused by its configuration (exit 78) can say: the
/// refusal, and what could still be read.
pub struct Refusal<'a> {
    pub refused: Refused,
    pub db: Database<'a>,
    /// From quota-costs.toml, when it could be read.
    pub budget: Option<&'a Budget>,
    /// The codes of regions.toml, when it could be read; else those the database knows.
    pub configured: Option<Vec<String>>,
    /// The database's files, which the metrics file must not be.
    pub protected: &'a DbFiles,
}

/// Writes `--metrics-file` for a run or backfill its configuration refused before it
/// began (docs/metrics.md): the whole picture from the database as after any run when
/// it can be read, with that run, status `config_error`, as the last of its kind; of
/// a database that cannot be read, only that. Nothing is created or changed but the
/// metrics file, and `trendsync_limiter_up` is left out: no limiter was asked.
pub fn write_after_refusal(path: &Path, refusal: Refusal<'_>) -> Result<(), MetricsError> {
    let mut picture = match refusal.db {
        Database::Read(db) => {
            let numbers = match refusal.budget {
                Some(budget) => crate::quota::figures::last_known(Some(db), budget)
                    .map_err(MetricsError::Figures)?
                    .map(|buckets| BudgetFigures {
                        key: budget.key.clone(),
                        buckets,
                    }),
                None => None,
            };
            let mut picture = read_picture(db, numbers, refusal.configured)?;
            if let Some(budget) = refusal.budget {
                picture.limiter = Some(LimiterHealth {
                    key: budget.key.clone(),
                    up: None,
                    pending_calls: crate::quota::pending_calls(Some(db), &budget.key)
                        .map_err(MetricsError::Journal)?,
                });
            }
            picture
        }
        Database::NoFile => Picture {
            configured: refusal.configured.unwrap_or_default(),
            ..Picture::default()
        },
        Database::Unknown => Picture {
            unread: true,
            ..Picture::default()
        },
    };
    picture.refused = Some(refusal.refused);
    write(path, &picture, refusal.protected)
}

/// The picture the database `db` holds, with `numbers` for the budget. `configured`
/// are regions.toml's codes; without them, every region the database knows has its
/// series.
fn read_picture(
    db: &Db,
    numbers: Option<BudgetFigures>,
    configured: Option<Vec<String>>,
) -> Result<Picture, MetricsError> {
    let read = |source| MetricsError::Read {
        db: db.path().to_path_buf(),
        source: Box::new(source),
    };
    let store = Store::read_on(db).map_err(read)?;
    let configured = match (configured, &store) {
        (Some(configured), _) => configured,
        (None, Some(store)) => store
            .region_states()
            .map_err(read)?
            .into_iter()
            .map(|r| r.region)
            .collect(),
        (None, None) => Vec::new(),
    };
    let mut picture = match store {
        Some(store) => Picture::read(&store, numbers, configured).map_err(read)?,
        None => Picture {
            configured,
            budget: numbers,
            ..Picture::default()
        },
    };
    picture.skews = crate::quota::skew::recorded(Some(db)).map_err(MetricsError::Skew)?;
    Ok(picture)
}

/// Renders `picture` and puts it at `path` atomically, never over `protected`'s files.
fn write(path: &Path, picture: &Picture, protected: &DbFiles) -> Result<(), MetricsError> {
    write_atomically(path, &picture.exposition(&METHODS).render(), protected)
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
