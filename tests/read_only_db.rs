//! The read-only commands on a `--db` that is not a trendsync database: a typo, a
//! directory, someone else's file. Each is refused (78) saying what is there and what
//! to do, and nothing is created: not the file, nor its `-wal`/`-shm`, nor a directory.

use crate::common::{RedisServer, Scratch, contains};

/// Every read-only command, as a person would type it (`budget` on the embedded
/// limiter, and `status` as the health check too), with `--json` or without.
const READERS: &[&[&str]] = &[
    &["status"],
    &["status", "--stale-after", "2h"],
    &["status", "--json"],
    &["runs"],
    &["runs", "--json"],
    &["search", "cats"],
    &["search", "cats", "--json"],
    &["export"],
    &["export", "--format", "jsonl"],
    &["video", "dQw4w9WgXcQ"],
    &["video", "dQw4w9WgXcQ", "--json"],
    &["budget"],
    &["budget", "--json"],
];

/// Runs every reader on `--db name` in `s` and checks each is refused with 78 saying
/// `says`, and that the scratch directory is left as it was.
fn every_reader_refuses(s: &Scratch, name: &str, says: &str) {
    let before = s.listing();
    for args in READERS {
        let ran = s
            .cmd()
            .args(["--db", name])
            .args(*args)
            .expect_stderr(format!("--db {name}: {says}"))
            .status(78)
            .run();
        if args.contains(&"--json") {
            let json = ran.json();
            assert_eq!(json["status"], "failed", "{json}");
            assert_eq!(json["exit_code"], 78, "{json}");
            assert!(
                json.get("regions").is_none() && json.get("used").is_none(),
                "no empty answer: {json}"
            );
        } else {
            assert_eq!(ran.stdout, "", "{name} {args:?}: no empty answer");
        }
        assert_eq!(s.listing(), before, "{name} {args:?} created nothing");
    }
}

#[test]
fn a_db_that_does_not_exist_is_refused_and_not_created() {
    let s = Scratch::new();
    every_reader_refuses(&s, "nosuch.db", "no such file; run `trendsync run` first");
    assert!(s.listing().is_empty(), "{:?}", s.listing());
}

#[test]
fn a_directory_is_refused_saying_so() {
    let s = Scratch::new();
    std::fs::create_dir(s.file("data")).expect("a directory");
    every_reader_refuses(&s, "data", "is a directory, not a database file");
    let inside: Vec<_> = std::fs::read_dir(s.file("data"))
        .expect("listing")
        .collect();
    assert!(inside.is_empty(), "nothing created inside it");
}

#[test]
fn a_file_that_is_not_a_trendsync_database_is_refused_saying_what_it_is() {
    let s = Scratch::new();
    s.write("notes.txt", "shopping: milk, eggs\n".repeat(20).as_str());
    every_reader_refuses(&s, "notes.txt", "is not an SQLite database");
    // Another program's SQLite database.
    let other = rusqlite::Connection::open(s.file("other.db")).expect("creating");
    other
        .execute_batch("CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x');")
        .expect("filling");
    drop(other);
    every_reader_refuses(&s, "other.db", "is an SQLite database, but not trendsync's");
    // An SQLite database with no tables at all.
    rusqlite::Connection::open(s.file("bare.db"))
        .and_then(|c| c.execute_batch("VACUUM"))
        .expect("an empty SQLite database");
    every_reader_refuses(&s, "bare.db", "is an empty SQLite database");
}

/// A 0-byte file is what `touch`, or a first run killed while creating the file,
/// leaves: SQLite would read it as an empty database, but it holds nothing of
/// trendsync's, and `run` creates the database in it.
#[test]
fn an_empty_file_is_refused_until_a_run_creates_the_database_in_it() {
    let s = Scratch::new();
    s.write("trendsync.db", "");
    every_reader_refuses(
        &s,
        "trendsync.db",
        "is an empty file, not yet a trendsync database",
    );
    s.cmd()
        .args(["budget", "charge", "videos.list", "--json"])
        .run();
    let ran = s.cmd().args(["budget", "--json"]).run();
    assert_eq!(ran.json()["used"], 1);
}

#[test]
fn the_commands_that_write_still_create_the_database() {
    let s = Scratch::new();
    s.cmd().args(["run", "--dry-run", "--json"]).run();
    assert!(s.listing().is_empty(), "{:?}", s.listing());
    s.cmd()
        .args(["budget", "charge", "videos.list", "--count", "3"])
        .run();
    assert!(s.file("trendsync.db").is_file());
    for args in READERS {
        // `video` of an id never seen is 1; `status --stale-after` with nothing fetched
        // is 1 (every region is stale).
        let want = match args[0] {
            "video" => 1,
            "status" if args.contains(&"--stale-after") => 1,
            _ => 0,
        };
        s.cmd()
            .args(*args)
            .allow_stderr("stale: US, GB, DE, FR, IN, BR, AU, CA not fetched")
            .allow_stderr("was never seen")
            .status(want)
            .run();
    }
}

