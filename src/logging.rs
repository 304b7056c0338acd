//! Logs go to stderr through `tracing`, as text for people or JSON for log shippers;
//! stdout is kept for what a command prints (plans, JSON results).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::cli::LogFormat;

/// `RUST_LOG` wins when set; otherwise `info`, shifted by `-v` and `-q`. Errors are
/// never silenced: `-qq` and beyond still show them.
pub fn init(format: LogFormat, verbose: u8, quiet: u8) {
    let level = match i16::from(verbose) - i16::from(quiet) {
        i16::MIN..=-2 => "error",
        -1 => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("trendsync={level},warn")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::progress::LogWriter)
        .with_target(false);
    // Ignoring the error: a subscriber already set (in tests) is fine.
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => {
            crate::progress::enable(true);
            let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            builder.with_ansi(color).try_init()
        }
    };
}
