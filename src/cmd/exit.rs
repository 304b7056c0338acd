//! Which error types carry their own exit code: the one list of them, kept here, at the
//! top, where every module's errors are in sight. Each type decides its code beside its
//! definition ([`Exit`]); this module only knows which types to ask.

use std::error::Error;

use crate::error::{Exit, ExitCode, MissingConfig, SilentExit, TryLater, UsageError, UsageTip};
use crate::region_status::RegionStatus;

/// Asks one link of an error chain for its code, if it is a `T`.
type Probe = fn(&(dyn Error + 'static)) -> Option<ExitCode>;

fn probe<T: Exit>(e: &(dyn Error + 'static)) -> Option<ExitCode> {
    e.downcast_ref::<T>().map(Exit::exit_code)
}

/// Declares the types that carry their own exit code: the probes `main` asks, and,
/// for the test that keeps the list whole, their names.
macro_rules! coded {
    ($($t:ty),* $(,)?) => {
        const CODED: &[Probe] = &[$(probe::<$t>),*];

        /// The exit code of a run that ended with `status`; `None` when it completed.
/// Failures a person must look at outrank a clean stop; a clean stop tells cron to
/// simply come back.
pub(crate) fn exit_code_for_status(status: RegionStatus) -> Option<ExitCode> {
    match status {
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

#[cfg(test)]
        fn coded_type_names() -> Vec<&'static str> {
            vec![$(std::any::type_name::<$t>()),*]
        }
    };
}

// Every type that implements [`Exit`]. Only a list of names: what each code is, is
// decided by the type.
coded![
    SilentExit,
    UsageError,
    UsageTip,
    MissingConfig,
    TryLater,
    crate::config::ConfigError,
    crate::youtube::ClientError,
    crate::quota::LimiterError,
    crate::atomic::AtomicError,
];

/// The exit code of one link of an error chain, when its type carries one.
fn code_of(e: &(dyn Error + 'static)) -> Option<ExitCode> {
    CODED.iter().find_map(|probe| probe(e))
}

/// The exit code for an error that reached `main`: the outermost error in the chain
/// that carries one decides; an error none of whose links does is a failure (1).
pub fn exit_code_for(err: &anyhow::Error) -> ExitCode {
    err.chain().find_map(code_of).unwrap_or(ExitCode::Failed)
}

#[cfg(test)]
mod tests;
