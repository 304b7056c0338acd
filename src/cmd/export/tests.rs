//! Unit tests of `cmd/export.rs`.

use super::inert_cell;

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
