//! Unit tests of `cmd/maintenance.rs`.

use super::*;
use crate::cmd::exit_code_for;
use crate::error::ExitCode;

#[test]
fn a_writer_behind_a_vacuum_waits_then_stops_with_75() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = DbFiles::of(&dir.path().join("t.db"));
    let vacuum = for_vacuum(&db).expect("the vacuum's lock");
    let started = Instant::now();
    let err = for_writing(&db, Duration::from_millis(300)).expect_err("busy");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(exit_code_for(&err), ExitCode::TryLater);
    assert!(err.to_string().contains("database busy"), "{err}");
    drop(vacuum);
    let first = for_writing(&db, Duration::ZERO)
        .expect("free")
        .expect("held");
    let second = for_writing(&db, Duration::ZERO)
        .expect("shared")
        .expect("held");
    drop((first, second));
}
