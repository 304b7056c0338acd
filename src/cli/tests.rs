//! Unit tests of `cli.rs`.

use super::*;
use clap::CommandFactory;

#[test]
fn the_cli_definition_is_consistent() {
    Cli::command().debug_assert();
}
