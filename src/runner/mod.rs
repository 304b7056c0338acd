//! A run: what to call in which order (the plan), and making those calls under the
//! budget (execution).

mod error;
pub mod execute;
pub mod lock;
pub mod metrics;
pub mod outcome;
pub mod plan;
pub mod report;

pub use error::RunError;
pub use execute::{METHODS, Run, RunDeps, RunSettings, execute, read_freshness};
pub use outcome::{
    Attempts, BucketWindow, BudgetWindow, CallOutcome, FollowReport, RegionReport, RunReport,
    Status, Stop,
};
pub use plan::{Freshness, Phase, Planned, Simulation, Step, plan, simulate};
