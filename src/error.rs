//! How the process ends: the exit codes of docs/exit-codes.md as typed values, the
//! front end's own errors, and how a failure is said on stderr.
//!
//! Commands return `anyhow::Result`; `main` asks the front end (`cmd::exit`) which
//! code the error chain gives, so no command calls `process::exit`. Which error or
//! status gives which code is decided there, the one place that sees them all; this
//! module imports nothing of the crate and every module may use it.

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
    /// Stopped cleanly after SIGINT.
    Interrupted = 130,
    /// Stopped cleanly after SIGTERM.
    Terminated = 143,
}

impl ExitCode {
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// Ends the process with `code` after the command has already reported why (a summary
/// line, a JSON object). `main` prints nothing more for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SilentExit(pub ExitCode);

impl fmt::Display for SilentExit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "exit {}", self.0.code())
    }
}

impl std::error::Error for SilentExit {}

/// A request the user phrased wrongly (exit 2), with what to do instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub String);

/// A usage error (exit 2) with a tip on what to type instead: on a terminal the tip
/// gets its own line, as clap shows its own; in JSON and logs, one line.
#[derive(Debug, thiserror::Error)]
#[error("{message}; {tip}")]
pub(crate) struct UsageTip {
    pub(crate) message: String,
    pub(crate) tip: String,
}

/// A configuration problem that is not tied to a place in a file (exit 78), such as a
/// missing API key.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct MissingConfig(pub String);

/// A command that stopped cleanly before doing anything, for a reason the next cron
/// tick will not have (exit 75), with what it found.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TryLater(pub String);

/// Whether the error is, at bottom, a write to a reader that went away (`| head`,
/// `| true`): not a failure of ours.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let kind = c
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| {
                c.downcast_ref::<serde_json::Error>()
                    .and_then(serde_json::Error::io_error_kind)
            });
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}

/// A command's result once it has printed what it had to say: the outcome decides,
/// also when stdout was a closed pipe or a full disk (a script reading `$?` after
/// `| true` must still see 75 for a denial, and cron must see a run's 0 when its log
/// file could not grow). What was lost is said on stderr, as far as it can be.
pub(crate) fn after_output(
    printed: anyhow::Result<()>,
    outcome: anyhow::Result<()>,
) -> anyhow::Result<()> {
    if let Err(e) = &printed
        && !is_broken_pipe(e)
    {
        tracing::warn!("the result could not be printed: {}", report(e));
    }
    outcome
}

/// Says on stderr why the process failed, once.
///
/// What a person typed or wrote wrong (a usage error, 2; a configuration problem, 78)
/// reads like clap's own errors, which are the same kind of mistake: `error: ...`,
/// a tip on its own line, and for a usage error where to read more. Anything else
/// went wrong while working and is a log event like the ones before it (a timestamped
/// ERROR line). With `log_events` (`--log-format json`) every failure is a log event,
/// for the log shipper.
pub fn print_failure(err: &anyhow::Error, code: ExitCode, log_events: bool) {
    if log_events || !matches!(code, ExitCode::Usage | ExitCode::Config) {
        tracing::error!("{}", report(err));
        return;
    }
    let mut text = match err.downcast_ref::<UsageTip>() {
        Some(t) => format!("error: {}\n\n  tip: {}\n", t.message, t.tip),
        None => format!("error: {}\n", report(err)),
    };
    if code == ExitCode::Usage {
        text.push_str("\nFor more information, try '--help'.\n");
    }
    // Nowhere left to say it if stderr is gone; the exit code still tells.
    let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
}

/// Whether the error carries its own exit code and was already reported.
pub fn is_silent(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.is::<SilentExit>())
}

/// The error and every cause under it on one line, joined with ": ". Each of the
/// crate's errors says what was being done and leaves its cause to `source`, so each
/// cause is said once.
pub(crate) fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut links = links(err);
    let mut text = links.next().map(ToString::to_string).unwrap_or_default();
    for cause in links {
        let said = cause.to_string();
        if !said.is_empty() {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
}

/// [`chain`] for the errors that reach the top.
pub(crate) fn report(err: &anyhow::Error) -> String {
    chain(err.as_ref())
}

/// The links of `err`'s chain that [`chain`] says: the error, then each cause under it.
///
/// SQLite's error as rusqlite gives it already says its cause, in SQLite's words
/// ("database is locked"), and its source is the same failure again as a bare code
/// ("Error code 5: database is locked"): nothing under it is said, whether the
/// rusqlite error is a link of its own or wrapped transparently.
pub(crate) fn links<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err), |link| {
        if link.is::<rusqlite::Error>() {
            return None;
        }
        link.source()
            .filter(|cause| !cause.is::<rusqlite::ffi::Error>())
    })
}

#[cfg(test)]
mod tests;
