//! Unit tests of `runner/run_id.rs`.

use super::*;
use crate::clock::SystemClock;

#[test]
fn run_ids_differ() {
    assert_ne!(new_run_id(&SystemClock), new_run_id(&SystemClock));
}
