//! `export` of category charts end to end: the `chart` column, `--chart`, `--per day`
//! (the grain of the public trending datasets) and `--counts` with the source of each
//! sample (docs/commands.md).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::upstream::{Billing, FakeUpstream};

/// US with the chart of category 17 and follow-ups; `pages` of each chart.
fn regions(pages: u32) -> String {
    format!(
        r#"
[defaults]
pages = {pages}

[[region]]
code = "US"
offset = 0
categories = ["17"]

[follow]
days = 7
every = "6h"
"#
    )
}

/// The CSV rows of `export ARGS` (header first).
fn csv(h: &Harness<'_>, args: &[&str]) -> Vec<Vec<String>> {
    let ran = h.bare().arg("export").args(args).run();
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(ran.stdout.as_bytes());
    reader
        .records()
        .map(|r| r.expect("a CSV record").iter().map(str::to_owned).collect())
        .collect()
}

/// How many rows of each `chart` cell.
fn by_chart(rows: &[Vec<String>]) -> BTreeMap<String, usize> {
    let at = rows[0]
        .iter()
        .position(|c| c == "chart")
        .expect("a chart column");
    let mut out = BTreeMap::new();
    for row in &rows[1..] {
        *out.entry(row[at].clone()).or_default() += 1;
    }
    out
}

#[test]
fn export_names_each_rows_chart_keeps_a_day_per_video_and_exports_counts() {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(&regions(2));
    h.run_to(&["run", "--json"], 0, "complete");
    h.run_to(&["run", "--json"], 0, "complete");

    // Two runs of two charts of the fixtures' ten videos: by default the overall chart
    // alone, so that a rank is one chart's rank; `--chart all` for every chart.
    let rows = csv(&h, &["--chart", "all"]);
    assert_eq!(
        rows[0].get(21).map(String::as_str),
        Some("chart"),
        "{:?}",
        rows[0]
    );
    assert_eq!(
        rows[0].get(22).map(String::as_str),
        Some("channel_id"),
        "{:?}",
        rows[0]
    );
    assert!(
        rows[1..].iter().all(|r| r[22].starts_with("UC")),
        "{rows:?}"
    );
    assert_eq!(
        by_chart(&rows),
        BTreeMap::from([(String::new(), 20), ("17".to_owned(), 20)])
    );
    assert_eq!(
        by_chart(&csv(&h, &[])),
        BTreeMap::from([(String::new(), 20)])
    );
    // Per day: one row per video, region and chart, half of two runs' rows.
    let day = csv(&h, &["--per", "day", "--chart", "all"]);
    assert_eq!(day.len() - 1, (rows.len() - 1) / 2);
    let mut seen = std::collections::BTreeSet::new();
    for row in &day[1..] {
        assert!(
            seen.insert((row[0].clone(), row[16].clone(), row[21].clone())),
            "{row:?}"
        );
    }
    // --chart picks charts.
    assert_eq!(
        by_chart(&csv(&h, &["--chart", "17"])),
        BTreeMap::from([("17".to_owned(), 20)])
    );
    assert_eq!(
        by_chart(&csv(&h, &["--chart", "overall", "--per", "day"])),
        BTreeMap::from([(String::new(), 10)])
    );
    h.bare()
        .args(["export", "--chart", "sports"])
        .expect_stderr("\"sports\" is not a chart")
        .status(2)
        .run();
    // A chart no fetch has is an error naming the known ones, not an empty file.
    let ran = h
        .bare()
        .args(["export", "--chart", "99"])
        .expect_stderr("--chart 99: no fetch of US has this chart")
        .stdout("")
        .status(2)
        .run();
    assert!(
        ran.stderr.contains("known charts: overall, 17"),
        "{}",
        ran.stderr
    );

    // The second page's videos leave the charts; six hours on, a follow-up counts them
    // (one is gone since).
    h.regions(&regions(1));
    let db = rusqlite::Connection::open(h.db_path()).expect("opening");
    db.execute(
        "UPDATE follow_state SET counted_at = counted_at - 7 * 3600
         WHERE video IN (SELECT num FROM videos WHERE id IN ('Tq9wErTyU1o', 'Nb3vC6xZ8aS', 'Jd7kL2mNp4Q'))",
        [],
    )
    .expect("time passes");
    drop(db);
    h.run_to(&["run", "--json"], 0, "complete");

    let ran = h
        .bare()
        .args(["export", "--counts", "--format", "jsonl"])
        .run();
    let samples: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let mut sources: BTreeMap<String, usize> = BTreeMap::new();
    for s in &samples {
        *sources
            .entry(s["source"].as_str().expect("source").to_owned())
            .or_default() += 1;
        assert!(
            s["counted_at"].as_str().is_some_and(|t| t.ends_with('Z')),
            "{s}"
        );
    }
    // One row per (video, time, source): the overall chart and the chart of category
    // 17 place the same videos in one fetch, and that is one sample, not two.
    let distinct: std::collections::BTreeSet<(String, String, String)> = samples
        .iter()
        .map(|s| {
            (
                s["video_id"].to_string(),
                s["counted_at"].to_string(),
                s["source"].to_string(),
            )
        })
        .collect();
    assert_eq!(distinct.len(), samples.len(), "{samples:#?}");
    // At most 20 + 7 samples of the charts (fewer when runs share a second); the two
    // videos the follow-up found.
    assert!((10..=27).contains(&sources["chart"]), "{sources:?}");
    assert_eq!(sources.get("follow"), Some(&2), "{sources:?}");
    let counts = csv(&h, &["--counts"]);
    assert_eq!(
        counts[0],
        [
            "video_id",
            "counted_at",
            "views",
            "likes",
            "comment_count",
            "source",
            "methodology"
        ]
    );
    assert_eq!(counts.len() - 1, samples.len());

    // The video the follow-up found gone is marked so in the export.
    let rows = csv(&h, &["--chart", "all"]);
    let removed = rows[0]
        .iter()
        .position(|c| c == "video_error_or_removed")
        .expect("the column");
    for row in &rows[1..] {
        assert_eq!(row[removed] == "true", row[0] == "Jd7kL2mNp4Q", "{row:?}");
    }
}

