//! Category charts end to end (docs/upstream.md): the binary against the fake
//! upstream, each region's overall chart and the charts of its categories, from
//! `[defaults]` or its own list; a category the upstream has no chart for; and the
//! upgrade of a file from before category charts, killed and restarted.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::{Connection, params};
use serde_json::Value;

use crate::common::harness::{Harness, assert_budget_matches_requests, regions_of, shorts};
use crate::common::upstream::{answer_fixture, category_chart};
use crate::common::{Scratch, contains, lacks};

/// US takes the defaults' categories, GB its own, DE none.
const CHARTED: &str = r#"
[defaults]
pages = 2
categories = ["17", "25"]

[[region]]
code = "US"
offset = 0

[[region]]
code = "GB"
offset = 7
categories = ["10"]

[[region]]
code = "DE"
offset = 14
categories = []
"#;

/// (region, chart or 0, places) of every chart fetch of the database, sorted.
fn chart_fetches(h: &Harness<'_>) -> Vec<(String, i64, i64)> {
    let db = h.db();
    let mut stmt = db
        .prepare(
            "SELECT region, CAST(ifnull(chart, 0) AS INTEGER), count(*) FROM chart_places
             GROUP BY run_id, region, chart ORDER BY region, 2",
        )
        .expect("preparing");
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("querying")
        .collect::<Result<_, _>>()
        .expect("reading")
}

#[test]
fn category_charts_come_from_the_defaults_or_the_region_after_every_overall_chart() {
    let mut h = Harness::new(None);
    h.regions(CHARTED);
    let (report, calls, _) = h.run_to(&["run", "--json", "--concurrency", "1"], 0, "complete");
    assert_eq!(
        shorts(&calls),
        [
            "US p1",
            "US p2",
            "US categories",
            "GB p1",
            "GB p2",
            "GB categories",
            "DE p1",
            "DE p2",
            "DE categories",
            "US c17 p1",
            "US c17 p2",
            "US c25 p1",
            "US c25 p2",
            "GB c10 p1",
            "GB c10 p2",
        ]
    );
    let regions = regions_of(&report);
    assert_eq!(regions["US"]["pages"], 6, "{report}");
    assert_eq!(regions["GB"]["pages"], 4, "{report}");
    assert_eq!(regions["DE"]["pages"], 2, "{report}");
    // The fixtures' chart holds 10 videos, whichever chart is asked for.
    let fetches = chart_fetches(&h);
    let want: Vec<(String, i64, i64)> = [
        ("DE", 0),
        ("GB", 0),
        ("GB", 10),
        ("US", 0),
        ("US", 17),
        ("US", 25),
    ]
    .iter()
    .map(|(r, c)| ((*r).to_owned(), *c, 10))
    .collect();
    assert_eq!(fetches, want);
    // The overall chart alone is what `trending` (the version 1 view) holds.
    let trending: i64 = h
        .db()
        .query_row("SELECT count(*) FROM trending", [], |r| r.get(0))
        .expect("counting");
    assert_eq!(trending, 3 * 10);
    assert_budget_matches_requests(&h);

    // The history and the dashboard name each region's charts.
    let charts =
        |region: &Value| -> Vec<Value> { region["charts"].as_array().expect("charts").clone() };
    let ran = h.bare().args(["runs", "--json"]).run();
    let runs = ran.json();
    let lines: BTreeMap<String, Vec<Value>> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| (r["region"].as_str().expect("region").to_owned(), charts(r)))
        .collect();
    assert_eq!(
        lines["US"],
        [Value::Null, "17".into(), "25".into()],
        "{runs}"
    );
    assert_eq!(lines["GB"], [Value::Null, "10".into()], "{runs}");
    assert_eq!(lines["DE"], [Value::Null], "{runs}");
    let ran = h.bare().args(["status", "--json"]).run();
    let status = ran.json();
    let us = status["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .find(|r| r["code"] == "US")
        .expect("US")
        .clone();
    assert_eq!(
        charts(&us),
        [Value::Null, "17".into(), "25".into()],
        "{status}"
    );
    h.bare()
        .args(["runs"])
        .stdout(contains("overall+17+25"))
        .run();

    // The dry run plans the same calls in the same order, now without the names.
    let ran = h.cmd().args(["run", "--dry-run"]).run();
    let us17 = ran.stdout.find("category 17 page 1").expect(&ran.stdout);
    let gb10 = ran.stdout.find("category 10 page 2").expect(&ran.stdout);
    let de2 = ran.stdout.find("trending page 2").expect(&ran.stdout);
    assert!(de2 < us17 && us17 < gb10, "{}", ran.stdout);
}

