//! trendsync: fetch YouTube trending charts into SQLite under a shared, exact
//! sliding-window quota budget.
//!
//! The binary (`src/main.rs`) is a thin shell over this library; the library exists so
//! that benchmarks and integration tests can reach the limiter and the store directly.

pub mod atomic;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod config;
pub mod db_files;
pub mod error;
pub mod logging;
pub mod mask;
pub mod output;
pub mod quota;
pub mod region_status;
pub mod runner;
pub mod schema;
pub mod sqlite;
pub mod store;
pub mod video;
pub mod youtube;