#[test]
fn a_range_that_cannot_hold_a_fetch_is_an_error_and_every_date_means_what_it_says() {
    let mut h = Harness::with(FakeUpstream::billing(Billing::single(10_000)), None);
    h.regions(&regions(1));
    h.run_to(&["run", "--json"], 0, "complete");
    let all = csv(&h, &[]).len();
    assert!(all > 1);

    // Inverted: an error, not an empty file.
    let ran = h
        .bare()
        .args(["export", "--since", "2026-11-25", "--until", "2026-11-21"])
        .expect_stderr("--since 2026-11-25T00:00:00Z is after --until 2026-11-21T23:59:59Z")
        .stdout("")
        .status(2)
        .run();
    assert!(ran.stderr.contains("swap them"), "{}", ran.stderr);
    // Said as written, at the calendar's end too.
    h.bare()
        .args([
            "export",
            "--since",
            "9999-12-31T23:59:59Z",
            "--until",
            "2026-01-01",
        ])
        .expect_stderr("--since 9999-12-31T23:59:59Z is after --until 2026-01-01T23:59:59Z")
        .stdout("")
        .status(2)
        .run();

    // The ends of the calendar, jiff's last day included.
    for (args, rows) in [
        (&["--since", "9999-12-31"][..], 1),
        (&["--since", "9999-12-31T23:59:59Z"][..], 1),
        (&["--until", "9999-12-31"][..], all),
        (&["--until", "9999-12-31T23:59:59Z"][..], all),
        (&["--since", "0001-01-01"][..], all),
        (
            &["--since", "0001-01-01T00:00:00Z", "--until", "9999-12-31"][..],
            all,
        ),
        (&["--until", "0001-01-01"][..], 1),
    ] {
        assert_eq!(csv(&h, args).len(), rows, "export {args:?}");
    }
    // A duration reaching before the first day there is cannot be represented.
    h.bare()
        .args(["export", "--since", "18446744073709551615s"])
        .expect_stderr("--since: 18446744073709551615s back from now is before the earliest time")
        .stdout("")
        .status(2)
        .run();
    // `runs --since` takes the same WHEN.
    let ran = h
        .bare()
        .args(["runs", "--since", "9999-12-31T23:59:59Z", "--json"])
        .run();
    assert_eq!(ran.json()["runs"], serde_json::json!([]), "{}", ran.stdout);
    let ran = h
        .bare()
        .args(["runs", "--since", "0001-01-01", "--json"])
        .run();
    assert!(
        ran.json()["runs"].as_array().is_some_and(|r| !r.is_empty()),
        "{}",
        ran.stdout
    );
}
