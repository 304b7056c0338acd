//! Output for people and for machines, in one room: durations and times in one form
//! ([`human`]), tables that fit the terminal ([`table`]), progress bars and the log
//! writer that shares the terminal with them ([`progress`]), text from the upstream
//! made inert on a terminal ([`text`]), JSON on stdout ([`json`]), and typed tables as
//! Parquet files ([`parquet`]). A leaf: it knows nothing of the budget, the upstream
//! or the store.

pub(crate) mod human;
pub(crate) mod json;
pub(crate) mod parquet;
pub(crate) mod progress;
pub mod table;
pub(crate) mod text;
