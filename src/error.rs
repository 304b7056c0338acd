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

/// A command's result once it has printed what it had to say: the outcome decides, also
/// when stdout was a closed pipe (a script reading `$?` after `| true` must still see
/// 75 for a denial). Any other failure to print is the command's failure.
pub fn after_output(
    printed: anyhow::Result<()>,
    outcome: anyhow::Result<()>,
) -> anyhow::Result<()> {
    match printed {
        Err(e) if !is_broken_pipe(&e) => Err(e),
        _ => outcome,
    }
}

/// Whether the error carries its own exit code and was already reported.
pub fn is_silent(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.is::<SilentExit>())
}

/// The error and every cause under it on one line, each said once. Some errors quote
/// their cause in their own message as well as carrying it as `source`; `{:#}` would
/// then say it twice.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        append_cause(&mut text, &cause.to_string());
        source = cause.source();
    }
    text
}

/// [`chain`] for the errors that reach the top.
pub fn report(err: &anyhow::Error) -> String {
    let mut causes = err.chain();
    let mut text = causes.next().map(ToString::to_string).unwrap_or_default();
    for cause in causes {
        append_cause(&mut text, &cause.to_string());
    }
    text
}

fn append_cause(text: &mut String, cause: &str) {
    if !cause.is_empty() && !text.contains(cause) {
        text.push_str(": ");
        text.push_str(cause);
    }
}

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
        if let Some(e) = cause.downcast_ref::<crate::youtube::ClientError>()
            && e.is_config()
        {
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
