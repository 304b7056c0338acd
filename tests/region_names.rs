//! A region code a person mistyped (DESIGN.md sections 2 and 4): a usage error naming
//! the nearest known code, never an empty answer that reads as "no data".

use crate::common::harness::{Harness, THREE_REGIONS};

/// `args` on `h`: its exit code and stderr.
fn ran(h: &Harness<'_>, args: &[&str]) -> (i32, String) {
    let ran = h.cmd().args(args).run();
    (ran.code, ran.stderr)
}

#[test]
fn a_mistyped_region_is_a_usage_error_naming_the_nearest_code() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let (code, err) = ran(&h, &["run", "--region", "US"]);
    assert_eq!(code, 0, "{err}");

    for args in [
        &["run", "--region", "UK"][..],
        &["backfill", "--region", "UK"],
        &["runs", "--region", "UK"],
        &["export", "--region", "UK"],
        &["search", "Ammonite", "--region", "UK"],
    ] {
        h.expect_stderr("did you mean GB");
        let (code, err) = ran(&h, args);
        assert_eq!(code, 2, "{args:?}: {err}");
    }
    // Lower case is the same code, not a mistake.
    let (code, err) = ran(&h, &["runs", "--region", "us"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_region_removed_from_the_file_still_reads_from_the_database() {
    let mut h = Harness::new(None);
    h.regions(THREE_REGIONS);
    let (code, err) = ran(&h, &["run", "--region", "DE"]);
    assert_eq!(code, 0, "{err}");
    h.regions("[defaults]\npages = 2\n\n[[region]]\ncode = \"US\"\noffset = 0\n");
    for args in [
        &["runs", "--region", "DE"][..],
        &["export", "--region", "DE"],
    ] {
        let ran = h.cmd().args(args).run();
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        assert!(ran.stdout.contains("DE"), "{args:?}: {}", ran.stdout);
    }
    // The run itself can only fetch what the file lists.
    h.expect_stderr("--region DE is not in regions.toml");
    let (code, err) = ran(&h, &["run", "--region", "DE"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn uk_in_regions_toml_is_refused_with_gb_suggested() {
    let mut h = Harness::new(None);
    h.regions("[[region]]\ncode = \"UK\"\noffset = 0\n");
    h.expect_stderr("did you mean \"GB\"");
    let (code, err) = ran(&h, &["run", "--dry-run"]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("my-regions.toml:2:"), "file and line: {err}");
}
