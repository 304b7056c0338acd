//! The read-only commands on a `--db` that is not a trendsync database: a typo, a
//! directory, someone else's file. Each is refused (78) saying what is there and what
//! to do, and nothing is created: not the file, nor its `-wal`/`-shm`, nor a directory.

use crate::common::{RedisServer, Scratch};

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
