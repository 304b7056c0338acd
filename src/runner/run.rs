//! A run and what it is made of: its settings, what it works through (the limiter,
//! the upstream, the store, the clock), and the parts that keep its state while its
//! region tasks share it (stops, meter, recorder, clock check).

use crate::sqlite::Db;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::backoff::Jitter;
use super::clock_check::ClockCheck;
use super::meter::Meter;
use super::outcome::Attempts;
use super::record::Recorder;
use super::slots::{Lease, SlotGate};
use super::stops::Stops;
use super::upstream::Upstream;
use crate::clock::Clock;
use crate::config::Follow;
use crate::quota::{Allowance, Budget, Limiter};
use crate::store::{RunKind, RunLimiter, Store};

/// What a run was asked to do: fixed before it starts, read by every region task.
pub struct RunSettings {
    pub run_id: String,
    pub kind: RunKind,
    pub budget: Budget,
    pub allowance: Allowance,
    /// How many regions are fetched at once; at least one.
    pub concurrency: usize,
    /// The follow-ups after every region's calls, when configured.
    pub follow: Option<Follow>,
    /// The limiter and parsed budget recorded with the run's row, so that a command
    /// reading or charging another one can tell; none records nothing.
    pub limiter: Option<RunLimiter>,
    /// The name this host's claims carry in the slot records (`--host-name`).
    pub host: String,
    /// How long a claim on a slot lasts unless renewed (`[defaults] lease`).
    pub lease: Duration,
    /// How long to wait between two looks at a slot another run holds.
    pub slot_poll: Duration,
    /// With a sink (`--sink`): each region that ends complete queues its slot for it
    /// (docs/commands.md, "The sink").
    pub sink: bool,
}

/// What a run works through: the budget's limiter, the upstream, and the database
/// (`store` on the command's connection `db`, which the journal and the skew record
/// share; its path names the region locks beside it).
pub struct RunDeps {
    pub limiter: Limiter,
    pub upstream: Arc<dyn Upstream>,
    pub store: Store,
    pub db: Db,
    /// The clock the run decides by (the one its limiter was given): when a stop
    /// frees, what a page is stamped with, how old a search may be. Durations the
    /// run measures (its own length, a call's latency) are `Instant`s: they measure,
    /// they decide nothing.
    pub clock: Arc<dyn Clock>,
    /// Where each retry's backoff falls: [`Jitter::Random`] but where a test needs the
    /// wait known.
    pub jitter: Jitter,
    /// The fleet's slots, when a test stands in for the limiter's; none takes the
    /// limiter's own (Redis), if it keeps slots.
    pub gate: Option<Arc<dyn SlotGate>>,
}

/// Everything a run needs, shared by its region tasks.
pub struct Run {
    pub(super) settings: RunSettings,
    pub(super) upstream: Arc<dyn Upstream>,
    pub(super) jitter: Jitter,
    /// The command's connection; its path names the region locks.
    pub(super) db: Db,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) stops: Stops,
    pub(super) meter: Meter,
    pub(super) record: Recorder,
    pub(super) clock_check: ClockCheck,
    /// Every attempt made, by method and how it ended. A poisoned map only loses a
    /// metric; the run itself goes on.
    pub(super) attempts: Mutex<Attempts>,
    /// The gate to the fleet's slots a test gave; else the limiter's, if any
    /// ([`Run::gate`]).
    pub(super) gate: Option<Arc<dyn SlotGate>>,
    /// The slots this run holds, by region.
    pub(super) leases: Mutex<BTreeMap<String, Lease>>,
}

impl Run {
    pub fn new(settings: RunSettings, deps: RunDeps) -> Run {
        let RunDeps {
            limiter,
            upstream,
            store,
            db,
            clock,
            jitter,
            gate,
        } = deps;
        let run_id = &settings.run_id;
        Run {
            stops: Stops::new(run_id.clone(), Arc::clone(&clock)),
            meter: Meter::new(
                limiter,
                settings.budget.clone(),
                settings.allowance,
                run_id.clone(),
                db.clone(),
                Arc::clone(&clock),
            ),
            record: Recorder::new(store, run_id.clone(), Arc::clone(&clock)),
            clock_check: ClockCheck::new(run_id.clone(), db.clone()),
            attempts: Mutex::new(Attempts::new()),
            gate,
            leases: Mutex::new(BTreeMap::new()),
            settings: RunSettings {
                concurrency: settings.concurrency.max(1),
                ..settings
            },
            upstream,
            jitter,
            db,
            clock,
        }
    }

    /// The run's id, as its log lines and its row name it.
    pub fn id(&self) -> &str {
        &self.settings.run_id
    }

    /// A signal arrived: no new calls from now on. Calls already sent may finish and
    /// their pages are stored, until [`Run::abandon_in_flight`].
    pub fn interrupt(&self, signal: &'static str) {
        self.stops.interrupt(signal);
    }

    /// Gives up the calls still waiting for an answer; their regions end as the
    /// run's stop says. Their units stay charged (the request may have arrived).
    pub fn abandon_in_flight(&self) {
        self.stops.abandon_in_flight();
    }
}
