//! The store's commands end to end: `export` read back by a CSV reader matches the
//! store row for row (NULLs as empty cells), `prune` through the binary, the
//! upgrade from the version 1 layout killed with SIGKILL at any moment, and the one
//! schema every writer of the file (store, limiter, journal) brings it to.

use std::path::Path;

use rusqlite::Connection;
use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::{RedisServer, Scratch, contains, lacks};

/// A harness whose database holds one complete run of every region.
fn ingested() -> Harness<'static> {
    let h = Harness::new(None);
    h.run(&["run"]);
    h
}

/// The store's trending places, as export must write them: (video id, region, rank,
/// place time, fetch start, views, likes, comments, title, description), in export's
/// order (region, then fetch, then rank).
type Place = (
    String,
    String,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    String,
    String,
);

fn places(db: &Path) -> Vec<Place> {
    let conn = Connection::open(db).expect("opening the database");
    let mut stmt = conn
        .prepare(
            "SELECT v.id, g.code, p.rank, f.fetched_at + p.offset_s, f.fetched_at,
                    p.views, p.likes, p.comments, v.title, v.description
             FROM fetches AS f
             JOIN regions AS g ON g.num = f.region
             JOIN places AS p ON p.fetch = f.num
             JOIN videos AS v ON v.num = p.video
             WHERE f.search = 0
             ORDER BY g.code, f.fetched_at, f.num, p.rank",
        )
        .expect("preparing");
    stmt.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
        ))
    })
    .expect("querying")
    .collect::<rusqlite::Result<_>>()
    .expect("reading")
}

fn secs(rfc3339: &str) -> i64 {
    rfc3339
        .parse::<jiff::Timestamp>()
        .unwrap_or_else(|e| panic!("{rfc3339:?} is not RFC 3339: {e}"))
        .as_second()
}

fn utc_date(secs: i64) -> String {
    jiff::Timestamp::from_second(secs)
        .expect("a time")
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .to_string()
}

fn count(cell: &str) -> Option<i64> {
    (!cell.is_empty()).then(|| cell.parse().expect("a count or an empty cell"))
}

#[test]
fn export_csv_reads_back_as_the_store_row_for_row() {
    let h = ingested();
    let out = h.scratch.file("trending.csv");
    h.bare()
        .args(["export", "--format", "csv", "--output"])
        .arg(&out)
        .run();
    let expected = places(&h.db_path());
    assert!(
        expected.len() >= 20,
        "the fixtures store two pages per region"
    );
    assert!(
        expected.iter().any(|p| p.6.is_none()),
        "the fixtures hide some likes"
    );

    let mut reader = csv::Reader::from_path(&out).expect("opening the CSV");
    let header: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_string)
        .collect();
    assert_eq!(
        header,
        [
            "video_id",
            "trending_date",
            "title",
            "channel_title",
            "category_id",
            "publish_time",
            "tags",
            "views",
            "likes",
            "dislikes",
            "comment_count",
            "thumbnail_link",
            "comments_disabled",
            "ratings_disabled",
            "video_error_or_removed",
            "description",
            "region",
            "rank",
            "fetched_at",
            "category_title",
            "duration_s",
            "chart",
            "channel_id",
            "methodology"
        ]
    );
    let col = |name: &str| header.iter().position(|h| h == name).expect("a column");
    let records: Vec<csv::StringRecord> = reader
        .records()
        .collect::<Result<_, _>>()
        .expect("well-formed CSV");
    assert_eq!(records.len(), expected.len());
    for (record, place) in records.iter().zip(&expected) {
        let (id, region, rank, at, start, views, likes, comments, title, description) = place;
        assert_eq!(&record[col("video_id")], id);
        assert_eq!(&record[col("region")], region);
        assert_eq!(record[col("rank")].parse::<i64>().ok(), Some(*rank));
        assert_eq!(secs(&record[col("fetched_at")]), *at);
        assert!(record[col("fetched_at")].ends_with('Z'), "UTC");
        assert_eq!(record[col("trending_date")], utc_date(*start));
        assert_eq!(count(&record[col("views")]), *views, "{id}");
        assert_eq!(count(&record[col("likes")]), *likes, "{id}");
        assert_eq!(count(&record[col("comment_count")]), *comments, "{id}");
        assert_eq!(&record[col("dislikes")], "");
        assert_eq!(
            &record[col("ratings_disabled")],
            if likes.is_none() { "true" } else { "false" }
        );
        assert_eq!(&record[col("title")], title);
        assert_eq!(&record[col("description")], description);
        assert!(secs(&record[col("publish_time")]) > 0);
        assert_eq!(&record[col("chart")], "", "the overall chart");
    }

    // JSON lines: the same rows, hidden counts as null.
    let ran = h
        .bare()
        .args(["export", "--format", "jsonl", "--region", "us"])
        .run();
    let lines: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let us: Vec<&Place> = expected.iter().filter(|p| p.1 == "US").collect();
    assert_eq!(lines.len(), us.len());
    for (line, place) in lines.iter().zip(us) {
        assert_eq!(line["video_id"], place.0.as_str());
        assert_eq!(line["likes"].as_i64(), place.6);
        assert_eq!(line["views"].as_i64(), place.5);
        assert!(line["dislikes"].is_null());
        if place.6.is_none() {
            assert!(line["likes"].is_null(), "hidden is null, never 0");
        }
    }
}

