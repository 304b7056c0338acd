//! What the store's tests share: a file in a temporary directory, the store opened on
//! it, the videos they store, and the ways they read a file back (its rows, its query
//! plans).
//!
//! The store's tests open files made of the store's own steps ([`FILE`]), not the
//! whole file's list: that list is composed above the store (`crate::schema`), which
//! a lower room does not reach, and the store reads and writes only its own tables.
//! What only the composed file shows (the other owners' tables beside the store's,
//! its version) is tested with the composition, in `schema/tests.rs`.

use std::path::{Path, PathBuf};

use rusqlite::Connection;
use tempfile::TempDir;

use super::schema::{
    ANALYSTS, CHARTS, COMPACT, FOLLOW_UPS, RUN_DURATIONS, RUN_LIMITERS, RUN_OUTCOMES, VIDEOS,
};
use super::{Store, StoreError, VideoRecord};
use crate::sqlite::{Migration, version_of};

/// Every step of the store's, in the order the file's one list has them, the other
/// owners' steps left out: a file of the store's alone. The schema's tests check that
/// it is the file's list less the other owners' steps.
pub(crate) const FILE: &[Migration] = &[
    VIDEOS,
    RUN_OUTCOMES,
    COMPACT,
    CHARTS,
    FOLLOW_UPS,
    ANALYSTS,
    RUN_DURATIONS,
    super::changes::STEP,
    super::chart_history::STEP,
    super::text_ids::STEP,
    RUN_LIMITERS,
    super::best_matches::STEP,
    super::best_matches::COUNTS,
    super::slot_misses::STEP,
    super::fetch_slots::STEP,
    super::outbox::STEP,
];

/// The version [`open`] brings a file to: as many as [`FILE`] has steps.
pub(crate) fn latest() -> u32 {
    version_of(FILE)
}

/// The steps of [`FILE`] before `step`: a file as the build before `step` left the
/// store's tables.
pub(crate) fn steps_before(step: &Migration) -> &'static [Migration] {
    let at = FILE
        .iter()
        .position(|m| m.description == step.description && m.sql == step.sql)
        .expect("a step of the store's");
    &FILE[..at]
}

/// Opens (creating if needed) the store at `path` and brings it through [`FILE`], as
/// `Store::open` does through the whole file's list.
pub(crate) fn open(path: impl AsRef<Path>) -> Result<Store, StoreError> {
    Store::open_with(path.as_ref(), FILE)
}

/// Opens the store at `path` only to read, as `Store::open_read_only` does, for a
/// build whose list is [`FILE`].
pub(crate) fn open_read_only(path: impl AsRef<Path>) -> Result<Option<Store>, StoreError> {
    Store::open_read_only_with(path.as_ref(), FILE)
}

/// A path for a database file in a new temporary directory, which goes when the
/// returned [`TempDir`] is dropped. The file itself does not exist yet.
pub(crate) fn temp_db() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("trendsync.db");
    (dir, path)
}

/// A connection to the file at `path` that goes around the store, to plant rows or
/// read what the store wrote.
pub(crate) fn raw(path: &Path) -> Connection {
    Connection::open(path).expect("opening the file directly")
}

/// A video with every field the upstream may send filled in, so that each column's
/// way into the file and back is exercised. Tests change the fields they are about.
pub fn video(id: &str, title: &str) -> VideoRecord {
    VideoRecord {
        id: id.to_string(),
        title: title.to_string(),
        description: format!("description of {id}"),
        channel_id: format!("UC{id}"),
        channel_title: "Some Channel".to_string(),
        published_at: "2024-05-01T12:00:00Z".to_string(),
        category_id: Some("10".to_string()),
        tags: Some(vec!["music".to_string(), "live".to_string()]),
        default_language: Some("en".to_string()),
        default_audio_language: Some("en-US".to_string()),
        duration_s: Some(217),
        live_broadcast_content: Some("none".to_string()),
        thumbnail_url: Some(format!("https://i.ytimg.com/vi/{id}/hqdefault.jpg")),
        region_restriction: Some(r#"{"blocked":["DE"]}"#.to_string()),
        view_count: Some(1000),
        like_count: Some(100),
        comment_count: Some(10),
    }
}

/// Every row `sql` yields, each as its cells' debug text joined by `|` (NULL as
/// `Null`), sorted: what a table or view holds, as a multiset.
pub(crate) fn dump(conn: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn.prepare(sql).expect("a query to dump");
    let n = stmt.column_count();
    let mut rows: Vec<String> = stmt
        .query_map([], |row| {
            (0..n)
                .map(|i| {
                    row.get::<_, rusqlite::types::Value>(i)
                        .map(|v| format!("{v:?}"))
                })
                .collect::<rusqlite::Result<Vec<_>>>()
                .map(|cells| cells.join("|"))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<_>>())
        .expect("the rows");
    rows.sort();
    rows
}

/// The steps of `EXPLAIN QUERY PLAN sql`, every parameter bound to "US".
pub(crate) fn query_plan(conn: &Connection, sql: &str) -> Vec<String> {
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("a query to explain");
    for i in 1..=stmt.parameter_count() {
        stmt.raw_bind_parameter(i, "US")
            .expect("binding a parameter");
    }
    let mut rows = stmt.raw_query();
    let mut details = Vec::new();
    while let Some(row) = rows.next().expect("a step of the plan") {
        details.push(row.get::<_, String>(3).expect("the step's detail"));
    }
    details
}
