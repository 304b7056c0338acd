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
