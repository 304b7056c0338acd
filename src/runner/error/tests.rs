//! Unit tests of `runner/error.rs`.

use super::*;
use crate::error::chain;

#[test]
fn a_storage_error_keeps_its_cause() {
    let full =
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL), None);
    let err = RunError::Store {
        doing: "storing trending page 2 of US".into(),
        source: Box::new(StoreError::Sqlite {
            path: "t.db".into(),
            context: "inserting the page".into(),
            source: full,
        }),
    };
    let text = chain(&err);
    assert!(
        text.starts_with("storing trending page 2 of US: inserting the page (database t.db): "),
        "{text}"
    );
    assert!(text.contains("database or disk is full"), "{text}");
    assert_eq!(
        text.matches("database or disk is full").count(),
        1,
        "{text}"
    );
}
