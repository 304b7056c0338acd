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
        bucket: "budget".into(),
    };
    let regions = [region("US", Status::Complete), region("GB", Status::Failed)];
    assert_eq!(overall(&regions, Some(&stop)), Status::Failed);
    let regions = [
        region("US", Status::Complete),
        region("GB", Status::BudgetExhausted),
    ];
    assert_eq!(overall(&regions, Some(&stop)), Status::BudgetExhausted);
}

/// A slow stopped run of eight regions ended three ways: the summary names every
/// region and keeps its calls, units, what is left and videos, dropping the words
/// around them first; being of several statuses, it may then be longer than a line.
#[test]
fn a_slow_stopped_run_keeps_its_numbers() {
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
        bucket: None,
        units_charged: 7,
        units_unmetered: 0,
        calls: 7,
        remaining: Some(9493),
        remaining_by_bucket: None,
        retry_after_s: None,
        denied_by: None,
        regions,
        follow: None,
        stop_reason: None,
        ended_at: 0,
        took: Duration::from_millis(45),
        budget: None,
        limiter_up: true,
        attempts: Attempts::default(),
    };
    let fast = report.summary("run", Allowance::Ceiling);
    assert!(
        fast.contains(": 7 calls, 7 units, 9493 left, 0 videos; "),
        "{fast}"
    );
    report.took = Duration::from_millis(59 * 60_000 + 59_000);
    let slow = report.summary("run", Allowance::Ceiling);
    assert!(
        slow.contains(" in 59m 59s: 7 calls, 7 units, 9493 left, 0 videos; US GB complete, "),
        "{slow}"
    );
    assert!(slow.ends_with("FR IN BR AU CA not_attempted"), "{slow}");
}

