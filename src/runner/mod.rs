//! A run: what to call in which order (the plan), and making those calls under the
//! budget (execution). Each file is one part of a run: `run` holds the parts that keep
//! its state (`stops`, the `meter` that charges the budget, the `record`er that writes
//! the store, the `clock_check`); `call` is one call with its retries and `backoff`;
//! `steps` what each region's phases call; `execute` the run from start to end, with
//! its `bookkeeping`. The upstream sits behind a seam (`upstream`), so the decisions
//! are tested against a fake in the process (`test_support`). Around them: `plan`
//! (what to call), `lock` (which regions are this process's), `slots` (which of the
//! fleet's slots are this run's), `outcome` (how it ended), what a run leaves for
//! others to read (`metrics`), and its id (`run_id`).

mod backoff;
mod bookkeeping;
mod call;
mod clock_check;
mod error;
mod execute;
pub mod lock;
mod meter;
mod missed_slots;
pub mod outcome;
pub mod plan;
mod record;
mod run;
pub mod run_id;
mod slots;
mod steps;
mod stops;
#[cfg(test)]
mod test_support;
pub(crate) mod upstream;

pub(crate) use backoff::Jitter;
pub(crate) use execute::execute;
pub(crate) use outcome::{Status, said_no};
pub(crate) use plan::{Freshness, Simulation, Step, plan, simulate};
pub(crate) use record::read_freshness;
pub(crate) use run::{Run, RunDeps, RunSettings};
pub(crate) use slots::slot_poll;
// What the front end's tests reach through the room.
#[cfg(test)]
pub(crate) use error::RunError;
