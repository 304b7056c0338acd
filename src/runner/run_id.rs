//! The id of a run, unique across hosts and processes.

use crate::clock::Clock;

/// A run id unique across hosts and processes: the start time by `clock`, then random
/// bits.
pub fn new_run_id(clock: &dyn Clock) -> String {
    // Milliseconds, as ids have always been; 0 before 1970, as before.
    let ms = clock.now().as_i64().div_euclid(1_000).max(0);
    format!("{ms:x}-{:08x}", rand::random::<u32>())
}

#[cfg(test)]
mod tests;
