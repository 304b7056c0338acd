//! `trendsync search` over what a run ingested from the fake upstream, against the
//! contract of docs/commands.md: `search QUERY [--region CC] [--limit N] [--json]`,
//! JSON `{"results": [{video_id, title, channel_title, snippet, view_count,
//! published_at, regions}]}`, exit 2 on bad query syntax. Local only: it never calls
//! the upstream and charges nothing.

use serde_json::Value;

use crate::common::contains;
use crate::common::harness::{Harness, REGIONS, assert_budget_matches_requests};
use crate::common::upstream::{answer, category_chart, fixture_json};

/// A harness whose database holds a complete run of `regions` (all when empty).
fn ingested(regions: &[&str]) -> Harness<'static> {
    let h = Harness::new(None);
    let mut args = vec!["run"];
    for r in regions {
        args.extend(["--region", r]);
    }
    h.run(&args);
    h
}

/// `search ARGS --json`, which must call nothing; its results.
fn search(h: &Harness<'_>, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["search"];
    all.extend(args);
    all.push("--json");
    let (ran, calls) = h.run(&all);
    assert!(calls.is_empty(), "search called the upstream: {calls:?}");
    ran.json()["results"]
        .as_array()
        .unwrap_or_else(|| panic!("a results array: {}", ran.stdout))
        .clone()
}

#[test]
fn search_finds_an_ingested_video_with_every_field() {
    let h = ingested(&[]);
    let results = search(&h, &["Ammonite"]);
    assert_eq!(results.len(), 1, "{results:?}");
    let hit = &results[0];
    assert_eq!(hit["video_id"], "Nb3vC6xZ8aS");
    assert_eq!(
        hit["title"],
        "Fossil Hunting on the Jurassic Coast: Ammonite Jackpot"
    );
    assert_eq!(hit["channel_title"], "Shale & Shore");
    assert_eq!(hit["view_count"], 288_410);
    assert_eq!(hit["published_at"], "2024-06-03T15:20:00Z");
    let snippet = hit["snippet"].as_str().expect("a snippet");
    assert!(snippet.to_lowercase().contains("ammonite"), "{snippet}");
    let mut every: Vec<&str> = REGIONS.to_vec();
    every.sort_unstable();
    assert_eq!(hit["regions"], serde_json::json!(every));
    // Case and diacritics do not matter; the text output names the video too.
    assert_eq!(search(&h, &["ammonite"]).len(), 1);
    let (_, calls) = h
        .stdout(contains(
            "Fossil Hunting on the Jurassic Coast: Ammonite Jackpot",
        ))
        // Counts for people have their thousands grouped.
        .stdout(contains("(288,410 views;"))
        .run(&["search", "Ammonite"]);
    assert!(calls.is_empty());
    assert_budget_matches_requests(&h);
}

#[test]
fn search_narrows_by_region_and_limit() {
    let h = ingested(&["US"]);
    assert_eq!(search(&h, &["Ammonite", "--region", "US"]).len(), 1);
    assert!(search(&h, &["Ammonite", "--region", "GB"]).is_empty());
    // "lighthouse" is in two videos: a title and a tag.
    let both = search(&h, &["lighthouse"]);
    let mut ids: Vec<&str> = both
        .iter()
        .map(|r| r["video_id"].as_str().expect("video_id"))
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["Jd7kL2mNp4Q", "Zq3vT8mKpLw"]);
    let one = search(&h, &["lighthouse", "--limit", "1"]);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["video_id"], both[0]["video_id"], "the best match");
    assert!(search(&h, &["Zeppelin"]).is_empty());
    assert_budget_matches_requests(&h);
}

#[test]
fn bad_query_syntax_is_a_usage_error_that_says_how_to_quote() {
    let h = ingested(&["US"]);
    for query in ["\"unbalanced", "AND OR"] {
        h.expect_stderr("is not valid");
        let (ran, calls) = h.status(2).run(&["search", query, "--json"]);
        assert!(calls.is_empty());
        assert!(
            ran.stderr.to_lowercase().contains("quote"),
            "{query}: says how to quote: {}",
            ran.stderr
        );
        // --json still answers with one object that says why (docs/commands.md).
        let json = ran.json();
        assert_eq!(json["status"], "failed", "{json}");
        assert!(
            json["error"].as_str().is_some_and(|e| e.contains("quote")),
            "{json}"
        );
    }
    assert_budget_matches_requests(&h);
}