#[test]
fn export_refuses_a_bad_until_and_a_missing_database() {
    let scratch = Scratch::new();
    scratch
        .cmd()
        .args(["export", "--until", "yesterday"])
        .expect_stderr("RFC 3339")
        .status(2)
        .run();
    scratch
        .cmd()
        .args(["export"])
        .expect_stderr("trendsync.db: no such file")
        .status(78)
        .stderr(contains("trendsync.db: no such file"))
        .run();
    assert_eq!(scratch.listing(), Vec::<String>::new(), "nothing created");
}

/// An `--older-than` longer than any cutoff worth writing was taken, and the dry run
/// said "before @-9223372035058954626s". Now the longest accepted is named (usage,
/// exit 2), and the longest itself prints its cutoff as a time.
#[test]
fn prune_names_the_longest_older_than_it_takes() {
    let h = ingested();
    for huge in ["18446744073709551615s", "36501d"] {
        h.bare()
            .args(["prune", "--dry-run", "--older-than", huge])
            .expect_stderr("is longer than the longest accepted, 36500d")
            .status(2)
            .run();
    }
    h.bare()
        .args(["prune", "--dry-run", "--older-than", "36500d"])
        .stdout(contains("would delete snapshots fetched before 192"))
        .stdout(lacks("@"))
        .run();
}

#[test]
fn prune_through_the_binary_reports_and_keeps_the_file_consistent() {
    let h = ingested();
    let db = h.db_path();
    // Make the whole run 100 days old.
    {
        let conn = Connection::open(&db).expect("opening");
        conn.execute_batch(
            "UPDATE fetches SET fetched_at = fetched_at - 100 * 86400;
             UPDATE videos SET last_seen_at = last_seen_at - 100 * 86400;",
        )
        .expect("ageing the snapshots");
    }
    let videos = |conn: &Connection| -> i64 {
        conn.query_row("SELECT count(*) FROM videos", [], |r| r.get(0))
            .expect("counting")
    };
    let before = videos(&h.db());
    assert!(before > 0);

    let dry = h
        .bare()
        .args(["prune", "--older-than", "90d", "--dry-run", "--json"])
        .run();
    let dry = dry.json();
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["videos_deleted"].as_i64(), Some(before));
    assert_eq!(videos(&h.db()), before, "a dry run deletes nothing");

    let ran = h
        .bare()
        .args(["prune", "--older-than", "90d", "--vacuum", "--json"])
        .run();
    let done = ran.json();
    assert_eq!(done["dry_run"], false);
    assert_eq!(done["deleted"], dry["deleted"]);
    assert_eq!(done["videos_deleted"], dry["videos_deleted"]);
    assert!(done["deleted"]["places"].as_i64() > Some(0));
    assert!(done["bytes_freed"].as_u64() > Some(0));
    assert!(
        done["cutoff"]
            .as_str()
            .is_some_and(|c| c.parse::<jiff::Timestamp>().is_ok())
    );

    let conn = Connection::open(&db).expect("opening");
    assert_eq!(videos(&conn), 0);
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    conn.execute(
        "INSERT INTO videos_fts (videos_fts, rank) VALUES ('integrity-check', 1)",
        [],
    )
    .expect("the full-text index agrees with the videos");
    // The budget's tables are still there and still hold the run's charges.
    let charges: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name LIKE 'quota%'",
            [],
            |r| r.get(0),
        )
        .expect("listing");
    assert!(charges > 0);
}

// ---- the upgrade, killed ----

