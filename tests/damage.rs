//! Files the tool never damages: a path given for something else (`--output`,
//! `--metrics-file`, a lock file beside the database) that names the database or one
//! of its `-wal`, `-shm` and `-journal` files, by any spelling or link, is refused
//! (78) before anything is fetched or charged, and the database is left byte for
//! byte; so are a `--db` or `--metrics-file` in a directory that does not exist, and
//! a crontab line that a newline would break in two.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::common::harness::Harness;
use crate::common::{Costs, Scratch, contains};

/// The database's file and its companions in `dir`, by name, with their bytes (the
/// ones that exist).
fn db_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    ["", "-wal", "-shm", "-journal"]
        .into_iter()
        .filter_map(|suffix| {
            let name = format!("trendsync.db{suffix}");
            std::fs::read(dir.join(&name))
                .ok()
                .map(|bytes| (name, bytes))
        })
        .collect()
}

/// Fails, naming the files and their sizes rather than printing their bytes, when
/// the database's files are not as they were.
#[track_caller]
fn assert_unchanged(before: &BTreeMap<String, Vec<u8>>, dir: &Path, after_what: &str) {
    let after = db_files(dir);
    if &after != before {
        let sizes = |files: &BTreeMap<String, Vec<u8>>| -> Vec<(String, usize)> {
            files.iter().map(|(n, b)| (n.clone(), b.len())).collect()
        };
        panic!(
            "after {after_what} the database's files changed: before {:?}, after {:?}",
            sizes(before),
            sizes(&after)
        );
    }
}

/// A scenario with a database holding one run of US, and the database's canonical
/// path, which the refusals name.
fn with_a_database() -> (Harness<'static>, PathBuf) {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    h.cmd().args(["run", "--region", "US"]).run();
    let db = std::fs::canonicalize(h.db_path()).expect("the database exists");
    (h, db)
}

/// The ways a path can name the database or a companion, relative to the scratch
/// directory the commands run in: as itself, through `..`, through a symbolic link,
/// and its `-wal`, which does not exist between runs.
fn names_of_the_database(h: &Harness<'_>) -> Vec<(String, &'static str)> {
    let scratch = h.scratch.path();
    let dir_name = scratch
        .file_name()
        .expect("the scratch directory has a name")
        .to_string_lossy()
        .into_owned();
    symlink(h.db_path(), scratch.join("link.csv")).expect("a symlink to the database");
    assert!(
        !scratch.join("trendsync.db-wal").exists(),
        "no -wal between runs"
    );
    vec![
        ("trendsync.db".to_owned(), "is the database itself"),
        (
            format!("./../{dir_name}/trendsync.db"),
            "is the database itself",
        ),
        (
            "link.csv".to_owned(),
            "is the database itself, through a symbolic link",
        ),
        (
            "trendsync.db-wal".to_owned(),
            "is the database's write-ahead log (-wal)",
        ),
    ]
}

#[test]
fn export_refuses_an_output_that_is_the_database_or_its_wal() {
    let (h, db) = with_a_database();
    let names = names_of_the_database(&h);
    let before = db_files(h.scratch.path());
    for (output, says) in &names {
        h.bare()
            .args(["export", "--output"])
            .arg(output)
            .expect_stderr(format!("--output {output} {says}"))
            .stderr(contains(format!("(--db {})", db.display())))
            .status(78)
            .run();
        assert_unchanged(&before, h.scratch.path(), &format!("--output {output}"));
    }
    assert!(
        std::fs::symlink_metadata(h.scratch.file("link.csv"))
            .expect("the link")
            .is_symlink()
    );
}

#[test]
fn a_run_refuses_a_metrics_file_that_is_the_database_before_any_call() {
    let (h, db) = with_a_database();
    let names = names_of_the_database(&h);
    let before = db_files(h.scratch.path());
    let calls = h.fake.calls().len();
    let used = h.budget()["used"].clone();
    for (path, says) in &names {
        for run in [
            &["run", "--region", "US"][..],
            &["backfill"],
            &["run", "--dry-run"],
        ] {
            h.cmd()
                .arg("--metrics-file")
                .arg(path)
                .args(run)
                .expect_stderr(format!("--metrics-file {path} {says}"))
                .stderr(contains(format!("(--db {})", db.display())))
                .status(78)
                .run();
            assert_unchanged(&before, h.scratch.path(), &format!("{run:?} {path}"));
        }
    }
    assert_eq!(h.fake.calls().len(), calls, "no call made");
    assert_eq!(h.budget()["used"], used, "nothing charged");
}

