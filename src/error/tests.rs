//! Unit tests of `error.rs`: how a chain of causes is said.

use super::*;

#[derive(Debug, thiserror::Error)]
#[error("{doing}")]
struct Doing {
    doing: &'static str,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

fn doing(doing: &'static str, source: impl std::error::Error + Send + Sync + 'static) -> Doing {
    Doing {
        doing,
        source: Some(Box::new(source)),
    }
}

/// rusqlite's error for `code`, with SQLite's message or, as rusqlite gives some, none.
fn sqlite(code: std::ffi::c_int, message: Option<&str>) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), message.map(str::to_owned))
}

#[test]
fn each_link_is_said_once_in_order() {
    let err = doing(
        "storing page 2",
        doing("inserting the videos", std::io::Error::other("disk full")),
    );
    assert_eq!(
        chain(&err),
        "storing page 2: inserting the videos: disk full"
    );
    let err = anyhow::Error::new(err).context("running");
    assert_eq!(
        report(&err),
        "running: storing page 2: inserting the videos: disk full"
    );
}

#[test]
fn a_link_with_nothing_to_say_is_left_out() {
    let err = doing("reading", doing("", std::io::Error::other("gone")));
    assert_eq!(chain(&err), "reading: gone");
}

/// rusqlite's source is the failure again as a bare code: never said, with SQLite's
/// message or without one, under a link of its own or a transparent wrapper.
#[test]
fn sqlites_bare_code_is_not_said_again() {
    #[derive(Debug, thiserror::Error)]
    #[error(transparent)]
    struct Transparent(rusqlite::Error);

    let locked = || sqlite(rusqlite::ffi::SQLITE_BUSY, Some("database is locked"));
    let full = || sqlite(rusqlite::ffi::SQLITE_FULL, None);
    assert_eq!(
        chain(&doing("charging", locked())),
        "charging: database is locked"
    );
    assert_eq!(
        chain(&doing("charging", full())),
        "charging: Error code 13: database or disk is full"
    );
    assert_eq!(
        chain(&doing("upgrading", Transparent(locked()))),
        "upgrading: database is locked"
    );
    assert_eq!(
        chain(&doing("upgrading", Transparent(full()))),
        "upgrading: Error code 13: database or disk is full"
    );
}
