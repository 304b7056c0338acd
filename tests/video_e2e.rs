//! `trendsync video VIDEO_ID` end to end: a video's places per region and chart, and
//! its counts over time from charts, searches and follow-ups, each with its source.

use serde_json::Value;

use crate::common::contains;
use crate::common::harness::Harness;
use crate::common::upstream::{Billing, FakeUpstream};

/// US with the chart of category 17 and a search, and follow-ups; `pages` of each chart.
fn regions(pages: u32) -> String {
    format!(
        r#"
[defaults]
pages = {pages}

[[region]]
code = "US"
offset = 0
categories = ["17"]

[[region.search]]
name = "fresh"
q = ""
order = "viewCount"

[follow]
days = 7
every = "6h"
"#
    )
}

/// On the fixtures' second chart page (rank 8): charted in the first run only.
const LEFT_THE_CHART: &str = "Tq9wErTyU1o";
/// Found by the fixtures' search only.
const SEARCHED: &str = "Wf5gH2jKl8E";

fn video(h: &Harness<'_>, id: &str) -> Value {
    let ran = h.bare().args(["video", id, "--json"]).run();
    ran.json()
}

fn sources(v: &Value) -> Vec<&str> {
    v["counts"]
        .as_array()
        .expect("counts")
        .iter()
        .map(|c| c["source"].as_str().expect("source"))
        .collect()
}

#[test]
fn a_video_shows_its_places_and_its_counts_with_their_sources() {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(&regions(2));
    h.run_to(&["run", "--json"], 0, "complete");

    // The next runs fetch one page of each chart: the second page's videos have left
    // the charts. Six hours on, they are due for a follow-up.
    h.regions(&regions(1));
    let db = rusqlite::Connection::open(h.db_path()).expect("opening");
    db.execute(
        "UPDATE follow_state SET counted_at = counted_at - 7 * 3600
         WHERE video IN (SELECT num FROM videos WHERE id IN ('Tq9wErTyU1o', 'Nb3vC6xZ8aS', 'Jd7kL2mNp4Q'))",
        [],
    )
    .expect("time passes");
    drop(db);
    let (report, _, _) = h.run_to(&["run", "--json"], 0, "complete");
    // One batch, and the videos.list that confirms the video it left out is gone.
    assert_eq!(report["follow"]["calls"], 2, "{report}");

    let v = video(&h, LEFT_THE_CHART);
    assert_eq!(v["video_id"], LEFT_THE_CHART);
    // The watch URL `search` prints, and the share and Shorts forms, name it too.
    for url in [
        format!("https://www.youtube.com/watch?v={LEFT_THE_CHART}"),
        format!("https://youtu.be/{LEFT_THE_CHART}?si=shared"),
        format!("youtube.com/shorts/{LEFT_THE_CHART}"),
    ] {
        assert_eq!(video(&h, &url), v, "{url}");
    }
    assert_eq!(v["title"], "Midnight Ramen Speedrun in Osaka", "{v}");
    assert!(
        v["channel_title"].is_string() && v["published_at"].is_string(),
        "{v}"
    );
    let places = v["places"].as_array().expect("places");
    assert_eq!(places.len(), 2, "{v}");
    assert_eq!(places[0]["region"], "US");
    assert_eq!(
        places[0]["chart"],
        Value::Null,
        "the overall chart first: {v}"
    );
    assert_eq!(places[1]["chart"], "17", "{v}");
    for p in places {
        assert_eq!(p["best_rank"], 8, "{v}");
        assert_eq!(p["fetches"], 1, "{v}");
        assert_eq!(p["first_seen"], p["last_seen"], "{v}");
        assert!(
            p["first_seen"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{v}"
        );
    }
    // One sample per time and source: the two charts of one run, when their pages
    // were stored in the same second, saw it once.
    let counts = v["counts"].as_array().expect("counts");
    let mut samples: Vec<(String, String)> = counts
        .iter()
        .map(|c| (c["at"].to_string(), c["source"].to_string()))
        .collect();
    samples.dedup();
    assert_eq!(samples.len(), counts.len(), "a sample shown twice: {v}");
    assert_eq!(sources(&v).last(), Some(&"follow"), "{v}");
    assert!(sources(&v).len() <= 3, "{v}");
    let follow = counts.last().expect("the follow-up's sample");
    assert_eq!(follow["views"], 311_784, "the counts went on: {v}");
    assert!(follow.get("comments").is_some() && follow.get("likes").is_some());

    let v = video(&h, SEARCHED);
    assert_eq!(
        v["places"],
        Value::Array(vec![]),
        "a search is not a chart: {v}"
    );
    // Its searches, one sample per second they were stored in.
    assert!(
        sources(&v).iter().all(|s| *s == "search") && !sources(&v).is_empty(),
        "{v}"
    );

    // Text for people names the charts and the sources, each sample once.
    let ran = h
        .bare()
        .args(["video", LEFT_THE_CHART])
        .stdout(contains("category 17"))
        .stdout(contains("follow"))
        .run();
    let samples: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|l| l.trim_end().ends_with(" chart") || l.trim_end().ends_with(" follow"))
        .collect();
    assert_eq!(samples.len(), counts.len(), "{}", ran.stdout);

    // An id that cannot be a YouTube id is a usage error saying what one looks like,
    // not "never seen".
    for wrong in ["", "   ", "dQw4w9WgXc", "dQw4w9WgXcQQ", "dQw4w9WgX!Q"] {
        h.bare()
            .args(["video", wrong])
            .expect_stderr("11 letters, digits, '-' or '_'")
            .status(2)
            .run();
    }

    // The video the follow-up found gone says so.
    h.bare()
        .args(["video", "Jd7kL2mNp4Q"])
        .stdout(contains("no longer shown"))
        .run();
}

#[test]
fn an_unknown_video_or_a_missing_database_is_an_error() {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(&regions(1));
    h.bare()
        .args(["video", "NoSuchVideo"])
        .expect_stderr("trendsync.db")
        .status(78)
        .run();
    assert!(!h.db_path().exists(), "nothing created");

    h.run_to(&["run", "--json"], 0, "complete");
    h.bare()
        .args(["video", "NoSuchVideo"])
        .expect_stderr("NoSuchVideo was never seen")
        .status(1)
        .stderr(contains("NoSuchVideo was never seen"))
        .run();
    // A URL of an id never seen is that id, never seen; one that names no video is a
    // usage error.
    h.bare()
        .args(["video", "https://youtu.be/NoSuchVideo"])
        .expect_stderr("NoSuchVideo was never seen")
        .status(1)
        .run();
    h.bare()
        .args(["video", "https://example.com/watch?v=NoSuchVideo"])
        .expect_stderr("names no YouTube video")
        .status(2)
        .run();
    let ran = h
        .bare()
        .args(["video", "NoSuchVideo", "--json"])
        .expect_stderr("was never seen")
        .status(1)
        .run();
    assert_eq!(ran.json()["status"], "failed");
}
