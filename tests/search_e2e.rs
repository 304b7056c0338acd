//! `trendsync search` over what a run ingested from the fake upstream, against the
//! contract of DESIGN.md section 2: `search QUERY [--region CC] [--limit N] [--json]`,
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
        // --json still answers with one object that says why (DESIGN.md 2).
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
