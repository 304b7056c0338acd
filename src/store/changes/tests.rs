use super::*;

/// 00:00 UTC of `date`, in unix seconds.
fn midnight(date: &str) -> i64 {
    format!("{date}T00:00:00Z")
        .parse::<jiff::Timestamp>()
        .expect("a date")
        .as_second()
}

#[test]
fn each_change_takes_effect_at_the_start_of_its_day_and_they_are_in_order() {
    for c in UPSTREAM_CHANGES {
        assert_eq!(c.effective_at, midnight(c.id), "{}", c.id);
    }
    assert!(
        UPSTREAM_CHANGES
            .windows(2)
            .all(|w| w[0].effective_at < w[1].effective_at)
    );
}

#[test]
fn the_methodology_is_the_latest_change_of_meaning_and_quota_changes_do_not_count() {
    assert_eq!(methodology_at(midnight("2025-03-31") - 1), None);
    assert_eq!(methodology_at(midnight("2025-03-31")), Some("2025-03-31"));
    assert_eq!(methodology_at(midnight("2025-07-21")), Some("2025-07-21"));
    // The quota buckets of June 2026 change no number.
    assert_eq!(methodology_at(midnight("2026-06-15")), Some("2025-07-21"));
    assert_eq!(
        methodology_at(midnight("2026-08-27") - 1),
        Some("2025-07-21")
    );
    assert_eq!(methodology_at(midnight("2026-08-27")), Some("2026-08-27"));
    assert_eq!(methodology_at(midnight("2026-11-25")), Some("2026-08-27"));
}

#[test]
fn a_series_crosses_the_changes_between_two_samples() {
    let ids = |from: &str, to: &str| -> Vec<&str> {
        crossed(midnight(from), midnight(to))
            .map(|c| c.id)
            .collect()
    };
    assert_eq!(ids("2026-08-01", "2026-09-01"), ["2026-08-27"]);
    assert_eq!(
        ids("2025-01-01", "2026-09-01"),
        ["2025-03-31", "2025-07-21", "2026-08-27"]
    );
    assert!(
        ids("2026-05-01", "2026-07-01").is_empty(),
        "quota changes mark nothing"
    );
    assert!(
        ids("2026-08-27", "2026-09-01").is_empty(),
        "a sample at the change is after it"
    );
}

#[test]
fn the_step_writes_every_change_and_the_marked_history_carries_it() {
    let conn = Connection::open_in_memory().expect("memory");
    conn.execute_batch(
        "CREATE TABLE h (video_id TEXT, at INTEGER);
         CREATE VIEW video_history (video_id, at, source, region, chart, search_name, rank,
                                    view_count, like_count, comment_count, run_id) AS
         SELECT video_id, at, 'chart', 'US', NULL, NULL, 1, 5, NULL, NULL, 'r' FROM h;",
    )
    .expect("a stand-in history");
    conn.execute_batch(CREATE).expect("the step's tables");
    fill(&conn).expect("the rows");
    fill(&conn).expect("a rerun after a kill adds nothing");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM upstream_changes", [], |r| r.get(0))
        .expect("count");
    assert_eq!(n, UPSTREAM_CHANGES.len() as i64);
    conn.execute(
        "INSERT INTO h VALUES ('v', ?1), ('v', ?2)",
        params![midnight("2026-08-26"), midnight("2026-08-28")],
    )
    .expect("two samples");
    let marks: Vec<(String, String)> = conn
        .prepare("SELECT at, methodology FROM video_history_marked_utc ORDER BY at")
        .expect("prepare")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("query")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert_eq!(
        marks,
        [
            ("2026-08-26T00:00:00Z".to_owned(), "2025-07-21".to_owned()),
            ("2026-08-28T00:00:00Z".to_owned(), "2026-08-27".to_owned()),
        ]
    );
}