/// What a version 1 reader sees, in either layout.
fn snapshot(db: &Path) -> (u32, Vec<String>) {
    let conn = Connection::open(db).expect("opening");
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    let mut rows = Vec::new();
    for sql in [
        "SELECT run_id || region || rank || video_id || fetched_at FROM trending",
        "SELECT video_id || fetched_at || run_id || ifnull(view_count, 'N') || ifnull(like_count, 'N') FROM video_stats",
        "SELECT id || title || ifnull(view_count, 'N') FROM videos",
    ] {
        let mut stmt = conn.prepare(sql).expect("preparing");
        let mut part: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .expect("querying")
            .collect::<rusqlite::Result<_>>()
            .expect("reading");
        part.sort();
        rows.push(part.len().to_string());
        rows.extend(part);
    }
    (version, rows)
}

/// A version 1 file with `runs` hourly runs of one 200-place region.
fn v1_year_slice(db: &Path, runs: i64) {
    trendsync::store::Store::create_at_version(db, 1).expect("creating a version 1 file");
    let mut conn = Connection::open(db).expect("opening");
    let tx = conn.transaction().expect("a transaction");
    // Every video is on some chart (run r's ranks hold videos r..r+199): prune deletes
    // videos no snapshot refers to, and would take one that none ever did.
    for v in 0..(runs + 199) {
        tx.execute(
            "INSERT INTO videos (id, title, description, channel_id, channel_title, published_at,
                 tags, tags_text, view_count, first_seen_at, last_seen_at)
             VALUES (?1, ?2, 'words words', 'UC', 'channel', '2024-01-01T00:00:00Z',
                 '[\"t\"]', 't', ?3, 0, 0)",
            rusqlite::params![
                format!("v{v:06}"),
                format!("title {v}"),
                (v % 3 != 0).then_some(v)
            ],
        )
        .expect("a video");
    }
    for run in 0..runs {
        let run_id = format!("run{run:05}");
        let at = 1_000_000 + run * 3600;
        tx.execute(
            "INSERT INTO runs (run_id, kind, started_at, status) VALUES (?1, 'run', ?2, 'complete')",
            rusqlite::params![run_id, at],
        )
        .expect("a run");
        for rank in 1..=200i64 {
            let video = format!("v{:06}", run + rank - 1);
            let fetched_at = at + (rank - 1) / 50;
            tx.execute(
                "INSERT INTO trending VALUES (?1, 'US', ?2, ?3, ?4)",
                rusqlite::params![run_id, rank, video, fetched_at],
            )
            .expect("a place");
            tx.execute(
                "INSERT INTO video_stats (video_id, fetched_at, run_id, view_count, like_count)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![
                    video,
                    fetched_at,
                    run_id,
                    run * rank,
                    (rank % 7 != 0).then_some(rank)
                ],
            )
            .expect("counts");
        }
    }
    tx.commit().expect("committing");
}

#[test]
fn an_upgrade_killed_at_any_moment_leaves_one_version_and_the_next_start_finishes() {
    let scratch = Scratch::new();
    let db = scratch.file("trendsync.db");
    v1_year_slice(&db, 150);
    let latest = trendsync::schema::latest_version();
    crate::common::upgrade_killed_at_six_moments(
        &scratch,
        &db,
        (1, latest),
        64 * 1024,
        [40, 150, 400],
        snapshot,
    );
    let conn = Connection::open(&db).expect("opening");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    let owed: i64 = conn
        .query_row("SELECT count(*) FROM store_meta", [], |r| r.get(0))
        .expect("store_meta");
    assert_eq!(owed, 0, "the vacuum after the upgrade is done");
}

// ---- one schema for the whole file ----