/// The lock file trendsync keeps beside the database (every region's lock, the
/// maintenance lock and the runs' are bytes of it) that someone made a link to the
/// database is refused, not opened for writing.
#[test]
fn a_lock_file_that_is_a_link_to_the_database_is_refused() {
    let (h, db) = with_a_database();
    let before = db_files(h.scratch.path());
    let calls = h.fake.calls().len();
    for (lock, target, args) in [
        (
            ".trendsync.db.lock",
            "trendsync.db",
            &["run", "--region", "US"][..],
        ),
        (
            ".trendsync.db.lock",
            "trendsync.db-wal",
            &["run", "--region", "US"],
        ),
        (
            ".trendsync.db.lock",
            "trendsync.db",
            &["budget", "charge", "videos.list"],
        ),
        (
            ".trendsync.db.lock",
            "trendsync.db-shm",
            &["prune", "--older-than", "30d", "--vacuum"],
        ),
    ] {
        let lock = db.with_file_name(lock);
        let _ = std::fs::remove_file(&lock);
        symlink(db.with_file_name(target), &lock).expect("a symlink");
        h.cmd()
            .args(args)
            .expect_stderr(format!("{} is the database", lock.display()))
            .stderr(contains(format!("(--db {})", db.display())))
            .status(78)
            .run();
        std::fs::remove_file(&lock).expect("removing the link");
        assert_unchanged(&before, h.scratch.path(), &format!("{args:?}"));
    }
    assert_eq!(h.fake.calls().len(), calls, "no call made");
}

/// SQLite would create the file where the link points, in a directory that is not
/// there, and fail in its own words (exit 1); every command that uses the database
/// names the directory instead.
#[test]
fn a_db_that_links_into_a_missing_directory_is_refused_naming_it() {
    let s = Scratch::new();
    let gone = s.file("gone");
    symlink(gone.join("trendsync.db"), s.file("link.db")).expect("a symlink");
    for args in [
        &["run", "--region", "US"][..],
        &["backfill"],
        &["run", "--dry-run"],
        &["budget"],
        &["budget", "charge", "videos.list"],
        &["budget", "unblock", "search"],
        &["status"],
        &["runs"],
        &["search", "anything"],
        &["video", "dQw4w9WgXcQ"],
        &["export"],
        &["prune", "--older-than", "30d"],
    ] {
        s.cmd()
            .env("YOUTUBE_API_KEY", "a-key")
            .args(["--api-base", "http://127.0.0.1:9/youtube/v3"])
            .args(["--db", "link.db"])
            .args(args)
            .expect_stderr(format!(
                "--db link.db: the directory {} does not exist",
                gone.display()
            ))
            .status(78)
            .stdout("")
            .run();
    }
    assert!(!gone.exists(), "nothing created");
}

#[test]
fn a_metrics_file_in_a_missing_directory_is_refused_before_any_charge() {
    let (h, _db) = with_a_database();
    let calls = h.fake.calls().len();
    let used = h.budget()["used"].clone();
    for run in [&["run", "--region", "US"][..], &["backfill"]] {
        h.cmd()
            .args(["--metrics-file", "no-such-dir/trendsync.prom"])
            .args(run)
            .expect_stderr(
                "--metrics-file no-such-dir/trendsync.prom: the directory no-such-dir does not exist",
            )
            .status(78)
            .run();
    }
    assert_eq!(h.fake.calls().len(), calls, "no call made");
    assert_eq!(h.budget()["used"], used, "nothing charged");
    assert!(!h.scratch.file("no-such-dir").exists());
}

/// cron reads one line per job: a newline in a path on the line would end the job
/// there and make the rest a line of its own.
#[test]
fn crontab_refuses_a_path_or_argument_holding_a_newline() {
    let s = Scratch::new();
    let odd = s.file("two\nlines");
    std::fs::create_dir(&odd).expect("a directory whose name holds a newline");
    // The default --db, made absolute from a working directory with a newline.
    let mut t = s.cmd().arg("crontab");
    t.cmd.current_dir(&odd);
    t.expect_stderr("--db")
        .stderr(contains("a newline"))
        .status(78)
        .stdout("")
        .run();
    for (flag, value) in [
        ("--db", odd.join("trendsync.db")),
        ("--metrics-file", odd.join("trendsync.prom")),
        ("--api-key-file", s.write("key\rfile", "a-key\n")),
    ] {
        s.cmd()
            .arg(flag)
            .arg(&value)
            .arg("crontab")
            .expect_stderr(flag)
            .stderr(contains("cron reads one line per job"))
            .status(78)
            .stdout("")
            .run();
    }
    s.cmd()
        .args(["crontab", "--binary", "/usr/bin/trend\nsync"])
        .expect_stderr("--binary")
        .stderr(contains("a newline"))
        .status(78)
        .stdout("")
        .run();
}

/// A database whose name is that of a temporary file a killed export left (a process
/// id no process can have) is not tidied away by the next export beside it.
#[cfg(target_os = "linux")]
#[test]
fn an_export_leaves_a_database_named_like_a_dead_writers_temporary_file() {
    let mut h = Harness::new(None);
    h.costs(Costs::one_unit_each().quota(100_000).ceiling(90_000));
    // Above the kernel's largest process id (2^22).
    let db = ".out.csv.4194305-00000001.tmp";
    h.cmd().args(["--db", db, "run", "--region", "US"]).run();
    let before = std::fs::read(h.scratch.file(db)).expect("the database");
    h.bare()
        .args(["--db", db, "export", "--output", "out.csv"])
        .run();
    let after = std::fs::read(h.scratch.file(db)).ok();
    assert!(
        after.as_ref() == Some(&before),
        "the database is still there, as it was: {} bytes before, {:?} after",
        before.len(),
        after.map(|a| a.len())
    );
    assert!(h.scratch.file("out.csv").is_file());
}
