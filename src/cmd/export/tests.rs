//! Unit tests of `cmd/export.rs`.

use super::{
    COUNTS_COLUMNS, COUNTS_TABLE, CSV_COLUMNS, Column, HISTORY_COLUMNS, HISTORY_TABLE,
    PLACES_TABLE, inert_cell,
};

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
