//! Unit tests of `cmd/crontab.rs`.

use super::*;

fn m(n: u64) -> Duration {
    Duration::from_secs(n * 60)
}

#[test]
fn schedules_spread_by_offset() {
    assert_eq!(schedule(m(60), 7).ok(), Some("7 *".to_owned()));
    assert_eq!(schedule(m(180), 14).ok(), Some("14 */3".to_owned()));
    assert_eq!(schedule(m(24 * 60), 49).ok(), Some("49 0".to_owned()));
    assert_eq!(schedule(m(30), 42).ok(), Some("12,42 *".to_owned()));
    assert_eq!(schedule(m(15), 7).ok(), Some("7,22,37,52 *".to_owned()));
}

#[test]
fn uneven_periods_are_refused() {
    assert!(schedule(m(7), 0).is_err());
    assert!(schedule(m(300), 0).is_err());
    assert!(schedule(m(48 * 60), 0).is_err());
    assert!(schedule(Duration::from_secs(90), 0).is_err());
}

#[test]
fn percent_signs_are_escaped_for_cron() {
    assert_eq!(
        cron_escape("cd '/srv/50%' && t --db '/srv/50%/t.db'"),
        r"cd '/srv/50\%' && t --db '/srv/50\%/t.db'"
    );
    assert_eq!(cron_escape("cd /srv && t"), "cd /srv && t");
}

#[test]
fn paths_are_quoted_for_the_shell() {
    assert_eq!(
        sh(Path::new("/opt/trendsync/bin/trendsync")),
        "/opt/trendsync/bin/trendsync"
    );
    assert_eq!(
        sh(Path::new("/srv/my data/it's")),
        r"'/srv/my data/it'\''s'"
    );
}

#[test]
fn line_breaks_are_refused_naming_what_holds_them() {
    for (text, which) in [
        ("/srv/two\nlines", "a newline"),
        ("/srv/back\rhere", "a carriage return"),
        ("/srv/nul\0byte", "a NUL byte"),
    ] {
        let err =
            refuse_line_break("--db", text, "give --db a path without one").expect_err("refused");
        let said = err.to_string();
        assert!(said.starts_with("--db \""), "{said}");
        assert!(said.contains(which), "{said}");
        assert!(said.contains("cron reads one line per job"), "{said}");
        assert!(
            !said.contains('\n') && !said.contains('\r'),
            "one line: {said:?}"
        );
    }
    assert!(refuse_line_break("--db", "/srv/tab\there", "x").is_ok());
    let err = line_word("--db", Path::new("t.db"), Path::new("/srv/two\nlines/t.db"))
        .expect_err("refused");
    assert!(
        err.to_string().contains("the current directory's path"),
        "{err}"
    );
}

#[test]
fn maintenance_lines_start_at_minutes_no_run_line_takes() {
    assert_eq!(free_minutes(&[0, 7, 14, 21, 28, 35, 42, 49], 2), [55, 54]);
    assert_eq!(free_minutes(&[55, 54, 10], 2), [53, 52]);
    // Every minute taken: the least used.
    let twice_but_30: Vec<u32> = (0..60).chain((0..60).filter(|m| *m != 30)).collect();
    assert_eq!(free_minutes(&twice_but_30, 1), [30]);
    let every = schedule(m(15), 10).ok().unwrap_or_default();
    let used = minutes_used(&[(every, "US")]);
    assert_eq!(used, [10, 25, 40, 55]);
    assert_eq!(free_minutes(&used, 2), [54, 53]);
}

#[test]
fn maintenance_lines_are_commented_and_carry_the_run_lines_command() {
    let schedules = [("0 *".to_owned(), "US"), ("55 *".to_owned(), "GB")];
    let text = maintenance_lines(
        &schedules,
        m(60),
        Path::new("/srv/50%"),
        "/usr/local/bin/trendsync --db '/srv/50%/t.db'",
    );
    let jobs: Vec<&str> = text.lines().filter(|l| l.contains(" && ")).collect();
    assert_eq!(
        jobs,
        [
            r"#54 */6 * * * cd '/srv/50\%' && /usr/local/bin/trendsync --db '/srv/50\%/t.db' backfill --stale-after 2h >> '/srv/50\%/trendsync.log' 2>&1",
            r"#53 4 * * * cd '/srv/50\%' && /usr/local/bin/trendsync --db '/srv/50\%/t.db' -q prune --older-than 365d >> '/srv/50\%/trendsync.log' 2>&1",
        ]
    );
    assert!(text.lines().all(|l| l.starts_with('#')), "{text}");
}
