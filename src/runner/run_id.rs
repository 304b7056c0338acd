//! The id of a run, unique across hosts and processes.

use std::time::{SystemTime, UNIX_EPOCH};

/// A run id unique across hosts and processes: the start time, then random bits.
pub fn new_run_id() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{ms:x}-{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests;