/// The store (`prune`), the embedded limiter (`budget charge`) and the journal (the
/// ledger `budget charge` keeps against Redis) all write the one file, and all bring
/// it up to the same schema: started together on a new file, as cron may, each
/// succeeds and the file ends at the latest version once.
#[test]
fn writers_of_every_kind_starting_together_on_a_new_file_all_succeed() {
    let scratch = Scratch::new();
    let redis = RedisServer::start();
    let db = scratch.file("trendsync.db");
    // An empty file is a new database; `prune` refuses a missing one as a typo.
    std::fs::write(&db, b"").expect("creating an empty file");
    // The Redis charges spend another budget.key: one key charged on both kinds of
    // limiter at once is refused (78) by whichever comes second.
    let shared = scratch.write(
        "shared-costs.toml",
        &crate::common::Costs::youtube().key("shared").to_toml(),
    );
    let per_kind = 2;
    let children: Vec<_> = (0..per_kind)
        .flat_map(|_| {
            [
                scratch
                    .cmd()
                    .arg("--db")
                    .arg(&db)
                    .args(["prune", "--older-than", "36500d"])
                    .start(),
                scratch
                    .cmd()
                    .arg("--db")
                    .arg(&db)
                    .args(["budget", "charge", "videos.list"])
                    .start(),
                scratch
                    .cmd()
                    .arg("--db")
                    .arg(&db)
                    .redis(&redis)
                    .costs(&shared)
                    .args(["budget", "charge", "videos.list"])
                    .start(),
            ]
        })
        .collect();
    for command in children {
        command.finish();
    }
    let conn = Connection::open(&db).expect("opening");
    let number = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).expect(sql) };
    assert_eq!(
        number("PRAGMA user_version"),
        i64::from(trendsync::schema::latest_version())
    );
    assert_eq!(
        number("SELECT count(*) FROM quota_entry"),
        per_kind,
        "the embedded limiter's charges"
    );
    assert_eq!(
        number("SELECT count(*) FROM quota_journal WHERE metered = 1"),
        per_kind,
        "the ledger of the charges Redis granted"
    );
    assert_eq!(
        number("SELECT count(*) FROM sqlite_schema WHERE name = 'quota_schema'"),
        0
    );
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
}

/// `budget charge` on a file that still needs the store's long data step (version 1:
/// step 3 rewrites every snapshot) charges without running it: the limiter's and the
/// journal's tables are created beside the old ones, the store's are left as they are
/// and the version stays, for the next `run` (or `prune`) to bring up.
#[test]
fn budget_charge_on_a_file_needing_the_stores_data_step_leaves_that_step_to_run() {
    let scratch = Scratch::new();
    let db = scratch.file("trendsync.db");
    v1_year_slice(&db, 3);
    let count = |sql: &str| -> i64 {
        let conn = Connection::open(&db).expect("opening");
        conn.query_row(sql, [], |r| r.get(0)).expect(sql)
    };
    let trending = count("SELECT count(*) FROM trending");
    for _ in 0..2 {
        let charged = scratch
            .cmd()
            .arg("--db")
            .arg(&db)
            .args(["budget", "charge", "videos.list", "--json"])
            .run();
        assert_eq!(charged.json()["granted"], true, "{}", charged.stdout);
    }
    assert_eq!(
        count("PRAGMA user_version"),
        1,
        "the store's steps did not run"
    );
    assert_eq!(count("SELECT count(*) FROM trending"), trending);
    assert_eq!(
        count("SELECT count(*) FROM sqlite_schema WHERE name = 'places'"),
        0,
        "step 3's tables are not there"
    );
    assert_eq!(count("SELECT sum(units) FROM quota_entry"), 2);

    scratch
        .cmd()
        .arg("--db")
        .arg(&db)
        .args(["prune", "--older-than", "36500d"])
        .run();
    assert_eq!(
        count("PRAGMA user_version"),
        i64::from(trendsync::schema::latest_version())
    );
    assert_eq!(count("SELECT count(*) FROM places"), trending);
    assert_eq!(
        count("SELECT sum(units) FROM quota_entry"),
        2,
        "the charges stay"
    );
}

/// A file from a newer trendsync is refused by every command that opens it, with the
/// same message and exit 1, and left as it was.
#[test]
fn a_newer_file_is_refused_by_every_command_alike() {
    let scratch = Scratch::new();
    let db = scratch.file("trendsync.db");
    scratch
        .cmd()
        .arg("--db")
        .arg(&db)
        .args(["budget", "charge", "videos.list"])
        .run();
    let newer = trendsync::schema::latest_version() + 1;
    Connection::open(&db)
        .expect("opening")
        .execute_batch(&format!("PRAGMA user_version = {newer}"))
        .expect("a newer version");
    let before = std::fs::read(&db).expect("reading the file");
    let sentence = format!(
        "has schema version {newer}, but this build of trendsync supports at most version {}; \
         upgrade trendsync",
        trendsync::schema::latest_version()
    );
    for args in [
        &["budget", "charge", "videos.list"][..],
        &["budget"],
        &["prune", "--older-than", "36500d"],
        &["run", "--dry-run"],
        &["status"],
    ] {
        scratch
            .cmd()
            .arg("--db")
            .arg(&db)
            .args(args)
            .expect_stderr(&sentence)
            .status(1)
            .run();
    }
    assert_eq!(std::fs::read(&db).expect("reading the file"), before);
}

