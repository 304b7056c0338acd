//! Progress bars on a terminal, and only there: under cron (stderr not a terminal) or
//! with JSON logs nothing of them is drawn. Log lines written while bars are drawn go
//! through [`write_log`], which lifts the bars out of the way, so neither garbles the
//! other.

use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

static BARS: OnceLock<MultiProgress> = OnceLock::new();

/// Every region bar of the process, kept to its end: a dropped bar is no longer redrawn
/// under the log lines that follow (the summary), so its region's final state would
/// vanish from the screen or stay where it was last drawn.
static KEPT: Mutex<Vec<ProgressBar>> = Mutex::new(Vec::new());

/// Turns progress bars on for this process when stderr is a terminal and the logs are
/// meant for people. Returns whether they are on.
pub(crate) fn enable(text_logs: bool) -> bool {
    if !text_logs || !std::io::stderr().is_terminal() {
        return false;
    }
    BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
    true
}

/// The columns a bar may take on the terminal stderr is: its width less `others` (what
/// the rest of the line needs), between 4 and `max`. Bars are drawn on a terminal only.
fn bar_columns(others: usize, max: usize) -> usize {
    terminal_size::terminal_size_of(std::io::stderr())
        .map_or(max, |(w, _)| usize::from(w.0).saturating_sub(others))
        .clamp(4, max)
}

/// A bar drawn from `template`, or indicatif's default should the template be wrong.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// Writes a log line to stderr, clearing the bars first and redrawing them after.
pub(crate) fn write_log(buf: &[u8]) -> std::io::Result<()> {
    match BARS.get() {
        Some(bars) => bars.suspend(|| std::io::stderr().write_all(buf)),
        None => std::io::stderr().write_all(buf),
    }
}

/// One region's bar: its pages and calls. Does nothing when bars are off.
pub(crate) struct RegionBar(Option<ProgressBar>);

impl RegionBar {
    pub(crate) fn new(region: &str, calls: u64) -> RegionBar {
        RegionBar(BARS.get().map(|bars| {
            let bar = bars.add(ProgressBar::new(calls));
            // The bar takes what the terminal leaves; the message is cut to fit.
            bar.set_style(style(&format!(
                "{{prefix:>3}} [{{bar:{}}}] {{pos}}/{{len}} calls {{wide_msg}}",
                bar_columns(30, 24)
            )));
            bar.set_prefix(region.to_owned());
            if let Ok(mut kept) = KEPT.lock() {
                kept.push(bar.clone());
            }
            bar
        }))
    }

    pub(crate) fn step(&self, what: &str) {
        if let Some(bar) = &self.0 {
            bar.inc(1);
            bar.set_message(what.to_owned());
        }
    }

    /// Ends the bar with the region's status. Only a complete region's bar is shown
    /// full: one stopped part way (a signal, the budget) keeps the calls it made, and
    /// one never reached says so.
    pub(crate) fn finish(&self, status: &str) {
        if let Some(bar) = &self.0 {
            match status {
                "complete" => bar.finish_with_message(status.to_owned()),
                "not_attempted" => bar.abandon_with_message("not fetched"),
                _ => bar.abandon_with_message(status.to_owned()),
            }
        }
    }
}

/// The stderr writer for `tracing`, aware of the bars.
#[derive(Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_log(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter
    }
}

/// A long task's bar with a known amount of work (a database upgrade, a prune), drawn
/// on stderr when it is a terminal and nowhere otherwise.
pub(crate) struct Task(Option<ProgressBar>);

impl Task {
    pub(crate) fn new(what: &str, total: u64) -> Task {
        if !std::io::stderr().is_terminal() {
            return Task(None);
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(style(&format!(
            "[{{bar:{}}}] {{percent:>3}}% {{human_pos}}/{{human_len}} ({{eta}} left) {{wide_msg}}",
            bar_columns(44, 32)
        )));
        bar.set_message(what.to_owned());
        Task(Some(bar))
    }

    pub(crate) fn inc(&self, n: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(n);
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
