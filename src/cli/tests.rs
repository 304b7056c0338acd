//! Unit tests of `cli.rs`.

use super::*;
use clap::CommandFactory;

#[test]
fn the_cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn the_export_summary_names_every_format() {
    let cli = Cli::command();
    let export = cli
        .find_subcommand("export")
        .and_then(|c| c.get_about())
        .map(ToString::to_string)
        .unwrap_or_default();
    for format in ["CSV", "JSON lines", "Parquet"] {
        assert!(export.contains(format), "{format}: {export}");
    }
}

#[test]
fn chart_takes_a_category_overall_or_all() {
    assert_eq!(parse_chart_arg("17"), Ok(ChartChoice::Id(17)));
    assert_eq!(parse_chart_arg("overall"), Ok(ChartChoice::Id(0)));
    assert_eq!(parse_chart_arg(" ALL "), Ok(ChartChoice::All));
    for bad in ["0", "sports", "-1", "+17", ""] {
        let err = parse_chart_arg(bad).expect_err(bad);
        assert!(err.contains("overall, or all"), "{bad}: {err}");
    }
}
