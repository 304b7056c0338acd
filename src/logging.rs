//! Logs go to stderr through `tracing`, as text for people or JSON for log shippers;
//! stdout is kept for what a command prints (plans, JSON results).

use std::io::IsTerminal;

use tracing::field::{Field, Visit};
use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::filter::{FilterExt, filter_fn};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// How log lines are written to stderr (`--log-format`): defined here, with the
/// logging it selects, so that the front end's flags depend on logging and not the
/// other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// `RUST_LOG` wins when set; otherwise `info`, shifted by `-v` and `-q`. Errors are
/// never silenced: `-qq` and beyond still show them, and so does a `RUST_LOG` that
/// turns trendsync off (`off`, `trendsync=off`, `reqwest=debug`), since a failing
/// command must say why on stderr (docs/commands.md).
pub fn init(format: LogFormat, verbose: u8, quiet: u8) {
    let level = match i16::from(verbose) - i16::from(quiet) {
        i16::MIN..=-2 => "error",
        -1 => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let asked = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("trendsync={level},warn")));
    let filter = asked.or(filter_fn(is_own_error));
    // Internal errors off: on a failed write (stderr on a full disk, a pipe closed by
    // `| head`) the subscriber would report it with `eprintln!`, which panics when
    // stderr is the very stream that failed. A log line that cannot be written is lost;
    // the exit code stays the outcome's.
    let layer = fmt::layer()
        .with_writer(crate::output::progress::LogWriter)
        .with_target(false)
        .log_internal_errors(false);
    // Ignoring the error: a subscriber already set (in tests) is fine.
    let _ = match format {
        LogFormat::Json => tracing_subscriber::registry()
            .with(layer.json().flatten_event(true).with_filter(filter))
            .try_init(),
        LogFormat::Text => {
            crate::output::progress::enable(true);
            let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            tracing_subscriber::registry()
                .with(
                    layer
                        .with_ansi(color)
                        .with_timer(ToTheSecond)
                        .fmt_fields(TextFields)
                        .with_filter(filter),
                )
                .try_init()
        }
    };
}

/// Text logs stamp their lines as every time for people is written (docs/commands.md,
/// "Text output"): RFC 3339 UTC to the second. JSON logs keep tracing's full precision.
struct ToTheSecond;

impl fmt::time::FormatTime for ToTheSecond {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        // A stamp says when the line was written, whatever clock a test gives the
        // command: the host's, always.
        let now = crate::clock::Clock::now(&crate::clock::SystemClock);
        w.write_str(&crate::output::human::timestamp_s(now.to_secs().as_i64()))
    }
}

/// Text logs are for people: a line is its message, then only the fields that say
/// something the message does not (docs/metrics.md). JSON logs keep every field.
struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        let mut seen = Seen::default();
        fields.record(&mut seen);
        if let Some(source) = &seen.source {
            write!(writer, "{source}: ")?;
        }
        writer.write_str(&seen.message)?;
        for (name, raw, shown) in &seen.fields {
            if !JSON_ONLY.contains(name) && !says(&seen.message, raw) {
                let sep = if seen.message.is_empty() { "" } else { " " };
                write!(writer, "{sep}{name}={shown}")?;
            }
        }
        Ok(())
    }
}

/// Fields only JSON logs write: the run summary's counts, which its message says in
/// its own words (`24 calls, 24 units`): written again as fields they would take the
/// heartbeat past its 160 characters (docs/commands.md, "Logs under cron").
const JSON_ONLY: [&str; 2] = ["units", "calls"];

/// Whether `message` already says `value`: all of it, or every item of a
/// comma-separated list (`regions=US,GB`). Case counts: region codes are short, and
/// "US" is not said by "status".
fn says(message: &str, value: &str) -> bool {
    !value.is_empty() && value.split(',').all(|item| message.contains(item))
}

/// An event's message and its other fields: (name, value, value as written).
#[derive(Default)]
struct Seen {
    message: String,
    fields: Vec<(&'static str, String, String)>,
    /// The library a line bridged from the `log` crate came from (the Redis client's
    /// own warnings during a failover): its name leads the line.
    source: Option<String>,
}

impl Seen {
    /// Takes a field; the bridge's `log.*` fields are the record's metadata (its
    /// target, and the module, file and line in the library's source on the machine
    /// that built the binary), not something a person reading the log can use, so
    /// only the library's name is kept.
    fn take(&mut self, name: &'static str, raw: String, shown: String) {
        match name {
            "message" => self.message = raw,
            "log.target" => {
                let library = raw.split("::").next().unwrap_or_default();
                self.source = Some(library.to_owned());
            }
            _ if name.starts_with("log.") => {}
            _ => self.fields.push((name, raw, shown)),
        }
    }
}

impl Visit for Seen {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.take(field.name(), value.to_owned(), format!("{value:?}"));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        self.take(field.name(), text.clone(), text);
    }
}

/// An error that trendsync itself reports: shown whatever the filter says.
fn is_own_error(meta: &Metadata<'_>) -> bool {
    *meta.level() == Level::ERROR && is_own_target(meta.target())
}

fn is_own_target(target: &str) -> bool {
    target == "trendsync" || target.starts_with("trendsync::")
}

#[cfg(test)]
mod tests;
