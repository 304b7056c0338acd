//! Unit tests of `runner/outcome.rs`.

use super::*;

fn region(code: &str, status: Status) -> RegionReport {
    RegionReport {
        status,
        ..RegionReport::new(code)
    }
}

#[test]
fn a_failed_region_outranks_a_clean_stop() {
    let stop = Stop::Budget {
        method: "videos.list",
        units: 1,
        denied_by: "budget".into(),
        retry_after: None,
        remaining: 0,
    };
    let regions = [region("US", Status::Complete), region("GB", Status::Failed)];
    assert_eq!(overall(&regions, Some(&stop)), Status::Failed);
    let regions = [
        region("US", Status::Complete),
        region("GB", Status::BudgetExhausted),
    ];
    assert_eq!(overall(&regions, Some(&stop)), Status::BudgetExhausted);
}

/// A slow stopped run of eight regions ended three ways: the summary drops the
/// numbers the history keeps, units last, and still names every region.
#[test]
fn a_slow_stopped_run_fits_its_summary_by_dropping_numbers() {
    let mut regions = vec![
        region("US", Status::Complete),
        region("GB", Status::Complete),
    ];
    regions.push(region("DE", Status::UpstreamQuotaExhausted));
    for code in ["FR", "IN", "BR", "AU", "CA"] {
        regions.push(region(code, Status::NotAttempted));
    }
    let mut report = RunReport {
        run_id: "1a20af2636c-d2839a10".into(),
        status: Status::UpstreamQuotaExhausted,
        units_charged: 7,
        units_unmetered: 0,
        calls: 7,
        remaining: Some(9493),
        retry_after_s: None,
        denied_by: None,
        regions,
        follow: None,
        stop_reason: None,
        ended_at: 0,
        took: Duration::from_millis(45),
        budget: None,
        attempts: Attempts::default(),
    };
    let fast = report.summary("run", Allowance::Ceiling);
    assert!(fast.contains(": 7 units, 9493 left; "), "{fast}");
    report.took = Duration::from_millis(59 * 60_000 + 59_000);
    let slow = report.summary("run", Allowance::Ceiling);
    assert!(slow.chars().count() <= SUMMARY_MAX, "{slow}");
    assert!(
        slow.contains(" in 59m 59s: 9493 left; regions US GB complete, "),
        "{slow}"
    );
    assert!(slow.ends_with("FR IN BR AU CA not_attempted"), "{slow}");
}

#[test]
fn skipped_only_when_every_region_was_skipped() {
    assert_eq!(
        overall(&[region("US", Status::Skipped)], None),
        Status::Skipped
    );
    assert_eq!(
        overall(
            &[
                region("US", Status::Skipped),
                region("GB", Status::Complete)
            ],
            None
        ),
        Status::Complete
    );
    assert_eq!(overall(&[], None), Status::Complete);
}
