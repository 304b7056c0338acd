use std::fs;

use super::*;

#[test]
fn temp_names_say_whose_they_are() {
    let name = OsStr::new("trendsync.prom");
    let tmp = temp_name(name, 4242, 0xdead_beef);
    assert_eq!(tmp, ".trendsync.prom.4242-deadbeef.tmp");
    assert_eq!(temp_pid(&tmp, name), Some(4242));
    assert_eq!(temp_pid(&tmp, OsStr::new("trendsync")), None);
    for other in [
        "trendsync.prom",
        ".trendsync.prom.tmp",
        ".trendsync.prom.12-xyz.tmp",
        ".trendsync.prom.x-deadbeef.tmp",
        ".other.prom.1-deadbeef.tmp",
    ] {
        assert_eq!(temp_pid(OsStr::new(other), name), None, "{other}");
    }
}

/// A temporary file whose writer is gone (a process id that cannot be running) goes
/// with the next write; one of a live writer (this process) stays.
#[cfg(target_os = "linux")]
#[test]
fn the_next_write_removes_what_a_killed_writer_left() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.csv");
    let name = OsStr::new("out.csv");
    // Above the kernel's largest process id (2^22).
    let dead = dir.path().join(temp_name(name, 4_194_305, 1));
    let live = dir.path().join(temp_name(name, std::process::id(), 2));
    fs::write(&dead, "half").expect("a dead writer's temp");
    fs::write(&live, "half").expect("a live writer's temp");
    let elsewhere = DbFiles::of(&dir.path().join("elsewhere/t.db"));
    write(&path, "--output", &elsewhere, None, |f| {
        use std::io::Write;
        f.write_all(b"whole\n").map_err(|source| AtomicError::Io {
            doing: "writing",
            path: path.clone(),
            source,
        })
    })
    .expect("writing");
    assert!(!dead.exists(), "the dead writer's temp is removed");
    assert!(live.exists(), "a live writer's temp is left alone");
    assert_eq!(fs::read_to_string(&path).expect("reading"), "whole\n");
}

#[test]
fn a_failed_fill_leaves_the_old_file_and_no_temp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.csv");
    fs::write(&path, "old\n").expect("an earlier file");
    let elsewhere = DbFiles::of(&dir.path().join("elsewhere/t.db"));
    let err = write(&path, "--output", &elsewhere, None, |_| {
        Err(AtomicError::NoFileName(PathBuf::from("stand-in")))
    })
    .expect_err("the fill failed");
    assert!(matches!(err, AtomicError::NoFileName(_)));
    assert_eq!(fs::read_to_string(&path).expect("reading"), "old\n");
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("listing")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, ["out.csv"]);
}

/// The database and its companions are never written, by any name; nor is one whose
/// name looks like a dead writer's temporary file removed as one.
#[cfg(target_os = "linux")]
#[test]
fn the_database_is_neither_written_nor_tidied_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let name = OsStr::new("out.csv");
    let db = dir.path().join(temp_name(name, 4_194_305, 1));
    fs::write(&db, "data").expect("a database");
    let protected = DbFiles::of(&db);
    let fill = |f: &mut File| {
        use std::io::Write;
        f.write_all(b"export\n").map_err(|source| AtomicError::Io {
            doing: "writing",
            path: PathBuf::from("out.csv"),
            source,
        })
    };
    for target in [
        db.clone(),
        db.with_file_name(format!(
            "{}-wal",
            db.file_name().and_then(OsStr::to_str).unwrap_or_default()
        )),
    ] {
        let err = write(&target, "--output", &protected, None, fill).expect_err("refused");
        assert!(matches!(err, AtomicError::Overwrite(_)), "{err}");
    }
    write(
        &dir.path().join("out.csv"),
        "--output",
        &protected,
        None,
        fill,
    )
    .expect("writing");
    assert_eq!(fs::read_to_string(&db).expect("the database"), "data");
    let names: Vec<_> = fs::read_dir(dir.path())
        .expect("listing")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 2, "the database and the export: {names:?}");
}

#[cfg(unix)]
#[test]
fn only_nothing_or_a_regular_file_is_a_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert_eq!(check(&dir.path().join("new")).expect("new"), Target::New);
    let file = dir.path().join("file");
    fs::write(&file, "x").expect("a file");
    assert!(matches!(check(&file), Ok(Target::Regular { .. })));
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).expect("a symlink");
    let refused = |p: &Path| match check(p) {
        Err(e @ AtomicError::NotAFile { .. }) => e.to_string(),
        other => panic!("{} was not refused: {other:?}", p.display()),
    };
    assert!(refused(&link).contains("a symbolic link"));
    assert!(refused(dir.path()).contains("a directory"));
    assert!(refused(Path::new("/dev/null")).contains("a character device"));
}