/// Moves every fetch of each region to the RFC 3339 time given for it.
fn move_fetches(conn: &Connection, moves: &[(&str, &str)]) {
    for (code, at) in moves {
        let at = at.parse::<jiff::Timestamp>().expect("a time").as_second();
        let moved = conn
            .execute(
                "UPDATE fetches SET fetched_at = ?1
                 WHERE region = (SELECT num FROM regions WHERE code = ?2)",
                rusqlite::params![at, code],
            )
            .expect("moving a fetch");
        assert!(moved > 0, "{code}");
    }
}

/// `--since` and `--until` take a date, a duration or an RFC 3339 time alike; a date
/// is its whole UTC day, so `--since 2026-11-01 --until 2026-11-30` is November, to
/// the second on both sides.
#[test]
fn export_since_and_until_a_date_is_exactly_those_utc_days() {
    let h = ingested();
    let conn = Connection::open(h.db_path()).expect("opening the database");
    move_fetches(
        &conn,
        &[
            ("US", "2026-10-31T23:59:59Z"),
            ("GB", "2026-11-01T00:00:00Z"),
            ("DE", "2026-11-30T23:59:59Z"),
            ("FR", "2026-12-01T00:00:00Z"),
        ],
    );
    drop(conn);
    let regions_in = |args: &[&str]| -> Vec<String> {
        let ran = h
            .bare()
            .args(["export", "--format", "jsonl", "--region", "US"])
            .args(["--region", "GB", "--region", "DE", "--region", "FR"])
            .args(args)
            .run();
        let mut found: Vec<String> = ran
            .stdout
            .lines()
            .map(|l| {
                let row: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                row["region"].as_str().expect("a region").to_owned()
            })
            .collect();
        found.sort();
        found.dedup();
        found
    };
    assert_eq!(
        regions_in(&["--since", "2026-11-01", "--until", "2026-11-30"]),
        ["DE", "GB"]
    );
    assert_eq!(
        regions_in(&[
            "--since",
            "2026-11-01T00:00:00Z",
            "--until",
            "2026-11-30T23:59:58Z"
        ]),
        ["GB"]
    );
    // A date alone on either side.
    assert_eq!(regions_in(&["--until", "2026-10-31"]), ["US"]);
    assert_eq!(regions_in(&["--since", "2026-12-01"]), ["FR"]);

    // `runs --since` takes the same forms.
    let runs_since = |when: &str| -> usize {
        let ran = h.bare().args(["runs", "--json", "--since", when]).run();
        ran.json()["runs"].as_array().expect("runs").len()
    };
    assert!(runs_since("2000-01-01") > 0);
    assert_eq!(runs_since("2999-01-01T00:00:00Z"), 0);
}