#[test]
fn search_by_region_finds_a_video_seen_only_on_a_category_chart_of_that_region() {
    let mut h = Harness::new(None);
    h.regions(
        r#"
[defaults]
pages = 2

[[region]]
code = "US"
offset = 0
categories = ["17"]

[[region]]
code = "GB"
offset = 7
"#,
    );
    // US's Sports chart holds one video of its own, on no overall chart.
    let mut page = fixture_json("videos_last_page.json");
    let mut video = page["items"][0].clone();
    video["id"] = "SportsOnly1".into();
    video["snippet"]["title"] = "Curling semifinal: the Quillwort stone".into();
    page["items"] = serde_json::json!([video]);
    h.fake
        .answer_instead(category_chart("US", "17"), answer(200, &page.to_string()));
    h.run(&["run"]);
    let places: Vec<(String, Option<String>)> = {
        let db = h.db();
        let mut stmt = db
            .prepare("SELECT region, chart FROM chart_places WHERE video_id = 'SportsOnly1'")
            .expect("preparing");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("querying")
            .collect::<Result<_, _>>()
            .expect("reading")
    };
    assert_eq!(
        places,
        [("US".to_owned(), Some("17".to_owned()))],
        "only on US's Sports chart"
    );

    let found = search(&h, &["Quillwort", "--region", "US"]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["video_id"], "SportsOnly1");
    assert_eq!(found[0]["regions"], serde_json::json!(["US"]));
    // GB has its overall chart, but not this video.
    assert!(search(&h, &["Quillwort", "--region", "GB"]).is_empty());
    assert_eq!(search(&h, &["Quillwort"]).len(), 1);
    assert_budget_matches_requests(&h);
}

/// Adds `count` videos numbered from `first` whose title holds "lumen" once to three
/// times among fillers of varied length (so that many rank alike, and ties show),
/// placed 50 to a fetch of the US chart (one run each) a day ago, so that `prune` keeps
/// them, every third in GB as well.
fn add_lumen_videos(db: &std::path::Path, first: i64, count: i64) {
    use trendsync::clock::{Clock, SystemClock};
    let at = SystemClock.now().to_secs().as_i64() - 86_400;
    let conn = rusqlite::Connection::open(db).expect("opening the database to fill it");
    conn.execute_batch(&format!(
        "BEGIN;
         INSERT INTO runs (run_id, kind, started_at, ended_at, status, units, calls)
         WITH RECURSIVE n(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM n
                                 WHERE j < ({count} - 1) / 50)
         SELECT printf('lumen-%d-%d', {first}, j), 'run', {at} + j, {at} + j, 'complete', 1, 1
         FROM n;
         INSERT INTO run_nums (run_id)
         SELECT run_id FROM runs WHERE run_id LIKE 'lumen-{first}-%' ORDER BY started_at;
         INSERT INTO fetches (run, region, search, fetched_at)
         SELECT r.num, (SELECT num FROM regions WHERE code = 'US'), 0,
                {at} + CAST(substr(r.run_id, length('lumen-{first}-') + 1) AS INTEGER)
         FROM run_nums AS r WHERE r.run_id LIKE 'lumen-{first}-%';
         INSERT INTO videos (id, title, description, channel_id, channel_title, published_at,
                             tags, tags_text, first_seen_at, last_seen_at)
         WITH RECURSIVE n(i) AS (SELECT {first} UNION ALL SELECT i + 1 FROM n
                                 WHERE i < {first} + {count} - 1)
         SELECT printf('lumen%06d', i),
                substr('lumen lumen lumen ', 1, 6 * (i % 3 + 1))
                  || substr('alder birch cedar dogwood elm fir ginkgo hazel ', 1, 6 * (i % 8)),
                CASE WHEN i % 5 = 0 THEN 'a lumen in the description' ELSE 'nothing here' END,
                'UClumen', printf('Channel %d', i % 11), '2026-01-01T00:00:00Z',
                NULL, NULL, 1, 1
         FROM n;
         INSERT INTO places (fetch, rank, video, offset_s)
         SELECT f.num, v.k % 50 + 1, v.num, 0
         FROM (SELECT num, CAST(substr(id, 6) AS INTEGER) - {first} AS k FROM videos
               WHERE id LIKE 'lumen%' AND CAST(substr(id, 6) AS INTEGER) >= {first}) AS v
         JOIN (SELECT f.num, f.fetched_at - {at} AS j FROM fetches AS f
               JOIN run_nums AS r ON r.num = f.run
               WHERE r.run_id LIKE 'lumen-{first}-%') AS f
           ON f.j = v.k / 50;
         INSERT OR IGNORE INTO video_regions (video, region)
         SELECT v.num, g.num FROM videos AS v JOIN regions AS g
         WHERE v.id LIKE 'lumen%' AND (g.code = 'US' OR (g.code = 'GB' AND v.num % 3 = 0));
         COMMIT;"
    ))
    .expect("adding videos");
}

