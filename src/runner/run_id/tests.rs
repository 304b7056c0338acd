//! Unit tests of `runner/run_id.rs`.

use super::*;

#[test]
fn run_ids_differ() {
    assert_ne!(new_run_id(), new_run_id());
}
