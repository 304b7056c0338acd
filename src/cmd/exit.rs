//! Which exit code (docs/exit-codes.md) the process ends with: for an error that
//! reached `main`, and for the status a run ended with. Decided here, at the top, in
//! one place: the layers below say what kind of failure theirs is in their own terms
//! (a configuration mistake, a limiter that is down, a file that is not a regular
//! file) and know nothing of exit codes.
//!
//! The matches are exhaustive, so a variant added below does not compile until it is
//! given its code here.

use std::error::Error;

use crate::atomic::AtomicError;
use crate::config::ConfigError;
use crate::db_files::Overwrite;
use crate::error::{ExitCode, MissingConfig, SilentExit, TryLater, UsageError, UsageTip};
use crate::quota::LimiterError;
use crate::region_status::RegionStatus;
use crate::youtube::ClientError;

/// The exit code for an error that reached `main`: the outermost error in the chain
/// that carries one decides; an error none of whose links does is a failure (1).
pub fn exit_code_for(err: &anyhow::Error) -> ExitCode {
    err.chain().find_map(code_of).unwrap_or(ExitCode::Failed)
}

/// The code of one link of an error chain, when its type carries one. The chain holds
/// `dyn Error`, and stable Rust can only find a type in it by asking for that type:
/// this is every type asked.
fn code_of(e: &(dyn Error + 'static)) -> Option<ExitCode> {
    let code = if let Some(SilentExit(code)) = e.downcast_ref() {
        *code
    } else if e.is::<UsageError>() || e.is::<UsageTip>() {
        ExitCode::Usage
    } else if e.is::<MissingConfig>() || e.is::<ConfigError>() || e.is::<Overwrite>() {
        ExitCode::Config
    } else if e.is::<TryLater>() {
        ExitCode::TryLater
    } else if let Some(e) = e.downcast_ref::<LimiterError>() {
        match e {
            // No retry can help.
            LimiterError::Config(_) => ExitCode::Config,
            // Down: try later, as a run stopped by it does (a run applies
            // `[when_limiter_down]` before it gets this far; `budget` and the dry run,
            // which cannot read the window, get here).
            LimiterError::Unavailable { .. } => ExitCode::TryLater,
            // A clock to fix, as a run's clock stop is (docs/exit-codes.md).
            LimiterError::ClocksApart { .. } => ExitCode::TryLater,
            LimiterError::Failed { .. } => ExitCode::Failed,
        }
    } else if let Some(e) = e.downcast_ref::<ClientError>() {
        match e {
            ClientError::BaseUrl { .. } | ClientError::EmptyKey | ClientError::KeyNotHeaderSafe => {
                ExitCode::Config
            }
            // Building the HTTP stack itself failed: nothing the user configured.
            ClientError::Http(_) => ExitCode::Failed,
        }
    } else if let Some(e) = e.downcast_ref::<AtomicError>() {
        match e {
            // The path the user gave names no file we may replace.
            AtomicError::NotAFile { .. }
            | AtomicError::NoFileName(_)
            | AtomicError::Overwrite(_) => ExitCode::Config,
            AtomicError::Io { .. } => ExitCode::Failed,
        }
    } else {
        return None;
    };
    Some(code)
}

/// The exit code of a run that ended with `status`; `None` when it completed.
/// Failures a person must look at outrank a clean stop; a clean stop tells cron to
/// simply come back.
pub(crate) fn exit_code_for_status(status: RegionStatus) -> Option<ExitCode> {
    match status {
        // Another host fetched the slot (docs/commands.md, "Several hosts"): nothing
        // is left to do, so cron has nothing to retry.
        RegionStatus::Complete | RegionStatus::DoneElsewhere => None,
        // A line whose process died: a person should look at why.
        RegionStatus::Failed | RegionStatus::Abandoned => Some(ExitCode::Failed),
        // Not finished (the runner never ends a run with queued or running).
        RegionStatus::BudgetExhausted
        | RegionStatus::UpstreamQuotaExhausted
        | RegionStatus::ClockSkew
        | RegionStatus::LimiterDown
        | RegionStatus::Skipped
        | RegionStatus::NotAttempted
        | RegionStatus::Queued
        | RegionStatus::Running => Some(ExitCode::TryLater),
        // SIGINT's code; the command picks SIGTERM's when that was the signal.
        RegionStatus::Interrupted => Some(ExitCode::Interrupted),
    }
}

#[cfg(test)]
mod tests;
