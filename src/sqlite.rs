//! What the store and the embedded limiter share about SQLite files.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

/// Opens an existing database so that it is left exactly as found. A connection opened
/// with SQLITE_OPEN_READ_ONLY on a WAL database creates `-wal` and `-shm` files it then
/// cannot remove; a read-write connection that never writes (`query_only`) removes
/// them again when it closes. Only a file this user cannot write falls back to
/// SQLITE_OPEN_READ_ONLY.
pub fn open_for_reading(path: &Path, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let conn = match Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) {
        Ok(conn) => conn,
        Err(_) => Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?,
    };
    conn.busy_timeout(busy_timeout)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_a_wal_database_leaves_no_files_behind() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        {
            let conn = Connection::open(&path).expect("creating");
            conn.pragma_update(None, "journal_mode", "WAL")
                .expect("WAL");
            conn.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1);")
                .expect("writing");
        }
        let before = std::fs::read(&path).expect("reading the file");
        {
            let conn = open_for_reading(&path, Duration::from_secs(1)).expect("opening");
            let n: i64 = conn
                .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
                .expect("reading");
            assert_eq!(n, 1);
            assert!(
                conn.execute("INSERT INTO t VALUES (2)", []).is_err(),
                "query_only refuses writes"
            );
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("listing")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        assert_eq!(names, vec!["t.db"]);
        assert_eq!(std::fs::read(&path).expect("reading the file"), before);
    }
}
