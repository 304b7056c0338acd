//! The database as an analyst opens it (issue 19): a real Datasette, serving a file
//! a real run filled from the fake upstream with the shipped metadata file, finds the
//! full-text index of `videos` (a search box, and `?_search=` filters), hides the
//! internal tables, and runs the canned queries. Datasette's own test for a full-text
//! index runs against the file through rusqlite as well.
//!
//! Datasette is found as `TRENDSYNC_TEST_DATASETTE` (scripts/test installs a pinned
//! one into a virtualenv and exports it), then `datasette` on `PATH`.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use crate::common::harness::Harness;

/// The shipped metadata file.
const METADATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/contrib/datasette/metadata.json"
);

/// A video of the fixtures whose title alone has this word.
const WORD: &str = "Ammonite";
const WORD_VIDEO: &str = "Nb3vC6xZ8aS";

fn datasette_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("TRENDSYNC_TEST_DATASETTE") {
        return PathBuf::from(p);
    }
    for dir in std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
    {
        let candidate = dir.join("datasette");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "datasette is not installed, and the tests check the database as Datasette shows \
         it: run scripts/test (it installs a pinned Datasette into target/analysts-venv \
         and points TRENDSYNC_TEST_DATASETTE at it), or point TRENDSYNC_TEST_DATASETTE at \
         a datasette binary"
    );
}