/// The upstream changed what its view counts mean on 2026-08-27: fetches on either
/// side carry two `methodology` values in every export (the quota changes of June 2026
/// in between mark nothing), the file's `upstream_changes` lists the changes, and
/// `video` marks where a video's counts cross one.
#[test]
fn exports_and_video_mark_the_upstreams_change_of_meaning() {
    let h = ingested();
    let conn = Connection::open(h.db_path()).expect("opening the database");
    move_fetches(
        &conn,
        &[
            ("US", "2026-08-26T12:00:00Z"),
            ("GB", "2026-08-28T12:00:00Z"),
        ],
    );
    let changes: Vec<(String, String)> = conn
        .prepare("SELECT id, affects FROM upstream_changes ORDER BY effective_at")
        .expect("the table of changes")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("reading it")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    for id in [
        "2025-03-31",
        "2025-07-21",
        "2026-06-01",
        "2026-06-03",
        "2026-08-27",
    ] {
        assert!(changes.iter().any(|(c, _)| c == id), "{id} in {changes:?}");
    }
    drop(conn);
    let export = |args: &[&str]| -> Vec<Value> {
        let ran = h
            .bare()
            .args([
                "export", "--format", "jsonl", "--region", "US", "--region", "GB",
            ])
            .args(args)
            .run();
        ran.stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    };
    let rows = export(&[]);
    let marked = |region: &str| -> Vec<&Value> {
        let mut m: Vec<&Value> = rows
            .iter()
            .filter(|r| r["region"] == region)
            .map(|r| &r["methodology"])
            .collect();
        m.dedup();
        m
    };
    assert_eq!(marked("US"), [&Value::from("2025-07-21")]);
    assert_eq!(marked("GB"), [&Value::from("2026-08-27")]);
    for per in ["day", "fetch"] {
        let rows = export(&["--per", per]);
        assert!(
            rows.iter().all(|r| r["methodology"].is_string()),
            "--per {per}"
        );
    }
    // The counts series too, and the CSV's last column.
    let counts = export(&["--counts"]);
    assert!(counts.iter().any(|r| r["methodology"] == "2026-08-27"));
    assert!(counts.iter().any(|r| r["methodology"] == "2025-07-21"));
    let csv = h.bare().args(["export", "--region", "GB"]).run().stdout;
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().expect("a header").clone();
    assert_eq!(header.iter().next_back(), Some("methodology"));
    let records: Vec<csv::StringRecord> = reader
        .records()
        .collect::<Result<_, _>>()
        .expect("CSV rows");
    assert!(!records.is_empty());
    assert!(
        records
            .iter()
            .all(|r| r.iter().next_back() == Some("2026-08-27"))
    );

    // A video charted on both sides of the change: its counts cross it.
    let us: Vec<&str> = rows
        .iter()
        .filter(|r| r["region"] == "US")
        .filter_map(|r| r["video_id"].as_str())
        .collect();
    let both = rows
        .iter()
        .filter(|r| r["region"] == "GB")
        .filter_map(|r| r["video_id"].as_str())
        .find(|id| us.contains(id))
        .expect("a video on the charts of both regions");
    let video = h.bare().args(["video", both, "--json"]).run().json();
    let crosses = video["crosses"].as_array().expect("crosses");
    assert_eq!(crosses.len(), 1, "{video}");
    assert_eq!(crosses[0]["id"], "2026-08-27");
    assert_eq!(crosses[0]["effective_at"], "2026-08-27T00:00:00Z");
    let text = h.bare().args(["video", both]).run().stdout;
    assert!(
        text.contains("-- 2026-08-27 upstream change: public view counts are unified"),
        "{text}"
    );
}

/// `export --per video`: one row per (video, region, chart), in CSV and JSON lines
/// alike, agreeing with the per-fetch export and with the file's `chart_history` view.
#[test]
fn export_per_video_is_the_chart_history_in_every_format() {
    let h = ingested();
    let fetch_rows: Vec<Value> = h
        .bare()
        .args(["export", "--format", "jsonl", "--region", "US"])
        .run()
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let rows: Vec<Value> = h
        .bare()
        .args([
            "export", "--per", "video", "--format", "jsonl", "--region", "US",
        ])
        .run()
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let mut expected: Vec<(String, String, i64)> = fetch_rows
        .iter()
        .map(|r| {
            (
                r["video_id"].as_str().expect("an id").to_owned(),
                r["chart"].to_string(),
                r["rank"].as_i64().expect("a rank"),
            )
        })
        .collect();
    expected.sort();
    let mut got: Vec<(String, String, i64)> = rows
        .iter()
        .map(|r| {
            assert_eq!(r["days_on_chart"], 1, "{r}");
            assert_eq!(r["entries"], 1, "{r}");
            assert_eq!(r["fetches"], 1, "{r}");
            assert_eq!(r["first_seen"], r["best_rank_at"], "{r}");
            assert!(r["methodology"].is_string(), "{r}");
            (
                r["video_id"].as_str().expect("an id").to_owned(),
                r["chart"].to_string(),
                r["best_rank"].as_i64().expect("a rank"),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got, expected,
        "one fetch: each place is its video's whole history"
    );

    let csv = h
        .bare()
        .args(["export", "--per", "video", "--region", "US"])
        .run()
        .stdout;
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .expect("a header")
        .iter()
        .map(str::to_owned)
        .collect();
    for column in [
        "days_on_chart",
        "entries",
        "best_rank",
        "best_rank_at",
        "methodology",
    ] {
        assert!(header.iter().any(|c| c == column), "{column} in {header:?}");
    }
    assert_eq!(reader.records().count(), rows.len());

    let conn = Connection::open(h.db_path()).expect("opening the database");
    let in_view: i64 = conn
        .query_row(
            "SELECT count(*) FROM chart_history WHERE region = 'US'",
            [],
            |r| r.get(0),
        )
        .expect("the view");
    assert_eq!(in_view as usize, rows.len());
}
