//! A region code a person mistyped (docs/commands.md): a usage error naming
//! the nearest known code, never an empty answer that reads as "no data".

use crate::common::contains;
use crate::common::harness::{Harness, THREE_REGIONS};

#[test]
fn a_mistyped_region_is_a_usage_error_naming_the_nearest_code() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    h.cmd().args(["run", "--region", "US"]).run();

    for args in [
        &["run", "--region", "UK"][..],
        &["backfill", "--region", "UK"],
        &["runs", "--region", "UK"],
        &["export", "--region", "UK"],
        &["search", "Ammonite", "--region", "UK"],
    ] {
        h.expect_stderr("did you mean GB");
        h.cmd().args(args).status(2).run();
    }
    // Lower case is the same code, not a mistake.
    h.cmd().args(["runs", "--region", "us"]).run();
}

#[test]
fn a_region_removed_from_the_file_still_reads_from_the_database() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    h.cmd().args(["run", "--region", "DE"]).run();
    h.regions("[defaults]\npages = 2\n\n[[region]]\ncode = \"US\"\noffset = 0\n");
    for args in [
        &["runs", "--region", "DE"][..],
        &["export", "--region", "DE"],
    ] {
        h.cmd().args(args).stdout(contains("DE")).run();
    }
    // The run itself can only fetch what the file lists.
    h.expect_stderr("--region DE is not in regions.toml");
    h.cmd().args(["run", "--region", "DE"]).status(2).run();
}

#[test]
fn uk_in_regions_toml_is_refused_with_gb_suggested() {
    let mut h = Harness::new(None);
    h.regions("[[region]]\ncode = \"UK\"\noffset = 0\n");
    h.expect_stderr("did you mean \"GB\"");
    h.cmd()
        .args(["run", "--dry-run"])
        .status(78)
        // The file and the line.
        .stderr(contains("my-regions.toml:2:"))
        .run();
}
