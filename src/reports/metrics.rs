//! `--metrics-file` (docs/metrics.md): the whole picture from the database, for
//! node_exporter's textfile collector: the last run of each kind, every region's last
//! attempt and last success, the budget, and the calls by method and outcome.
//!
//! The buckets' figures come from the limiter at the run's end. When it did not
//! answer, `trendsync_limiter_up` is 0 and the figures are the last known ones, which
//! the database records (`quota::figures`), so that the bucket alerts do not go quiet
//! while it is down; the calls journalled meanwhile are counted in
//! `trendsync_journal_pending_calls`.
//!
//! The regions are the configured ones, not the ones the database knows: a region that
//! never completed has its last success at 0, so an alert sees it, and a region taken
//! out of regions.toml has no series, so its alerts clear (its history stays in the
//! database).
//!
//! The format is the classic Prometheus text exposition (0.0.4), not OpenMetrics: no
//! `# EOF`, gauges without a `_total` suffix. Each family's `# HELP` and `# TYPE` come
//! once, followed by all of its samples. It is written by hand: the whole format this
//! needs is a few lines, and a crate would bring a registry this one-shot process has no
//! use for.
//!
//! The file is replaced atomically, so the collector, which reads it at any moment,
//! sees the previous run's file or this one's, never half of one.
//!
//! The module is in four parts: the picture read from the database (`picture`), the
//! metric families it is told as (`families`), the text format they are rendered in
//! (`text`), and the writing of the file (`file`).

mod families;
mod file;
mod picture;
mod text;

#[cfg(test)]
pub(crate) use file::MetricsError;
pub(crate) use file::{Database, Refusal, write_after_refusal, write_after_run};
pub(crate) use picture::Refused;
// What the tests (`super::*`) reach in the parts.
#[cfg(test)]
use {
    file::{WriteError, write_atomically},
    picture::{BudgetFigures, LastRun, LimiterHealth, Picture},
    text::{Exposition, MetricType, escape_label_value},
};

// What the tests (`super::*`) reach that the parts keep to the module.
#[cfg(test)]
use {
    crate::quota::skew::Skew,
    crate::region_status::RegionStatus,
    crate::runner::outcome::{CallOutcome, RunReport, Status},
    crate::store::{CallCount, HistoryRow, RegionOutcome, RegionState, RunKind, RunRecord, Store},
    families::run_seconds,
    std::path::Path,
    text::{format_value, valid_label_name, valid_metric_name},
};

#[cfg(test)]
mod tests;
