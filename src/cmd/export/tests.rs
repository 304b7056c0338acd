//! Unit tests of `cmd/export.rs`.

use super::{COUNTS_TABLE, Column, HISTORY_TABLE, PLACES_TABLE, inert_cell};

// The CSV headers as the documentation gives them: the Parquet schemas, whose names
// write the headers, must list these, in this order.

/// The CSV header: the datasets' columns, then ours.
const CSV_COLUMNS: [&str; 24] = [
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
    "methodology",
];

/// The CSV header of `--per video`.
const HISTORY_COLUMNS: [&str; 18] = [
    "video_id",
    "title",
    "channel_title",
    "category_id",
    "region",
    "chart",
    "channel_id",
    "first_seen",
    "last_seen",
    "days_on_chart",
    "fetches",
    "best_rank",
    "best_rank_at",
    "entries",
    "views",
    "likes",
    "comment_count",
    "methodology",
];

/// The CSV header of `--counts`.
const COUNTS_COLUMNS: [&str; 7] = [
    "video_id",
    "counted_at",
    "views",
    "likes",
    "comment_count",
    "source",
    "methodology",
];

#[test]
fn cells_a_spreadsheet_would_run_are_quoted() {
    for formula in [
        "=HYPERLINK(\"http://x\",\"y\")",
        "+1",
        "-2+3",
        "@SUM(A1)",
        "\t=1",
        "\r=1",
    ] {
        assert_eq!(inert_cell(formula), format!("'{formula}"), "{formula:?}");
    }
    for text in ["plain", "1+1", "a=b", "", " =1", "'quoted"] {
        assert_eq!(inert_cell(text), text, "{text:?}");
    }
}

#[test]
fn parquet_has_the_csv_columns_in_their_order() {
    let names = |table: &[Column]| table.iter().map(|c| c.name).collect::<Vec<_>>();
    assert_eq!(names(&PLACES_TABLE), CSV_COLUMNS);
    assert_eq!(names(&HISTORY_TABLE), HISTORY_COLUMNS);
    assert_eq!(names(&COUNTS_TABLE), COUNTS_COLUMNS);
}

#[test]
fn every_column_says_what_it_means() {
    for column in PLACES_TABLE
        .iter()
        .chain(&HISTORY_TABLE)
        .chain(&COUNTS_TABLE)
    {
        assert!(
            !column.description.is_empty(),
            "{} has no description",
            column.name
        );
    }
    let methodology = COUNTS_TABLE.iter().find(|c| c.name == "methodology");
    assert!(
        methodology.is_some_and(
            |c| c.description.contains("id of the latest upstream change")
                && c.description.contains("not a date")
        ),
        "{methodology:?}"
    );
}
