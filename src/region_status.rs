//! The words a run is recorded in: the status of a run or of one of its regions
//! (docs/commands.md), how one charged call to the upstream ended, and the kind of
//! limiter it charged. How the runner ends them, what the store writes and reads back,
//! what `runs --status` accepts, what the metrics label and the JSON says.
//!
//! A leaf: the runner, the store, the metrics and the front end all import it, and it
//! imports nothing of the crate. What a status means for the process's exit code is
//! the front end's to say (`cmd::exit`).
//!
//! A database file may hold a word this build does not know (written by another
//! trendsync): it reads as [`Recorded::Unknown`] and is shown as it is, rather than
//! failing the whole read.

use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use serde::{Serialize, Serializer};

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
    /// The limiter's clock disagreed with the upstream's, or no answer could confirm
    /// a clock already found wrong (docs/schema.md): no further calls until it is fixed.
    ClockSkew,
    /// A call was refused only because the limiter did not answer and its method is denied
    /// while it is down (docs/budget.md, "When the limiter is down"): the budget may be far
    /// from spent.
    LimiterDown,
    /// Another host's run fetched the region's slot, or holds it past the bound this
    /// run waited (docs/commands.md, "Several hosts"): nothing to fetch here. A run of
    /// `complete` and `done_elsewhere` regions is `complete`.
    DoneElsewhere,
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
    /// Every status: the eight a run can end with, then a region's only ones.
    pub const ALL: [RegionStatus; 13] = [
        RegionStatus::Complete,
        RegionStatus::BudgetExhausted,
        RegionStatus::UpstreamQuotaExhausted,
        RegionStatus::Failed,
        RegionStatus::Skipped,
        RegionStatus::Interrupted,
        RegionStatus::ClockSkew,
        RegionStatus::LimiterDown,
        RegionStatus::DoneElsewhere,
        RegionStatus::NotAttempted,
        RegionStatus::Queued,
        RegionStatus::Running,
        RegionStatus::Abandoned,
    ];

    /// The statuses of a line whose run is still going on ([`RegionStatus::in_progress`]).
    /// SQL that asks for them binds them by destructuring this array, so a status added
    /// here fails to compile there until the SQL names it too.
    pub const IN_PROGRESS: [RegionStatus; 2] = [RegionStatus::Queued, RegionStatus::Running];

    pub fn as_str(self) -> &'static str {
        match self {
            RegionStatus::Complete => "complete",
            RegionStatus::BudgetExhausted => "budget_exhausted",
            RegionStatus::UpstreamQuotaExhausted => "upstream_quota_exhausted",
            RegionStatus::Failed => "failed",
            RegionStatus::Skipped => "skipped",
            RegionStatus::Interrupted => "interrupted",
            RegionStatus::ClockSkew => "clock_skew",
            RegionStatus::LimiterDown => "limiter_down",
            RegionStatus::DoneElsewhere => "done_elsewhere",
            RegionStatus::NotAttempted => "not_attempted",
            RegionStatus::Queued => "queued",
            RegionStatus::Running => "running",
            RegionStatus::Abandoned => "abandoned",
        }
    }

    /// How serious a stop with this status is, when several stop one run: the most
    /// serious is the run's status (docs/commands.md: `failed`, `interrupted`,
    /// `clock_skew`, `limiter_down`, `upstream_quota_exhausted`, `budget_exhausted`).
    /// Higher is more serious.
    pub fn seriousness(self) -> u8 {
        match self {
            RegionStatus::Failed => 6,
            RegionStatus::Interrupted => 5,
            RegionStatus::ClockSkew => 4,
            RegionStatus::LimiterDown => 3,
            RegionStatus::UpstreamQuotaExhausted => 2,
            RegionStatus::BudgetExhausted => 1,
            RegionStatus::Complete
            | RegionStatus::Skipped
            | RegionStatus::DoneElsewhere
            | RegionStatus::NotAttempted
            | RegionStatus::Queued
            | RegionStatus::Running
            | RegionStatus::Abandoned => 0,
        }
    }

    /// Whether a line with this status belongs to a run still going on, or to one
    /// whose process died before it ended (then it is shown `abandoned`).
    pub fn in_progress(self) -> bool {
        Self::IN_PROGRESS.contains(&self)
    }
}

