//! SIGINT and SIGTERM during a real run: the first stops the run cleanly (no new
//! calls, a grace for the calls in flight), a second ends the process at once, and the
//! signal that stopped the run picks its exit code (130 or 143). A command that works
//! in batches (prune) gets the same promise through [`StopRequest`].

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::task::JoinHandle;

use crate::cmd::exit::exit_code_for_status;
use crate::error::ExitCode;
use crate::output::human;
use crate::runner::{Run, Status};

/// The signal that stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Int,
    Term,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    fn exit_code(self) -> ExitCode {
        match self {
            Signal::Int => ExitCode::Interrupted,
            Signal::Term => ExitCode::Terminated,
        }
    }
}

/// How long calls already sent may take to answer after a signal before they are
/// given up.
const SIGNAL_GRACE: Duration = Duration::from_secs(3);

/// SIGINT and SIGTERM, caught from the start of a run so that neither kills it
/// mid-page.
pub(crate) struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
}

impl Signals {
    pub(crate) fn listen() -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                int: signal(SignalKind::interrupt()).context("catching SIGINT")?,
                term: signal(SignalKind::terminate()).context("catching SIGTERM")?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.int.recv() => Signal::Int,
                _ = self.term.recv() => Signal::Term,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Int
        }
    }

    /// Watches for signals while `run` runs, in a task of its own.
    pub(super) fn watch(self, run: Arc<Run>) -> Watch {
        let received = Arc::new(OnceLock::new());
        let task = tokio::spawn(self.stop_on_signal(run, Arc::clone(&received)));
        Watch { task, received }
    }

    /// The first signal stops the run: no new calls, and the calls in flight get
    /// [`SIGNAL_GRACE`] to answer. The second ends the process at once.
    async fn stop_on_signal(mut self, run: Arc<Run>, received: Arc<OnceLock<Signal>>) {
        let first = self.next().await;
        let _ = received.set(first);
        tracing::warn!(
            run_id = %run.id(),
            signal = first.name(),
            "{}: stopping: no new calls; calls in flight get {} to answer; a second signal ends the process at once",
            first.name(),
            human::duration(SIGNAL_GRACE)
        );
        run.interrupt(first.name());
        tokio::select! {
            () = tokio::time::sleep(SIGNAL_GRACE) => {
                run.abandon_in_flight();
                let second = self.next().await;
                exit_now(&run, second);
            }
            second = self.next() => exit_now(&run, second),
        }
    }
}

impl Signals {
    /// For a command that works in batches on its own thread: the first signal asks it
    /// to stop after the batch at hand, the second ends the process at once.
    pub(crate) fn stop_request(mut self, what: &'static str) -> StopRequest {
        let received = Arc::new(OnceLock::new());
        let set = Arc::clone(&received);
        let task = tokio::spawn(async move {
            let first = self.next().await;
            let _ = set.set(first);
            tracing::warn!(
                signal = first.name(),
                "{}: stopping {what} after the batch at hand; a second signal ends the process at once",
                first.name()
            );
            let second = self.next().await;
            tracing::error!(
                signal = second.name(),
                "{}: a second signal; ending {what} at once",
                second.name()
            );
            std::process::exit(i32::from(second.exit_code().code()))
        });
        StopRequest { task, received }
    }
}

/// Whether a signal asked a batch command to stop, and with which exit code.
pub(crate) struct StopRequest {
    task: JoinHandle<()>,
    received: Arc<OnceLock<Signal>>,
}

impl StopRequest {
    /// Whether a signal came: the command ends after the batch at hand.
    pub(crate) fn asked(&self) -> bool {
        self.received.get().is_some()
    }

    /// Stops listening; the exit code of the signal that stopped the command, if one
    /// did.
    pub(crate) fn finish(self) -> Option<ExitCode> {
        self.task.abort();
        self.received.get().map(|s| s.exit_code())
    }
}

/// The watch over a run's signals, until the run has said all it had to.
pub(super) struct Watch {
    task: JoinHandle<()>,
    received: Arc<OnceLock<Signal>>,
}

impl Watch {
    /// Stops watching, and gives the exit code of a run that ended with `status`:
    /// SIGTERM's code when SIGTERM interrupted it, its status's otherwise.
    pub(super) fn finish(self, status: Status) -> Option<ExitCode> {
        self.task.abort();
        match exit_code_for_status(status) {
            Some(ExitCode::Interrupted) if self.received.get() == Some(&Signal::Term) => {
                Some(ExitCode::Terminated)
            }
            code => code,
        }
    }
}

/// The second signal: the process ends without waiting for anything. What was stored
/// is committed page by page; the run's row stays `running` until the next process
/// marks it abandoned.
fn exit_now(run: &Run, signal: Signal) -> ! {
    tracing::error!(
        run_id = %run.id(),
        signal = signal.name(),
        "{}: a second signal; ending at once",
        signal.name()
    );
    std::process::exit(i32::from(signal.exit_code().code()))
}
