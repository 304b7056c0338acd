//! What can go wrong inside a run besides the upstream: the store and the journal of
//! unmetered calls. Each variant says what was being done; the cause travels as
//! `source`, so that "database or disk is full" reaches the log and `--json`.

use crate::quota::JournalError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{doing}")]
    Store {
        doing: String,
        // Boxed: the store's errors are large, and this travels in every Result.
        #[source]
        source: Box<StoreError>,
    },
    #[error("{doing}: the blocking task did not finish")]
    Task {
        doing: String,
        #[source]
        source: tokio::task::JoinError,
    },
    #[error("journalling a call made while the limiter is down")]
    Journal {
        #[source]
        source: JournalError,
    },
}

#[cfg(test)]
mod tests;
