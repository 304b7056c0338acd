//! Unit tests of `sqlite.rs`.

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
        let conn = open_for_reading(&path).expect("opening");
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

#[test]
fn writers_opening_a_file_together_each_get_wal_and_their_own_durability() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("t.db");
    let opened: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let path = &path;
                s.spawn(move || {
                    let durability = if i % 2 == 0 {
                        Durability::Normal
                    } else {
                        Durability::Full
                    };
                    let conn = open_for_writing(path, durability)?;
                    let synchronous: i64 = conn
                        .query_row("PRAGMA synchronous", [], |r| r.get(0))
                        .map_err(|source| OpenError::Sqlite {
                        doing: "reading synchronous",
                        source,
                    })?;
                    Ok::<_, OpenError>((durability, synchronous))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    for result in opened {
        let (durability, synchronous) = result.expect("every writer opens");
        // 1 is NORMAL, 2 is FULL.
        let want = match durability {
            Durability::Normal => 1,
            Durability::Full => 2,
        };
        assert_eq!(synchronous, want, "{durability:?}");
    }
    let conn = open_for_reading(&path).expect("opening");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .expect("reading the journal mode");
    assert_eq!(mode, "wal");
}