/// A run of eight regions over three buckets: the heartbeat says what is left of
/// each, by name after the main bucket's, never a sum of two, and stays within the
/// line's 160 characters.
#[test]
fn the_summary_says_what_is_left_per_bucket() {
    let regions: Vec<RegionReport> = ["US", "GB", "DE", "FR", "IN", "JP", "BR", "MX"]
        .into_iter()
        .map(|code| region(code, Status::Complete))
        .collect();
    let mut report = RunReport {
        run_id: "1a20af2636c-d2839a10".into(),
        status: Status::Complete,
        bucket: None,
        units_charged: 6,
        units_unmetered: 0,
        calls: 6,
        remaining: Some(9480),
        remaining_by_bucket: Some(vec![
            ("budget".into(), 9480),
            ("search".into(), 91),
            ("stats".into(), 9497),
        ]),
        retry_after_s: None,
        denied_by: None,
        regions,
        follow: None,
        stop_reason: None,
        ended_at: 0,
        took: Duration::from_millis(59 * 60_000 + 59_000),
        budget: None,
        limiter_up: true,
        attempts: Attempts::default(),
    };
    let line = report.summary("run", Allowance::Ceiling);
    assert!(line.chars().count() <= SUMMARY_MAX, "{line}");
    assert!(line.contains("9480 left, search 91, stats 9497"), "{line}");
    let backfill = report.summary("backfill", Allowance::Quota);
    assert!(
        backfill.contains("9480 left to the quota, search 91, stats 9497"),
        "{backfill}"
    );
    // Stopped by the search bucket's limiter outage, regions ended two ways.
    report.status = Status::LimiterDown;
    for r in &mut report.regions[5..] {
        r.status = Status::LimiterDown;
    }
    let stopped = report.summary("run", Allowance::Ceiling);
    assert!(stopped.chars().count() <= SUMMARY_MAX, "{stopped}");
    assert!(
        stopped.contains("9480 left, search 91, stats 9497")
            && stopped.ends_with("US GB DE FR IN complete, JP BR MX limiter_down"),
        "{stopped}"
    );
    // One bucket: as it always was.
    report.remaining_by_bucket = Some(vec![("budget".into(), 9480)]);
    let one = report.summary("run", Allowance::Ceiling);
    assert!(
        one.contains(", 9480 left, ") && !one.contains("search"),
        "{one}"
    );
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

/// A region another host fetched is done: a run of such regions, alone or beside
/// complete ones, is complete (docs/json.md).
#[test]
fn regions_done_elsewhere_make_a_complete_run() {
    let done = || region("US", Status::DoneElsewhere);
    assert_eq!(overall(&[done()], None), Status::Complete);
    assert_eq!(
        overall(&[done(), region("GB", Status::Complete)], None),
        Status::Complete
    );
    assert_eq!(
        overall(&[done(), region("GB", Status::Failed)], None),
        Status::Failed
    );
}

/// An upstream block names the methods it blocks, which after a costs-file switch may
/// be only some of the bucket's: never "the budget" as a whole.
#[test]
fn an_upstream_block_names_its_methods() {
    let now = Micros::new(1_000_000);
    let decision = crate::quota::Decision {
        granted: false,
        duplicate: false,
        units: 100,
        parts: Vec::new(),
        denied_by: Some(crate::quota::UPSTREAM_POLICY.into()),
        retry_after: Some(Duration::from_secs(60)),
    };
    let one = Stop::denied("search.list", BUDGET_POLICY, &decision, now, &[]);
    assert_eq!(one.bucket(), Some(BUDGET_POLICY));
    assert_eq!(
        one.describe(now),
        "the upstream said earlier that the key's quota is spent; search.list is blocked until 1970-01-01T00:01:01Z"
    );
    let whole = Stop::denied(
        "videos.list",
        "search",
        &decision,
        now,
        &["search.list".into(), "videos.list".into()],
    );
    assert_eq!(
        whole.describe(now),
        "the upstream said earlier that the key's quota is spent; the \"search\" bucket is spent: search.list, videos.list are blocked until 1970-01-01T00:01:01Z, the other buckets' calls go on"
    );
}

/// The cron log: eight regions with category charts and follow-ups, a slow
/// run with large counts, under the default costs file and the granular one (three
/// buckets). The summary keeps calls, units, what is left of each bucket and videos,
/// and stays within 160 characters whatever single status the run and its regions
/// end in: for `run` under both files, and for `backfill` (whose figures are to the
/// quota) under the default one.
#[test]
fn with_categories_and_follow_ups_the_summary_keeps_its_numbers_in_a_line() {
    let regions: Vec<RegionReport> = ["US", "GB", "DE", "FR", "IN", "JP", "BR", "MX"]
        .into_iter()
        .map(|code| RegionReport {
            videos: 1_249,
            pages: 10,
            units: 10,
            ..region(code, Status::Complete)
        })
        .collect();
    let follow = FollowReport {
        status: Status::Complete,
        calls: 10,
        videos: 500,
        removed: 0,
        missing: 0,
        missing_found: 0,
        units: 10,
        units_unmetered: 0,
        error: None,
    };
    let mut report = RunReport {
        run_id: "1a20af2636c-d2839a10".into(),
        status: Status::Complete,
        bucket: None,
        units_charged: 999,
        units_unmetered: 0,
        calls: 999,
        remaining: Some(8_266),
        remaining_by_bucket: None,
        retry_after_s: None,
        denied_by: None,
        regions,
        follow: Some(follow),
        stop_reason: None,
        ended_at: 0,
        took: Duration::from_millis(59 * 60_000 + 59_000),
        budget: None,
        limiter_up: true,
        attempts: Attempts::default(),
    };
    let granular = Some(vec![
        ("budget".into(), 8_266),
        ("search".into(), 91),
        ("stats".into(), 9_497),
    ]);
    let statuses = [
        Status::Complete,
        Status::BudgetExhausted,
        Status::UpstreamQuotaExhausted,
        Status::LimiterDown,
        Status::ClockSkew,
        Status::Interrupted,
        Status::Failed,
    ];
    let cases = [
        ("run", Allowance::Ceiling, None, "8266 left"),
        (
            "run",
            Allowance::Ceiling,
            granular.clone(),
            "8266 left, search 91, stats 9497",
        ),
        ("backfill", Allowance::Quota, None, "8266 left to the quota"),
    ];
    for (kind, allowance, buckets, left) in cases {
        report.remaining_by_bucket = buckets;
        for status in statuses {
            report.status = status;
            for r in &mut report.regions {
                r.status = status;
            }
            let line = report.summary(kind, allowance);
            assert!(
                line.chars().count() <= SUMMARY_MAX,
                "{} characters: {line}",
                line.chars().count()
            );
            assert!(
                line.contains(&format!(": 999 calls, 999 units, {left}, 9992 videos")),
                "{line}"
            );
            assert!(line.contains("US GB DE FR IN JP BR MX"), "{line}");
        }
    }

    // A quick one with fewer figures says more: the follow-ups' own numbers, the word
    // "regions" and their status.
    report.status = Status::Complete;
    for r in &mut report.regions {
        r.status = Status::Complete;
        r.videos = 100;
    }
    report.took = Duration::from_secs(12);
    report.remaining_by_bucket = None;
    report.units_charged = 42;
    report.calls = 42;
    let quick = report.summary("run", Allowance::Ceiling);
    assert!(quick.chars().count() <= SUMMARY_MAX, "{quick}");
    assert!(
        quick.contains(": 42 calls, 42 units, 8266 left, 800 videos, 500 followed up; regions US GB DE FR IN JP BR MX complete"),
        "{quick}"
    );
    // Follow-ups that failed say so, however short the line must be.
    if let Some(f) = &mut report.follow {
        f.status = Status::Failed;
    }
    report.status = Status::Failed;
    report.took = Duration::from_millis(59 * 60_000 + 59_000);
    report.remaining_by_bucket = granular;
    let failed = report.summary("run", Allowance::Ceiling);
    assert!(failed.contains("follow-ups failed"), "{failed}");
    assert!(
        failed.contains(": 42 calls, 42 units, 8266 left, search 91, stats 9497, 800 videos"),
        "{failed}"
    );
}

/// A region the run never reached says why, and another region's error is named as
/// that region's, never given as its own.
#[test]
fn a_region_not_attempted_says_why_without_another_regions_error() {
    let now = Micros::new(1_700_000_000_000_000);
    let key = Stop::Fatal {
        message: "videos.list for region GB: API key not valid (HTTP 400, keyInvalid)".into(),
    };
    let said = key.not_attempted(now, Some("GB"));
    assert_eq!(
        said,
        "not attempted: the run stopped before it, after GB's error"
    );
    let budget = Stop::Budget {
        method: "videos.list",
        units: 1,
        denied_by: "budget".into(),
        retry_after: Some(Duration::from_secs(60)),
        remaining: 0,
        bucket: "budget".into(),
    };
    let said = budget.not_attempted(now, None);
    assert!(
        said.starts_with("not attempted: the run stopped before it: budget exhausted: "),
        "{said}"
    );
}