#[test]
fn a_category_without_a_chart_fails_alone_and_is_not_asked_again_until_the_names_are() {
    let mut h = Harness::new(None);
    h.regions(
        r#"
[defaults]
pages = 2

[[region]]
code = "US"
offset = 0
categories = ["30", "17"]
"#,
    );
    h.fake.answer_instead(
        category_chart("US", "30"),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    h.expect_stderr("videoChartNotFound")
        .stderr(contains("WARN"))
        .stderr(contains("no chart of category 30"));
    let (report, calls, _) = h.run_to(&["run", "--json"], 0, "complete");
    assert_eq!(
        shorts(&calls),
        [
            "US p1",
            "US p2",
            "US categories",
            "US c30 p1",
            "US c17 p1",
            "US c17 p2"
        ]
    );
    assert_eq!(regions_of(&report)["US"]["status"], "complete", "{report}");

    // The next run leaves it out (and the names, fetched today).
    let (_, calls, _) = h.run_to(&["run", "--json"], 0, "complete");
    assert_eq!(shorts(&calls), ["US p1", "US p2", "US c17 p1", "US c17 p2"]);
    h.cmd()
        .args(["run", "--dry-run"])
        .stdout(lacks("category 30"))
        .run();

    // A day after the names were fetched they are fetched again, and the chart asked
    // for again after them.
    let db = Connection::open(h.db_path()).expect("opening");
    db.execute(
        "UPDATE region_state SET categories_fetched_at = categories_fetched_at - 86400",
        [],
    )
    .expect("a day passes");
    drop(db);
    h.expect_stderr("videoChartNotFound");
    let (_, calls, _) = h.run_to(&["run", "--json"], 0, "complete");
    assert_eq!(
        shorts(&calls),
        [
            "US p1",
            "US p2",
            "US categories",
            "US c30 p1",
            "US c17 p1",
            "US c17 p2"
        ]
    );
    assert_budget_matches_requests(&h);
}

// ---- the upgrade from the layout before category charts ----

/// The version before category charts: the compact layout and the limiter's tables.
const BEFORE_CHARTS: u32 = 4;

/// Rows of every table and view a reader of version 4 knows, counted, and the whole
/// of the trending view as a sample of the snapshots.
fn picture(db: &Path) -> (u32, Vec<String>) {
    let conn = Connection::open(db).expect("opening");
    let version: u32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .expect("version");
    let mut rows = Vec::new();
    for table in [
        "runs",
        "run_nums",
        "regions",
        "searches",
        "fetches",
        "places",
        "extra_counts",
        "video_regions",
        "videos",
        "trending",
        "search_results",
        "video_stats",
    ] {
        let n: i64 = conn
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .expect("counting");
        rows.push(format!("{table}: {n}"));
    }
    let mut stmt = conn
        .prepare(
            "SELECT run_id || region || rank || video_id || fetched_at FROM trending
             UNION ALL SELECT num || '/' || run || '/' || region || '/' || search || '/' || fetched_at
             FROM fetches",
        )
        .expect("preparing");
    let mut sample: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("querying")
        .collect::<rusqlite::Result<_>>()
        .expect("reading");
    sample.sort();
    rows.extend(sample);
    (version, rows)
}

/// A version 4 file with `runs` hourly runs of two regions' 50-place charts and a
/// search, written in that layout's own SQL.
fn v4_file(db: &Path, runs: i64) {
    trendsync::store::Store::create_at_version(db, BEFORE_CHARTS).expect("a version 4 file");
    let mut conn = Connection::open(db).expect("opening");
    let tx = conn.transaction().expect("a transaction");
    tx.execute_batch(
        "INSERT INTO regions (num, code) VALUES (1, 'US'), (2, 'GB');
         INSERT INTO searches (num, region, name) VALUES (1, 1, 'fresh');",
    )
    .expect("regions");
    // Every video is on some chart (run r's ranks hold videos r+1..r+50): prune
    // deletes videos no snapshot refers to, and would take one that none ever did.
    for v in 0..(runs + 49) {
        tx.execute(
            "INSERT INTO videos (num, id, title, description, channel_id, channel_title,
                 published_at, view_count, first_seen_at, last_seen_at)
             VALUES (?1, ?2, ?3, '', 'UC', 'channel', '2024-01-01T00:00:00Z', ?4, 0, 0)",
            params![
                v + 1,
                format!("v{v:06}"),
                format!("title {v}"),
                (v % 3 != 0).then_some(v)
            ],
        )
        .expect("a video");
    }
    let mut fetch = 0i64;
    for run in 0..runs {
        let at = 1_000_000 + run * 3600;
        tx.execute(
            "INSERT INTO runs (run_id, kind, started_at, status) VALUES (?1, 'run', ?2, 'complete')",
            params![format!("run{run:05}"), at],
        )
        .expect("a run");
        tx.execute(
            "INSERT INTO run_nums (num, run_id) VALUES (?1, ?2)",
            params![run + 1, format!("run{run:05}")],
        )
        .expect("a run number");
        for (region, search) in [(1, 0), (2, 0), (1, 1)] {
            // Gaps in the numbers, as a prune leaves them.
            fetch += 1 + run % 2;
            tx.execute(
                "INSERT INTO fetches (num, run, region, search, fetched_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![fetch, run + 1, region, search, at],
            )
            .expect("a fetch");
            for rank in 1..=50i64 {
                tx.execute(
                    "INSERT INTO places (fetch, rank, video, offset_s, views) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![fetch, rank, run + rank, rank / 25, (rank % 7 != 0).then_some(run * rank)],
                )
                .expect("a place");
            }
        }
    }
    tx.execute_batch(
        "INSERT INTO video_regions (video, region)
         SELECT DISTINCT p.video, f.region FROM places AS p JOIN fetches AS f ON f.num = p.fetch;
         INSERT INTO extra_counts (video, run, fetched_at, views) VALUES (1, 1, 1000000, 5);",
    )
    .expect("the summary");
    tx.commit().expect("committing");
}

#[test]
fn a_file_from_before_category_charts_upgrades_losslessly_even_killed_midway() {
    let scratch = Scratch::new();
    let db = scratch.file("trendsync.db");
    v4_file(&db, 400);
    let latest = trendsync::schema::latest_version();
    assert!(latest > BEFORE_CHARTS);
    crate::common::upgrade_killed_at_six_moments(
        &scratch,
        &db,
        (BEFORE_CHARTS, latest),
        16 * 1024,
        [20, 60, 200],
        picture,
    );
    let conn = Connection::open(&db).expect("opening");
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    let overall: i64 = conn
        .query_row("SELECT count(*) FROM fetches WHERE chart <> 0", [], |r| {
            r.get(0)
        })
        .expect("counting");
    assert_eq!(
        overall, 0,
        "every old fetch is the overall chart or a search"
    );
}
