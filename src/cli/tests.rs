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

#[test]
fn a_host_name_is_printable_without_spaces_and_short() {
    assert_eq!(parse_host_name("host-a"), Ok("host-a".to_owned()));
    assert_eq!(
        parse_host_name("ñode.example"),
        Ok("ñode.example".to_owned())
    );
    assert!(parse_host_name(&"a".repeat(HOST_NAME_MAX)).is_ok());
    for bad in [
        "",
        "host a",
        "host\tb",
        "host\u{7}",
        &"a".repeat(HOST_NAME_MAX + 1),
    ] {
        assert!(parse_host_name(bad).is_err(), "{bad:?}");
    }
    // Counted in bytes: 33 two-byte letters are 66.
    assert!(parse_host_name(&"é".repeat(33)).is_err());
}

#[test]
fn run_and_backfill_take_a_host_name() {
    let cli = Cli::try_parse_from(["trendsync", "backfill", "--host-name", "b"]).expect("parses");
    match cli.command {
        Command::Backfill(args) => assert_eq!(args.fetch.host_name.as_deref(), Some("b")),
        other => panic!("{other:?}"),
    }
    let e = Cli::try_parse_from(["trendsync", "run", "--host-name", "a b"]).expect_err("a space");
    assert_eq!(e.kind(), clap::error::ErrorKind::ValueValidation);
}
