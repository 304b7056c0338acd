//! trendsync: fetch YouTube trending charts into SQLite under a shared, exact
//! sliding-window quota budget.
//!
//! The binary (`src/main.rs`) is a thin shell over this library; the library exists so
//! that benchmarks and integration tests can reach the limiter and the store directly.

pub(crate) mod atomic;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub(crate) mod dataset;
pub(crate) mod db_files;
pub mod error;
pub(crate) mod logging;
pub(crate) mod mask;
pub mod output;
pub mod quota;
pub mod region_status;
pub(crate) mod reports;
pub(crate) mod runner;
pub mod schema;
pub mod sqlite;
pub mod store;
pub(crate) mod video;
pub(crate) mod youtube;