/// The ids of the best `limit` matches of `word` by FTS5's own bm25, ranking every
/// match (as `search` did before it kept lists), in `region` when given.
fn ranked_by_fts5(
    db: &std::path::Path,
    word: &str,
    region: Option<&str>,
    limit: i64,
) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).expect("opening the database");
    let mut stmt = conn
        .prepare(
            "SELECT v.id FROM videos_fts JOIN videos AS v ON v.num = videos_fts.rowid
             WHERE videos_fts MATCH ?1
               AND (?2 IS NULL OR EXISTS (SELECT 1 FROM video_regions AS r
                                          JOIN regions AS g ON g.num = r.region
                                          WHERE r.video = v.num AND g.code = ?2))
             ORDER BY bm25(videos_fts, 10.0, 1.0, 4.0, 2.0), videos_fts.rowid
             LIMIT ?3",
        )
        .expect("the ranking query");
    stmt.query_map(rusqlite::params![word, region, limit], |r| r.get(0))
        .expect("ranking")
        .collect::<rusqlite::Result<_>>()
        .expect("the ranked ids")
}

/// The lists a common word's search ranks from (kept by `prune`), through the binary:
/// built, then with videos added and changed since, then appended to. Each time the
/// hits are those of ranking every match with FTS5's bm25, ties in the order stored.
#[test]
fn a_common_words_search_from_its_lists_shows_what_ranking_every_match_shows() {
    let h = ingested(&["US"]);
    let db = h.db_path();
    add_lumen_videos(&db, 1, 6_000);
    h.bare()
        .args(["prune", "--older-than", "36500d"])
        .stderr(contains(
            "rebuilt the best matches search keeps for common words",
        ))
        .run();
    let listed: i64 = rusqlite::Connection::open(&db)
        .expect("opening")
        .query_row(
            "SELECT count(*) FROM best_matches WHERE term = 'lumen'",
            [],
            |r| r.get(0),
        )
        .expect("counting the lists");
    assert!(listed > 0, "prune keeps lists for a word in 6,000 videos");

    let same_as_fts5 = |when: &str| {
        for (region, limit) in [(None, 20), (Some("GB"), 20), (None, 1), (Some("US"), 100)] {
            let mut args = vec!["lumen".to_owned(), "--limit".to_owned(), limit.to_string()];
            if let Some(r) = region {
                args.extend(["--region".to_owned(), r.to_owned()]);
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let shown: Vec<String> = search(&h, &args)
                .iter()
                .map(|r| r["video_id"].as_str().unwrap_or_default().to_owned())
                .collect();
            assert_eq!(
                shown,
                ranked_by_fts5(&db, "lumen", region, limit),
                "{when}: search lumen {args:?}"
            );
        }
    };
    same_as_fts5("the lists as built");

    // Videos added since, and some changed: kept ones lose or gain occurrences.
    add_lumen_videos(&db, 6_001, 300);
    rusqlite::Connection::open(&db)
        .expect("opening")
        .execute_batch(
            "UPDATE videos SET title = 'plain' WHERE id IN ('lumen000003', 'lumen000010');
             UPDATE videos SET title = 'lumen lumen lumen lumen' WHERE id = 'lumen000400';",
        )
        .expect("changing videos");
    same_as_fts5("with videos added and changed");

    // prune appends the videos added since to the lists, and says so.
    h.bare()
        .args(["prune", "--older-than", "36500d"])
        .stderr(contains(
            "of the videos stored since the last prune to the best matches",
        ))
        .run();
    same_as_fts5("after prune appended them");
}
