//! How the process ends: the exit codes of DESIGN.md section 2 as typed values.
//!
//! Commands return `anyhow::Result`; `main` looks through the error chain for one of
//! the types below to choose the exit code, so no command calls `process::exit`.

use std::fmt;

/// The sysexits codes trendsync promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    /// Something a person must look at; details are on stderr.
    Failed = 1,
    /// A bad flag or a bad query.
    Usage = 2,
    /// Stopped cleanly; cron may simply try again later.
    TryLater = 75,
    /// A bad or inconsistent configuration file, or a missing API key.
    Config = 78,
}

impl ExitCode {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Ends the process with `code` after the command has already reported why (a summary
/// line, a JSON object). `main` prints nothing more for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SilentExit(pub ExitCode);

impl fmt::Display for SilentExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit {}", self.0.code())
    }
}

impl std::error::Error for SilentExit {}

/// A request the user phrased wrongly (exit 2), with what to do instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A configuration problem that is not tied to a place in a file (exit 78), such as a
/// missing API key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MissingConfig(pub String);

/// The exit code for an error that reached `main`.
pub fn exit_code_for(err: &anyhow::Error) -> ExitCode {
    for cause in err.chain() {
        if let Some(SilentExit(code)) = cause.downcast_ref::<SilentExit>() {
            return *code;
        }
        if cause.is::<UsageError>() {
            return ExitCode::Usage;
        }
        if cause.is::<crate::config::ConfigError>() || cause.is::<MissingConfig>() {
            return ExitCode::Config;
        }
        if cause
            .downcast_ref::<crate::quota::LimiterError>()
            .is_some_and(crate::quota::LimiterError::is_config)
        {
            return ExitCode::Config;
        }
    }
    ExitCode::Failed
}