/// [`RegionStatus::in_progress`] for a status as the store returns it: a word this
/// build does not know is no run of its own still going on.
pub fn in_progress(status: &Recorded<RegionStatus>) -> bool {
    status.known().is_some_and(RegionStatus::in_progress)
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

/// How one charged attempt at an upstream call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallOutcome {
    Ok,
    /// Worth trying again (429, 5xx, a timeout); retried while attempts are left.
    Transient,
    /// The upstream said the key's quota is spent.
    QuotaExhausted,
    /// Refused in a way no retry fixes (a bad key); the run fails.
    Fatal,
    /// Only this region fails (a missing chart, malformed JSON).
    RegionFailed,
}

impl CallOutcome {
    pub const ALL: [CallOutcome; 5] = [
        CallOutcome::Ok,
        CallOutcome::Transient,
        CallOutcome::QuotaExhausted,
        CallOutcome::Fatal,
        CallOutcome::RegionFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Transient => "transient",
            CallOutcome::QuotaExhausted => "quota_exhausted",
            CallOutcome::Fatal => "fatal",
            CallOutcome::RegionFailed => "region_failed",
        }
    }
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is none of [`CallOutcome::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown call outcome {0:?}")]
pub struct UnknownOutcome(pub String);

impl FromStr for CallOutcome {
    type Err = UnknownOutcome;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CallOutcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == s)
            .ok_or_else(|| UnknownOutcome(s.to_owned()))
    }
}

/// Each word is stored as itself, a TEXT value; a word read back that is not one of
/// the type's is an error here; [`Recorded`] is how the store reads one that may not be.
macro_rules! stored_as_word {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $t {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                value
                    .as_str()?
                    .parse()
                    .map_err(|e| FromSqlError::Other(Box::new(e)))
            }
        }
    )*};
}

/// The kind of limiter a budget is charged on: the embedded one in the database file,
/// or Redis. The words are those of the runs table's `limiter_kind` and of the JSON's
/// `limiter.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LimiterKind {
    Embedded,
    Redis,
}

impl LimiterKind {
    pub const ALL: [LimiterKind; 2] = [LimiterKind::Embedded, LimiterKind::Redis];

    pub fn as_str(self) -> &'static str {
        match self {
            LimiterKind::Embedded => "embedded",
            LimiterKind::Redis => "redis",
        }
    }
}

impl fmt::Display for LimiterKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word that is none of [`LimiterKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown kind of limiter {0:?}")]
pub struct UnknownLimiterKind(pub String);

impl FromStr for LimiterKind {
    type Err = UnknownLimiterKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LimiterKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or_else(|| UnknownLimiterKind(s.to_owned()))
    }
}

stored_as_word!(RegionStatus, CallOutcome, LimiterKind);

/// A status or an outcome as a database file holds it: one this build knows, or a
/// word it does not, kept as it was written. `runs`, `status`, the metrics and the
/// JSON show an unknown word as it is (no metric series matches it) instead of
/// refusing the file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Recorded<T> {
    Known(T),
    Unknown(String),
}

impl<T: Copy> Recorded<T> {
    /// The value, when this build knows the word.
    pub fn known(&self) -> Option<T> {
        match self {
            Recorded::Known(value) => Some(*value),
            Recorded::Unknown(_) => None,
        }
    }
}

impl<T: FromStr> Recorded<T> {
    /// A word as the file holds it: the value it names, or the word itself.
    pub fn from_word(word: &str) -> Recorded<T> {
        word.parse()
            .map_or_else(|_| Recorded::Unknown(word.to_owned()), Recorded::Known)
    }
}

impl<T> From<T> for Recorded<T> {
    fn from(value: T) -> Self {
        Recorded::Known(value)
    }
}

/// A recorded word is a value only when it is that value's word.
impl<T: PartialEq> PartialEq<T> for Recorded<T> {
    fn eq(&self, other: &T) -> bool {
        matches!(self, Recorded::Known(value) if value == other)
    }
}

impl<T: fmt::Display> fmt::Display for Recorded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Recorded::Known(value) => value.fmt(f),
            Recorded::Unknown(word) => f.write_str(word),
        }
    }
}

/// As the known value serializes, or the word as it was: the JSON of a known status
/// is what it was when the row types held strings.
impl<T: Serialize> Serialize for Recorded<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Recorded::Known(value) => value.serialize(serializer),
            Recorded::Unknown(word) => serializer.serialize_str(word),
        }
    }
}

impl<T: ToSql> ToSql for Recorded<T> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Recorded::Known(value) => value.to_sql(),
            Recorded::Unknown(word) => Ok(ToSqlOutput::from(word.as_str())),
        }
    }
}

impl<T: FromStr> FromSql for Recorded<T> {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value.as_str().map(Recorded::from_word)
    }
}

#[cfg(test)]
mod tests;