/// A `datasette serve` on a loopback port, killed when dropped.
struct Datasette {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Datasette {
    /// Serves `db` with the shipped metadata and waits until it answers.
    fn serve(db: &Path) -> Datasette {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log = db.with_extension("datasette.log");
        let child = Command::new(datasette_binary())
            .arg("serve")
            .arg(db)
            .args(["--metadata", METADATA, "--host", "127.0.0.1", "--port"])
            .arg(port.to_string())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("datasette's log"))
            .stderr(std::fs::File::create(db.with_extension("datasette.err")).expect("a log"))
            .spawn()
            .expect("starting datasette");
        let mut served = Datasette { child, port, log };
        let started = Instant::now();
        loop {
            if let Ok((200, _)) = served.try_get("/-/versions.json") {
                return served;
            }
            if let Ok(Some(status)) = served.child.try_wait() {
                panic!("datasette exited with {status}: {}", served.logs());
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "datasette did not answer on port {port} within a minute: {}",
                served.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn logs(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        format!(
            "{}{}",
            read(&self.log),
            read(&self.log.with_extension("err"))
        )
    }

    /// One HTTP/1.0 GET: status and body.
    fn try_get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\n\r\n",
            self.port
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Ok((status, body.to_string()))
    }

    fn get(&self, path: &str) -> String {
        let (status, body) = self
            .try_get(path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}: {}", self.logs()));
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    fn json(&self, path: &str) -> Value {
        let body = self.get(path);
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }

    /// The rows of a table, view or canned query as objects.
    fn rows(&self, path: &str) -> Vec<Value> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let got = self.json(&format!("{path}{sep}_shape=objects&_size=max"));
        got["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("GET {path}: no rows: {got}"))
            .clone()
    }
}

impl Drop for Datasette {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A database filled by one complete run of every region from the fake upstream,
/// named as the metadata file expects (`trendsync.db`).
fn ingested() -> Harness<'static> {
    let h = Harness::new(None);
    h.run(&["run"]);
    assert_eq!(
        h.db_path().file_name().and_then(|n| n.to_str()),
        Some("trendsync.db")
    );
    h
}

fn strings(rows: &[Value], key: &str) -> Vec<String> {
    rows.iter()
        .map(|r| {
            r[key]
                .as_str()
                .map_or_else(|| r[key].to_string(), str::to_owned)
        })
        .collect()
}

fn column<T: rusqlite::types::FromSql>(conn: &Connection, sql: &str) -> Vec<T> {
    let mut stmt = conn.prepare(sql).expect("a query");
    stmt.query_map([], |r| r.get(0))
        .expect("running it")
        .collect::<rusqlite::Result<_>>()
        .expect("its rows")
}

#[test]
fn datasette_searches_videos_hides_internals_and_runs_the_canned_queries() {
    let h = ingested();
    let conn = h.db();
    let served = Datasette::serve(&h.db_path());

    // The database page: the full-text index found for videos, internals hidden.
    let db = served.json("/trendsync.json");
    let tables = db["tables"].as_array().expect("tables");
    let table = |name: &str| {
        tables
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no table {name}: {db}"))
    };
    assert_eq!(table("videos")["fts_table"], "videos_fts", "{db}");
    for internal in [
        "regions",
        "run_nums",
        "searches",
        "fetches",
        "places",
        "extra_counts",
        "video_regions",
        "missing_charts",
        "follow_state",
        "follow_counts",
        "store_meta",
        "quota_entry",
        "quota_total",
        "quota_block",
        "quota_journal",
        "quota_epoch",
        "quota_upstream_spent",
        "quota_last_figures",
        "slot_misses",
        "videos_fts",
    ] {
        assert_eq!(table(internal)["hidden"], true, "{internal} is shown");
    }
    let shown: Vec<&str> = tables
        .iter()
        .filter(|t| t["hidden"] == false)
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        shown,
        [
            "call_totals",
            "categories",
            "region_state",
            "run_calls",
            "run_regions",
            "runs",
            "upstream_changes",
            "videos"
        ],
        "{db}"
    );
    // Every table of the file is in the metadata, described, so that a new one is a
    // decision (shown or internal) and not an accident.
    let metadata: Value = serde_json::from_str(
        &std::fs::read_to_string(METADATA).expect("reading the metadata file"),
    )
    .expect("the metadata file is JSON");
    let described = &metadata["databases"]["trendsync"]["tables"];
    let names: Vec<String> = column(
        &conn,
        "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view')
           AND name NOT LIKE 'sqlite%' AND name NOT LIKE 'videos_fts%'",
    );
    for name in &names {
        assert!(
            described[name]["description"].is_string(),
            "{name} has no description in {METADATA}"
        );
    }

    // The videos page has a search box, and ?_search= keeps only the matches.
    let page = served.get("/trendsync/videos");
    assert!(page.contains(r#"name="_search""#), "no search box");
    let all = served.rows("/trendsync/videos.json");
    assert!(all.len() > 2, "{} videos", all.len());
    let hits = served.rows(&format!("/trendsync/videos.json?_search={WORD}"));
    assert_eq!(strings(&hits, "id"), [WORD_VIDEO]);
    // A word found only in tags, in one video, and in another's title.
    let tagged = served.rows("/trendsync/videos.json?_search=lighthouse");
    let mut want: Vec<String> = column(
        &conn,
        "SELECT id FROM videos WHERE title LIKE '%lighthouse%' OR tags LIKE '%lighthouse%'",
    );
    want.sort();
    let mut got = strings(&tagged, "id");
    got.sort();
    assert_eq!(got, want);
    assert_eq!(want.len(), 2);

    // A region's chart at a time: now, the run's chart; before it, nothing.
    let chart = served.rows("/trendsync/chart_at.json?region=us&at=&chart=");
    let want: Vec<String> = column(
        &conn,
        "SELECT rank || ' ' || video_id || ' ' || fetched_at FROM trending_utc
         WHERE region = 'US' ORDER BY rank",
    );
    let got: Vec<String> = chart
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["rank"],
                str_of(&r["video_id"]),
                str_of(&r["fetched_at"])
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(!want.is_empty());
    assert!(
        served
            .rows("/trendsync/chart_at.json?region=US&at=2000-01-01T00:00:00Z&chart=")
            .is_empty()
    );
    let far =
        served.rows("/trendsync/chart_at.json?region=US&at=2999-01-01T00:00:00Z&chart=overall");
    assert_eq!(far.len(), want.len());
    // A time or chart it does not understand gives nothing, not the newest chart.
    for bad in ["at=yesterday&chart=", "at=&chart=sports"] {
        assert!(
            served
                .rows(&format!("/trendsync/chart_at.json?region=US&{bad}"))
                .is_empty(),
            "{bad}"
        );
    }

    // A video's history: one row per place it had, oldest first, readable times.
    let history = served.rows(&format!(
        "/trendsync/video_history.json?video_id={WORD_VIDEO}"
    ));
    let want: Vec<String> = column(
        &conn,
        &format!(
            "SELECT region || ' ' || rank FROM chart_places WHERE video_id = '{WORD_VIDEO}'
             UNION ALL
             SELECT region || ' ' || rank FROM search_results WHERE video_id = '{WORD_VIDEO}'"
        ),
    );
    let mut got: Vec<String> = history
        .iter()
        .map(|r| format!("{} {}", str_of(&r["region"]), r["rank"]))
        .collect();
    let mut want_sorted = want.clone();
    want_sorted.sort();
    got.sort();
    assert_eq!(got, want_sorted);
    assert!(want.len() >= 8, "on the chart of every region: {want:?}");
    let times = strings(&history, "at");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    // Each sample says which upstream change of meaning was in force.
    for row in &history {
        assert!(
            row.get("methodology").is_some_and(|m| m.is_string()),
            "no methodology: {row:?}"
        );
    }
    for at in &times {
        assert!(
            at.len() == 20 && at.ends_with('Z') && at.as_bytes()[10] == b'T',
            "not RFC 3339 UTC: {at}"
        );
    }
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Datasette's test for a table's full-text index, copied verbatim from
/// `detect_fts_sql` in `datasette/utils/__init__.py` of Datasette 0.65.5 (the version
/// scripts/test installs), with its three parameters bound as that function builds
/// them for the table `videos` (no `\`, `%` or `_` to escape).
const DETECT_FTS_0_65_5: &str = r#"
            select name from sqlite_master
                where rootpage = 0
                and (
                    sql like :fts_double_quoted escape char(92)
                    or sql like :fts_bracket_quoted escape char(92)
                    or (
                        tbl_name = :table
                        and sql like '%VIRTUAL TABLE%USING FTS%'
                    )
                )
        "#;

/// The same test as Datasette 0.65.2 and earlier wrote it (the table name formatted
/// in), from the same function: what an older Datasette an analyst has runs.
const DETECT_FTS_0_65_2: &str = r#"
        select name from sqlite_master
            where rootpage = 0
            and (
                sql like '%VIRTUAL TABLE%USING FTS%content="videos"%'
                or sql like '%VIRTUAL TABLE%USING FTS%content=[videos]%'
                or (
                    tbl_name = "videos"
                    and sql like '%VIRTUAL TABLE%USING FTS%'
                )
            )
    "#;

/// Runs both of Datasette's tests against `db`: which table each finds for `videos`.
pub fn detect_fts(db: &Path) -> [Option<String>; 2] {
    let conn = Connection::open(db).expect("opening the database");
    let newer = conn
        .query_row(
            DETECT_FTS_0_65_5,
            rusqlite::named_params! {
                ":fts_double_quoted": r#"%VIRTUAL TABLE%USING FTS%content="videos"%"#,
                ":fts_bracket_quoted": "%VIRTUAL TABLE%USING FTS%content=[videos]%",
                ":table": "videos",
            },
            |r| r.get(0),
        )
        .optional()
        .expect("running Datasette 0.65.5's test");
    let older = conn
        .query_row(DETECT_FTS_0_65_2, [], |r| r.get(0))
        .optional()
        .expect("running Datasette 0.65.2's test");
    [newer, older]
}

#[test]
fn datasettes_own_test_finds_the_full_text_index_of_videos() {
    let h = ingested();
    let found = detect_fts(&h.db_path());
    assert_eq!(
        found,
        [
            Some("videos_fts".to_string()),
            Some("videos_fts".to_string())
        ]
    );
}

/// The version before the index was declared for Datasette.
const BEFORE_DATASETTE: u32 = 6;

/// A version 6 file with `n` videos, indexed by that version's triggers, each on a
/// chart (prune, which runs the upgrade here, deletes videos no snapshot refers to).
fn v6_file(db: &Path, n: i64) {
    trendsync::store::Store::create_at_version(db, BEFORE_DATASETTE).expect("a version 6 file");
    let mut conn = Connection::open(db).expect("opening");
    let tx = conn.transaction().expect("a transaction");
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO videos (num, id, title, description, channel_id, channel_title,
                     published_at, tags, tags_text, first_seen_at, last_seen_at)
                 VALUES (?1, ?2, ?3, ?4, 'UC', ?5, '2024-01-01T00:00:00Z', ?6, ?7, 0, 0)",
            )
            .expect("preparing");
        tx.execute_batch(
            "INSERT INTO runs (run_id, kind, started_at, status) VALUES ('r1', 'run', 100, 'complete');
             INSERT INTO run_nums (num, run_id) VALUES (1, 'r1');
             INSERT INTO regions (num, code) VALUES (1, 'US');",
        )
        .expect("a run");
        let mut fetch = tx
            .prepare("INSERT OR IGNORE INTO fetches (num, run, region, search, fetched_at) VALUES (?1, 1, 1, ?1, 100)")
            .expect("preparing");
        let mut place = tx
            .prepare("INSERT INTO places (fetch, rank, video, offset_s) VALUES (?1, ?2, ?3, 0)")
            .expect("preparing");
        let words = [
            "harbour", "volcano", "glacier", "meadow", "comet", "lantern", "orchard",
        ];
        for v in 0..n {
            let word = |k: i64| words[((v + k * 3) % words.len() as i64) as usize];
            let tags = format!(r#"["{}","tag{}"]"#, word(1), v % 100);
            insert
                .execute(rusqlite::params![
                    // Gaps in the numbers, as a prune leaves them.
                    v * 2 + 1,
                    format!("v{v:07}"),
                    format!("{} number {v}", word(0)),
                    format!(
                        "A long description of {} and {} ({v}), {}",
                        word(2),
                        word(3),
                        "words ".repeat(20)
                    ),
                    format!("channel {}", word(4)),
                    tags,
                    format!("{} tag{}", word(1), v % 100),
                ])
                .expect("a video");
            // 200 places to a list (a search number each, so no unique key is hit).
            fetch.execute([v / 200 + 1]).expect("a fetch");
            place
                .execute([v / 200 + 1, v % 200 + 1, v * 2 + 1])
                .expect("a place");
        }
    }
    tx.commit().expect("committing");
}

/// The version, and what the index answers: the matches of a few queries and how many
/// documents it holds.
fn index_picture(db: &Path) -> (u32, Vec<String>) {
    let conn = Connection::open(db).expect("opening");
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    let mut picture = Vec::new();
    for query in [
        "harbour",
        "volcano AND orchard",
        "tag7",
        "channel",
        "\"number 12\"",
    ] {
        let found: Vec<String> = column(
            &conn,
            &format!(
                "SELECT count(*) || ' matches, rowids adding up to ' || total(rowid)
                 FROM videos_fts WHERE videos_fts MATCH '{query}'"
            ),
        );
        picture.push(format!("{query}: {}", found.join("")));
    }
    let docs: Vec<i64> = column(&conn, "SELECT count(*) FROM videos_fts_docsize");
    let videos: Vec<i64> = column(&conn, "SELECT count(*) FROM videos");
    picture.push(format!("documents {docs:?} of videos {videos:?}"));
    (version, picture)
}

#[test]
fn a_version_6_file_upgrades_to_an_index_datasette_finds_even_killed_midway() {
    let scratch = crate::common::Scratch::new();
    let db = scratch.file("trendsync.db");
    v6_file(&db, 20_000);
    assert_eq!(
        detect_fts(&db),
        [None, None],
        "version 6 hides it from Datasette"
    );
    let latest = trendsync::schema::latest_version();
    crate::common::upgrade_killed_at_six_moments(
        &scratch,
        &db,
        (BEFORE_DATASETTE, latest),
        16 * 1024,
        [60, 200, 400],
        index_picture,
    );
    assert_eq!(
        detect_fts(&db),
        [
            Some("videos_fts".to_string()),
            Some("videos_fts".to_string())
        ]
    );
    let conn = Connection::open(&db).expect("opening");
    conn.execute(
        "INSERT INTO videos_fts (videos_fts, rank) VALUES ('integrity-check', 1)",
        [],
    )
    .expect("the index agrees with the videos");
    let (_, picture) = index_picture(&db);
    assert!(
        !picture.iter().any(|p| p.contains(": 0 matches")),
        "every query matches some: {picture:?}"
    );
}