/// A `--db` in a directory that does not exist: every command that writes refuses it
/// (78) naming the directory, as the readers do, instead of failing in SQLite's words
/// with 1; and `prune` of a file that is not there is 78 too. Nothing is created.
#[test]
fn the_commands_that_write_refuse_a_missing_directory_naming_it() {
    let s = Scratch::new();
    for args in [
        &["run", "--region", "US"][..],
        &["backfill"],
        &["budget", "charge", "videos.list"],
        &["budget", "unblock", "search"],
        &["prune", "--older-than", "30d"],
    ] {
        s.cmd()
            .env("YOUTUBE_API_KEY", "a-key")
            .args(["--api-base", "http://127.0.0.1:9/youtube/v3"])
            .args(["--db", "state/trendsync.db"])
            .args(args)
            .expect_stderr(
                "--db state/trendsync.db: the directory state does not exist; check the path (TRENDSYNC_DB)",
            )
            .status(78)
            .stdout("")
            .run();
    }
    s.cmd()
        .args(["--db", "nowhere.db", "prune", "--older-than", "30d"])
        .expect_stderr("there is no database at nowhere.db to prune")
        .status(78)
        .run();
    assert!(s.listing().is_empty(), "{:?}", s.listing());
}

/// A command that fails before it can report still answers a script reading its JSON
/// (docs/commands.md): the writers' refusals of `--db` print the failure object too.
#[test]
fn the_writers_refusals_of_a_db_answer_in_json_too() {
    let s = Scratch::new();
    for args in [
        &["run", "--region", "US", "--json"][..],
        &["budget", "charge", "videos.list", "--json"],
        &["prune", "--older-than", "30d", "--json"],
    ] {
        let json = s
            .cmd()
            .env("YOUTUBE_API_KEY", "a-key")
            .args(["--api-base", "http://127.0.0.1:9/youtube/v3"])
            .args(["--db", "state/trendsync.db"])
            .args(args)
            .expect_stderr("the directory state does not exist")
            .status(78)
            .run()
            .json();
        assert_eq!(json["status"], "failed", "{args:?}: {json}");
        assert_eq!(json["exit_code"], 78, "{args:?}: {json}");
        assert!(
            json["error"]
                .as_str()
                .is_some_and(|e| e.contains("the directory state does not exist")),
            "{args:?}: {json}"
        );
    }
}

#[test]
fn budget_on_redis_needs_no_database() {
    let server = RedisServer::start();
    let s = Scratch::new();
    let ran = s
        .cmd()
        .redis(&server)
        .args(["--db", "nosuch.db", "budget", "--json"])
        .run();
    assert_eq!(ran.json()["used"], 0);
    assert!(s.listing().is_empty(), "{:?}", s.listing());
    // `status` still reads its runs from the database, and so still needs one.
    s.cmd()
        .redis(&server)
        .args(["--db", "nosuch.db", "status"])
        .expect_stderr("no such file")
        .status(78)
        .run();
    assert!(s.listing().is_empty(), "{:?}", s.listing());
}

/// Whether this test runs as root, for whom file permissions do not apply: then the
/// reader is another account.
fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `cmd` run by a user who may only read what others may: as root, the `nobody`
/// account (uid and gid 65534, no groups) running a copy of the binary that it may
/// execute, in `dir` (made world-readable); otherwise this user.
fn as_reader(cmd: crate::common::Trendsync, dir: &std::path::Path) -> crate::common::Trendsync {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        return cmd;
    }
    let copy = dir.join("trendsync-for-reader");
    if !copy.exists() {
        // By `cp`, not by this process: a file this process held open for writing could
        // be inherited by a child another test thread forks at that moment, and exec
        // of it would fail with "Text file busy".
        let copied = std::process::Command::new("cp")
            .arg(assert_cmd::cargo::cargo_bin("trendsync"))
            .arg(&copy)
            .status()
            .expect("running cp");
        assert!(copied.success(), "copying the binary");
    }
    for (path, mode) in [(dir, 0o755), (copy.as_path(), 0o755)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .expect("opening it to others");
    }
    let script = format!("exec '{}' \"$@\"", copy.display());
    cmd.within(
        std::path::Path::new("setpriv"),
        &[
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
            &script,
        ],
    )
}

