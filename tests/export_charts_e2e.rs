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

    // Two runs of two charts of the fixtures' ten videos.
    let rows = csv(&h, &[]);
    assert_eq!(
        rows[0].get(21).map(String::as_str),
        Some("chart"),
        "{:?}",
        rows[0]
    );
    assert_eq!(
        by_chart(&rows),
        BTreeMap::from([(String::new(), 20), ("17".to_owned(), 20)])
    );
    // Per day: one row per video, region and chart, half of two runs' rows.
    let day = csv(&h, &["--per", "day"]);
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
        assert!(s["at"].as_str().is_some_and(|t| t.ends_with('Z')), "{s}");
    }
    // 40 + 2 × 7 chart places; the two videos the follow-up found.
    assert_eq!(
        sources,
        BTreeMap::from([("chart".to_owned(), 54), ("follow".to_owned(), 2)])
    );
    let counts = csv(&h, &["--counts"]);
    assert_eq!(
        counts[0],
        [
            "video_id",
            "at",
            "views",
            "likes",
            "comment_count",
            "source",
            "methodology"
        ]
    );
    assert_eq!(counts.len() - 1, samples.len());

    // The video the follow-up found gone is marked so in the export.
    let rows = csv(&h, &[]);
    let removed = rows[0]
        .iter()
        .position(|c| c == "video_error_or_removed")
        .expect("the column");
    for row in &rows[1..] {
        assert_eq!(row[removed] == "true", row[0] == "Jd7kL2mNp4Q", "{row:?}");
    }
}
