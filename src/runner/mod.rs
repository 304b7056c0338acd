//! A run: what to call in which order (the plan), and making those calls under the
//! budget (execution).

pub mod plan;

pub use plan::{Freshness, Planned, Simulation, Step, plan, simulate};