/// A health check run by an account that may only read the database: a snapshot
/// (0444) in a directory it may not write (0555), with no -wal beside it. `status
/// --stale-after` reads it and succeeds, and nothing is created. The commands that
/// write refuse it (78) saying this user cannot write it.
#[test]
fn a_database_its_user_may_only_read_is_read_by_readers_and_refused_by_writers() {
    use std::os::unix::fs::PermissionsExt;
    let h = crate::common::harness::Harness::new(None);
    h.run(&["run"]);
    let snapshot_dir = h.scratch.file("snapshot");
    std::fs::create_dir(&snapshot_dir).expect("a directory");
    let snapshot = snapshot_dir.join("trendsync.db");
    // The file as the last run closed it: in WAL mode, its -wal checkpointed away.
    assert!(!h.scratch.file("trendsync.db-wal").exists());
    std::fs::copy(h.db_path(), &snapshot).expect("a snapshot");
    let header = std::fs::read(&snapshot).expect("its bytes");
    assert_eq!(header[18..20], [2, 2], "a WAL database");
    std::fs::set_permissions(&snapshot, std::fs::Permissions::from_mode(0o444))
        .expect("read-only file");
    std::fs::set_permissions(&snapshot_dir, std::fs::Permissions::from_mode(0o555))
        .expect("read-only directory");
    let listing = || {
        let mut names: Vec<String> = std::fs::read_dir(&snapshot_dir)
            .expect("listing")
            .map(|e| {
                e.expect("an entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        names.sort();
        names
    };
    for args in [
        &["status", "--stale-after", "2h"][..],
        &["status", "--json"],
        &["runs"],
        &["search", "lighthouse"],
        &["export", "--format", "jsonl"],
        &["budget"],
    ] {
        let cmd = h.scratch.cmd().arg("--db").arg(&snapshot).args(args);
        as_reader(cmd, h.scratch.path()).run();
    }
    assert_eq!(listing(), ["trendsync.db"], "nothing created beside it");

    // The commands that write refuse it (78), saying that this user cannot write it,
    // not that it cannot be read, and call nothing.
    let calls = h.fake.calls().len();
    for args in [
        &["budget", "charge", "videos.list"][..],
        &["run", "--region", "US"],
        &["prune", "--older-than", "30d"],
    ] {
        let cmd = h
            .scratch
            .cmd()
            .env("YOUTUBE_API_KEY", "a-key")
            .args(["--api-base", &h.fake.uri()])
            .arg("--db")
            .arg(&snapshot)
            .args(args)
            .status(78)
            .expect_stderr(format!(
                "--db {}: this user cannot write it (Permission denied",
                snapshot.display()
            ));
        as_reader(cmd, h.scratch.path()).run();
    }
    assert_eq!(h.fake.calls().len(), calls, "no upstream call");
    // A new database in that directory: refused naming the directory.
    let cmd = h
        .scratch
        .cmd()
        .arg("--db")
        .arg(snapshot_dir.join("new.db"))
        .args(["budget", "charge", "videos.list"])
        .status(78)
        .expect_stderr(format!(
            "this user cannot write in its directory {} (Permission denied",
            snapshot_dir.display()
        ));
    as_reader(cmd, h.scratch.path()).run();
    assert_eq!(listing(), ["trendsync.db"], "nothing created beside it");

    // A symbolic link in that directory to a database this user may write, in a
    // directory it may write: SQLite keeps the -wal and -shm beside the link's target,
    // so the link's own directory is not asked to be writable.
    let shared = h.scratch.file("shared");
    std::fs::create_dir(&shared).expect("a directory");
    std::fs::copy(h.db_path(), shared.join("trendsync.db")).expect("a copy");
    for (path, mode) in [
        (shared.as_path(), 0o777),
        (&shared.join("trendsync.db"), 0o666),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .expect("writable by the reader");
    }
    std::fs::set_permissions(&snapshot_dir, std::fs::Permissions::from_mode(0o755))
        .expect("writable, to make the link");
    let link = snapshot_dir.join("link.db");
    std::os::unix::fs::symlink(shared.join("trendsync.db"), &link).expect("a link");
    std::fs::set_permissions(&snapshot_dir, std::fs::Permissions::from_mode(0o555))
        .expect("read-only directory");
    let cmd = h
        .scratch
        .cmd()
        .arg("--db")
        .arg(&link)
        .args(["budget", "charge", "videos.list"])
        .stdout(contains("granted"));
    as_reader(cmd, h.scratch.path()).run();
    std::fs::set_permissions(&snapshot_dir, std::fs::Permissions::from_mode(0o755))
        .expect("writable again, so that the scratch directory can be removed");
}

/// Files the read commands cannot use: one this user may not read, a database cut
/// short, and another program's file that sets a high `user_version`. Each is 78,
/// saying what is there.
#[test]
fn an_unreadable_a_truncated_and_a_foreign_versioned_file_are_refused_saying_what_they_are() {
    use std::os::unix::fs::PermissionsExt;
    let h = crate::common::harness::Harness::new(None);
    h.run(&["run"]);
    let whole = std::fs::read(h.db_path()).expect("the database");
    let s = Scratch::new();

    s.write("truncated.db", "");
    std::fs::write(s.file("truncated.db"), &whole[..whole.len() / 3]).expect("cut short");
    every_reader_refuses(&s, "truncated.db", "is damaged or truncated");

    let other = rusqlite::Connection::open(s.file("versioned.db")).expect("creating");
    other
        .execute_batch("CREATE TABLE notes (t TEXT); PRAGMA user_version = 99;")
        .expect("filling");
    drop(other);
    every_reader_refuses(
        &s,
        "versioned.db",
        "is an SQLite database, but not trendsync's",
    );

    std::fs::write(s.file("locked.db"), &whole).expect("a copy");
    std::fs::set_permissions(s.file("locked.db"), std::fs::Permissions::from_mode(0o000))
        .expect("unreadable");
    for args in [&["status"][..], &["runs", "--json"], &["budget"]] {
        let cmd = s
            .cmd()
            .arg("--db")
            .arg(s.file("locked.db"))
            .args(args)
            .expect_stderr("cannot be read (")
            .status(78);
        as_reader(cmd, s.path()).run();
    }
}

/// `run`, `backfill`, `budget charge` and `prune` given another program's SQLite file
/// refuse it (78) and leave it byte for byte as it was, with nothing beside it.
#[test]
fn the_writers_refuse_a_foreign_sqlite_file_and_leave_it_byte_for_byte() {
    let s = Scratch::new();
    let other = rusqlite::Connection::open(s.file("other.db")).expect("creating");
    other
        .execute_batch(
            "CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x');
             PRAGMA user_version = 9;",
        )
        .expect("filling");
    drop(other);
    let before = std::fs::read(s.file("other.db")).expect("its bytes");
    let listing = s.listing();
    for args in [
        &["run"][..],
        &["run", "--dry-run"],
        &["backfill"],
        &["budget", "charge", "videos.list"],
        &["budget", "unblock"],
        &["prune", "--older-than", "30d"],
    ] {
        s.cmd()
            .args(["--db", "other.db"])
            .args(args)
            .expect_stderr("--db other.db: is an SQLite database, but not trendsync's")
            .status(78)
            .run();
        assert_eq!(
            std::fs::read(s.file("other.db")).expect("its bytes"),
            before,
            "{args:?}"
        );
        assert_eq!(s.listing(), listing, "{args:?} created nothing");
    }
}

/// Another program's database in WAL mode, as that program left it when it died: its
/// writes still in the `-wal` beside it, the index in the `-shm`. Every command that
/// refuses it leaves all three byte for byte as they were: nothing checkpointed, none
/// of them deleted, nothing created beside them.
#[test]
fn a_foreign_wal_database_and_its_wal_and_shm_are_left_byte_for_byte() {
    let s = Scratch::new();
    let live = s.file("live");
    std::fs::create_dir(&live).expect("a directory");
    let other = rusqlite::Connection::open(live.join("other.db")).expect("creating");
    other
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('x');",
        )
        .expect("filling");
    // Copied while the program still has it open: what a crash leaves.
    for suffix in ["", "-wal", "-shm"] {
        std::fs::copy(
            live.join(format!("other.db{suffix}")),
            s.file(&format!("other.db{suffix}")),
        )
        .expect("a copy");
    }
    drop(other);
    let files = ["other.db", "other.db-wal", "other.db-shm"];
    let bytes = || -> Vec<Vec<u8>> {
        files
            .iter()
            .map(|f| std::fs::read(s.file(f)).expect("its bytes"))
            .collect()
    };
    let before = bytes();
    assert!(!before[1].is_empty(), "the writes are in the -wal");
    let listing = s.listing();
    for args in [
        &["run"][..],
        &["status"],
        &["budget"],
        &["budget", "charge", "videos.list"],
        &["export"],
        &["prune", "--older-than", "30d"],
    ] {
        s.cmd()
            .args(["--db", "other.db"])
            .args(args)
            .expect_stderr("--db other.db: is an SQLite database, but not trendsync's")
            .status(78)
            .run();
        assert!(bytes() == before, "{args:?} changed one of {files:?}");
        assert_eq!(s.listing(), listing, "{args:?} created or deleted a file");
    }
}
