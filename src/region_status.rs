//! The one list of statuses a run or a region's line of a run can have (DESIGN.md
//! section 2): how the runner ends them, what the store writes while a run goes on,
//! what `runs --status` accepts and what the metrics label. A leaf: the runner, the
//! store, the metrics and the front end all import it, and it imports only the exit
//! codes.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::ExitCode;

/// The status of a run or of one of its regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RegionStatus {
    Complete,
    BudgetExhausted,
    UpstreamQuotaExhausted,
    Failed,
    Skipped,
    Interrupted,
    /// A region the run never reached: it stopped before this region's first call.
    /// Never a run's status.
    NotAttempted,
    /// A region's line while its run waits for a concurrency slot for it.
    Queued,
    /// A region's line while it is fetched, or a run's while it goes on.
    Running,
    /// A line whose process died before the run ended.
    Abandoned,
}

impl RegionStatus {
    /// Every status: the six a run can end with, in the order of DESIGN.md section 2,
    /// then a region's only ones.
    pub const ALL: [RegionStatus; 10] = [
        RegionStatus::Complete,
        RegionStatus::BudgetExhausted,
        RegionStatus::UpstreamQuotaExhausted,
        RegionStatus::Failed,
        RegionStatus::Skipped,
        RegionStatus::Interrupted,
        RegionStatus::NotAttempted,
        RegionStatus::Queued,
        RegionStatus::Running,
        RegionStatus::Abandoned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RegionStatus::Complete => "complete",
            RegionStatus::BudgetExhausted => "budget_exhausted",
            RegionStatus::UpstreamQuotaExhausted => "upstream_quota_exhausted",
            RegionStatus::Failed => "failed",
            RegionStatus::Skipped => "skipped",
            RegionStatus::Interrupted => "interrupted",
            RegionStatus::NotAttempted => "not_attempted",
            RegionStatus::Queued => "queued",
            RegionStatus::Running => "running",
            RegionStatus::Abandoned => "abandoned",
        }
    }

    /// Whether a line with this status belongs to a run still going on, or to one
    /// whose process died before it ended (then it is shown `abandoned`).
    pub fn in_progress(self) -> bool {
        matches!(self, RegionStatus::Queued | RegionStatus::Running)
    }

    /// Failures a person must look at outrank a clean stop; a clean stop tells cron
    /// to simply come back.
    pub fn exit_code(self) -> Option<ExitCode> {
        match self {
            RegionStatus::Complete => None,
            // A line whose process died: a person should look at why.
            RegionStatus::Failed | RegionStatus::Abandoned => Some(ExitCode::Failed),
            // Not finished (the runner never ends a run with queued or running).
            RegionStatus::BudgetExhausted
            | RegionStatus::UpstreamQuotaExhausted
            | RegionStatus::Skipped
            | RegionStatus::NotAttempted
            | RegionStatus::Queued
            | RegionStatus::Running => Some(ExitCode::TryLater),
            // SIGINT's code; the command picks SIGTERM's when that was the signal.
            RegionStatus::Interrupted => Some(ExitCode::Interrupted),
        }
    }
}

/// [`RegionStatus::in_progress`] for a status as the store returns it, a word.
pub fn in_progress(word: &str) -> bool {
    word.parse().is_ok_and(RegionStatus::in_progress)
}

impl fmt::Display for RegionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is none of [`RegionStatus::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownStatus(pub String);

impl fmt::Display for UnknownStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let known: Vec<&str> = RegionStatus::ALL.iter().map(|s| s.as_str()).collect();
        write!(
            f,
            "unknown status {:?}; use one of: {}",
            self.0,
            known.join(", ")
        )
    }
}

impl std::error::Error for UnknownStatus {}

impl FromStr for RegionStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RegionStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownStatus(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each status reads back from its word and no two share one; the serialized name
    /// (the JSON summary's) is the word too.
    #[test]
    fn every_status_reads_back_from_its_word() {
        for s in RegionStatus::ALL {
            assert_eq!(s.as_str().parse::<RegionStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_string(&s).expect("serializing"),
                format!("\"{s}\"")
            );
        }
        let err = "done".parse::<RegionStatus>().expect_err("not a status");
        assert!(err.to_string().contains("not_attempted"), "{err}");
        assert!("Complete".parse::<RegionStatus>().is_err());
    }
}
