//! What people read (DESIGN.md 2 "Text output", and 7): tables that fit the terminal,
//! the cron heartbeat, progress that says what is queued and what was never fetched,
//! and run durations in the metrics file.

use trendsync::table::columns;

use crate::common::harness::{Harness, REGIONS, unit_costs_toml};
use crate::common::upstream::{answer_fixture, page1};

/// The eight regions, two with category charts.
fn eight_regions() -> String {
    let mut text = String::from("[defaults]\npages = 2\n");
    for (i, code) in REGIONS.iter().enumerate() {
        text.push_str(&format!(
            "\n[[region]]\ncode = \"{code}\"\noffset = {}\n",
            i * 7
        ));
        if i < 2 {
            text.push_str("categories = [\"10\", \"17\"]\n");
        }
    }
    text
}

/// A history with long reasons: every region complete, then FR failing on a missing
/// chart and the budget running out part way through the others.
fn long_reasons(h: &mut Harness<'_>) {
    h.costs(&unit_costs_toml(10_000, 9_500))
        .regions(&eight_regions());
    let (ran, _) = h.run(&["run"]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    h.fake.answer_instead(
        page1("FR"),
        answer_fixture(404, "error_video_chart_not_found.json"),
    );
    let used = h.budget()["used"].as_u64().expect("used");
    h.costs(&unit_costs_toml(10_000, used + 9));
    let (ran, _) = h.run(&["run", "--concurrency", "1"]);
    assert_eq!(ran.code, 1, "{}", ran.stderr);
}

/// `args` run with `COLUMNS` set to `width`: stdout, with no line wider than it.
fn at_width(h: &Harness<'_>, args: &[&str], width: usize) -> String {
    let ran = h.bare().env("COLUMNS", width.to_string()).args(args).run();
    assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
    for line in ran.stdout.lines() {
        assert!(
            columns(line) <= width,
            "{args:?} at {width} columns: a line of {} columns:\n{line}\n\n{}",
            columns(line),
            ran.stdout
        );
    }
    ran.stdout
}

#[test]
fn status_and_runs_fit_80_and_40_columns_and_json_keeps_every_reason_whole() {
    let mut h = Harness::new(None);
    long_reasons(&mut h);

    let status = h.bare().args(["status", "--json"]).run().json();
    let reasons: Vec<String> = status["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .filter_map(|r| r["last_reason"].as_str().map(str::to_owned))
        .collect();
    assert!(
        reasons.iter().any(|r| columns(r) > 80),
        "a reason longer than a line: {reasons:?}"
    );
    let runs = h.bare().args(["runs", "--json"]).run().json();
    let whole: Vec<&str> = runs["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["reason"].as_str())
        .collect();
    for reason in &reasons {
        assert!(whole.contains(&reason.as_str()), "{reason} in {runs}");
    }

    for args in [&["status"][..], &["runs"]] {
        let wide = at_width(&h, args, 80);
        assert!(wide.contains('…'), "{args:?}: a reason cut\n{wide}");
        for code in REGIONS {
            assert!(
                wide.lines()
                    .any(|l| l.starts_with(code) || l.contains(&format!(" {code} "))),
                "{args:?}: region {code} at 80 columns\n{wide}"
            );
        }
        for word in ["status", "reason", "budget_exhausted", "failed"] {
            assert!(wide.contains(word), "{args:?}: {word} at 80\n{wide}");
        }
        let narrow = at_width(&h, args, 40);
        for word in ["region", "status", "failed", "FR"] {
            assert!(narrow.contains(word), "{args:?}: {word} at 40\n{narrow}");
        }
        // Without a width (piped, COLUMNS unset) nothing is cut.
        let piped = h.bare().args(args).run();
        assert!(!piped.stdout.contains('…'), "{}", piped.stdout);
        let longest = reasons.iter().max_by_key(|r| r.len()).expect("reasons");
        assert!(piped.stdout.contains(longest.as_str()), "{}", piped.stdout);
    }
}

#[test]
fn the_dry_run_plan_fits_80_and_40_columns() {
    let mut h = Harness::new(None);
    h.costs(&unit_costs_toml(10_000, 9))
        .regions(&eight_regions());
    for width in [80, 40] {
        let ran = h
            .cmd()
            .env("COLUMNS", width.to_string())
            .args(["run", "--dry-run"])
            .run();
        assert_eq!(ran.code, 75, "{}", ran.stderr);
        for line in ran.stdout.lines() {
            assert!(columns(line) <= width, "{width}: {line}\n{}", ran.stdout);
        }
        assert!(ran.stdout.contains("would stop here"), "{}", ran.stdout);
    }
}
