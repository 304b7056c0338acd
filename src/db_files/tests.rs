use std::fs;

use super::*;

/// A directory `dir` holding a database file `t.db`, and its identity.
fn world() -> (tempfile::TempDir, PathBuf, DbFiles) {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let dir = tmp.path().join("dir");
    fs::create_dir(&dir).expect("a directory");
    let db = dir.join("t.db");
    fs::write(&db, b"SQLite format 3\0").expect("a database file");
    let files = DbFiles::of(&db);
    (tmp, db, files)
}

#[track_caller]
fn refused(files: &DbFiles, target: &Path) -> Overwrite {
    files
        .refuse_write(target, "--output")
        .expect_err("writing it is refused")
}

#[test]
fn the_database_under_its_own_path_is_refused_naming_both() {
    let (_tmp, db, files) = world();
    let err = refused(&files, &db);
    assert_eq!(err.part(), Part::Db);
    let text = err.to_string();
    let real = fs::canonicalize(&db).expect("canonical");
    assert!(
        text.starts_with(&format!(
            "--output {} is the database itself (--db {})",
            db.display(),
            real.display()
        )),
        "{text}"
    );
    assert!(text.ends_with("choose another path"), "{text}");
}

#[test]
fn other_spellings_of_the_path_are_refused() {
    let (tmp, db, files) = world();
    let dotted = tmp.path().join("dir/./../dir/t.db");
    assert_eq!(refused(&files, &dotted).part(), Part::Db);
    // The same through a `..` from a sibling, and with the identity taken that way.
    fs::create_dir(tmp.path().join("other")).expect("a sibling");
    let sideways = tmp.path().join("other/../dir/t.db");
    assert_eq!(refused(&files, &sideways).part(), Part::Db);
    assert_eq!(refused(&DbFiles::of(&sideways), &db).part(), Part::Db);
}

#[cfg(unix)]
#[test]
fn a_symbolic_link_to_the_database_is_refused_and_said_to_be_one() {
    let (tmp, db, files) = world();
    let link = tmp.path().join("link.csv");
    std::os::unix::fs::symlink(&db, &link).expect("a symlink");
    let err = refused(&files, &link);
    assert_eq!(err.part(), Part::Db);
    assert!(err.to_string().contains("through a symbolic link"), "{err}");
    assert!(
        err.to_string()
            .ends_with("remove that link, or choose another path")
    );
}

#[cfg(unix)]
#[test]
fn a_hard_link_to_the_database_is_refused() {
    let (tmp, db, files) = world();
    let link = tmp.path().join("copy.csv");
    fs::hard_link(&db, &link).expect("a hard link");
    let err = refused(&files, &link);
    assert_eq!(err.part(), Part::Db);
    assert!(err.to_string().contains("a hard link"), "{err}");
}

#[test]
fn companions_are_refused_before_they_exist() {
    let (tmp, db, files) = world();
    for (suffix, part) in [
        ("-wal", Part::Wal),
        ("-shm", Part::Shm),
        ("-journal", Part::Journal),
    ] {
        let companion = tmp.path().join(format!("dir/../dir/t.db{suffix}"));
        assert!(!companion.exists());
        let err = refused(&files, &companion);
        assert_eq!(err.part(), part, "{suffix}");
        assert!(err.to_string().contains(suffix), "{err}");
    }
    assert!(
        files
            .refuse_write(&db.with_file_name("t.db-walrus"), "x")
            .is_ok()
    );
}

#[cfg(unix)]
#[test]
fn a_database_named_by_a_link_is_known_by_its_target() {
    let (tmp, db, _) = world();
    let link = tmp.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).expect("a symlink");
    let files = DbFiles::of(&link);
    assert_eq!(files.path(), link);
    // SQLite keeps the -wal beside the target, not beside the link.
    assert_eq!(
        refused(&files, &db.with_file_name("t.db-wal")).part(),
        Part::Wal
    );
    assert!(
        files
            .refuse_write(&tmp.path().join("link.db-wal"), "x")
            .is_ok()
    );
}

#[cfg(unix)]
#[test]
fn a_link_into_a_missing_directory_is_resolved_to_where_it_points() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let link = tmp.path().join("link.db");
    let gone = tmp.path().join("gone");
    std::os::unix::fs::symlink(gone.join("t.db"), &link).expect("a symlink");
    let files = DbFiles::of(&link);
    assert_eq!(files.directory(), gone);
    assert_eq!(files.canonical(), gone.join("t.db"));
}

#[test]
fn an_unrelated_file_is_written() {
    let (tmp, _db, files) = world();
    let out = tmp.path().join("dir/out.csv");
    assert!(files.refuse_write(&out, "--output").is_ok());
    fs::write(&out, "old").expect("an earlier export");
    assert!(files.refuse_write(&out, "--output").is_ok());
    assert!(
        files
            .refuse_write(&tmp.path().join("t.db"), "--output")
            .is_ok(),
        "the same name in another directory"
    );
}

#[test]
fn a_database_not_created_yet_is_known_by_its_name() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let db = tmp.path().join("t.db");
    let files = DbFiles::of(&db);
    assert!(!db.exists(), "nothing created");
    assert_eq!(refused(&files, &db).part(), Part::Db);
    assert_eq!(
        refused(&files, &tmp.path().join("./t.db-wal")).part(),
        Part::Wal
    );
}
