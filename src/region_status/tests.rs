//! Unit tests of `region_status.rs`.

use super::*;

/// Each status reads back from its word and no two share one; the serialized name
/// (the JSON summary's) is the word too.
#[test]
fn every_status_reads_back_from_its_word() {
    for s in RegionStatus::ALL {
        assert_eq!(s.as_str().parse::<RegionStatus>(), Ok(s));
        assert_eq!(
            serde_json::to_string(&s).expect("serializing"),
            format!("\"{s}\"")
        );
    }
    let err = "done".parse::<RegionStatus>().expect_err("not a status");
    assert!(err.to_string().contains("not_attempted"), "{err}");
    assert!("Complete".parse::<RegionStatus>().is_err());
}

#[test]
fn the_in_progress_statuses_are_the_ones_listed_for_sql() {
    let going: Vec<RegionStatus> = RegionStatus::ALL
        .into_iter()
        .filter(|s| s.in_progress())
        .collect();
    assert_eq!(going, RegionStatus::IN_PROGRESS);
}

fn read<T: FromSql>(conn: &rusqlite::Connection, word: &str) -> rusqlite::Result<T> {
    conn.query_row("SELECT ?1", [word], |row| row.get(0))
}

/// Every status and outcome goes into the file as its word and comes back as
/// itself, bare or recorded.
#[test]
fn every_word_goes_through_the_database_as_itself() {
    let conn = rusqlite::Connection::open_in_memory().expect("a database");
    let back = |value: &dyn ToSql| -> String {
        conn.query_row("SELECT ?1", [value], |row| row.get(0))
            .expect("reading back")
    };
    for s in RegionStatus::ALL {
        assert_eq!(back(&s), s.as_str());
        assert_eq!(read::<RegionStatus>(&conn, s.as_str()).expect("known"), s);
        let recorded: Recorded<RegionStatus> = read(&conn, s.as_str()).expect("known");
        assert_eq!(recorded, Recorded::Known(s));
        assert_eq!(back(&recorded), s.as_str());
        assert_eq!(recorded.to_string(), s.as_str());
    }
    for o in CallOutcome::ALL {
        assert_eq!(back(&o), o.as_str());
        assert_eq!(read::<CallOutcome>(&conn, o.as_str()).expect("known"), o);
        let recorded: Recorded<CallOutcome> = read(&conn, o.as_str()).expect("known");
        assert_eq!(recorded, o);
    }
    for k in LimiterKind::ALL {
        assert_eq!(back(&k), k.as_str());
        assert_eq!(read::<LimiterKind>(&conn, k.as_str()).expect("known"), k);
        assert_eq!(k.as_str().parse::<LimiterKind>(), Ok(k));
        // The JSON's `limiter.kind` is the stored word too.
        assert_eq!(
            serde_json::to_string(&k).expect("serializing"),
            format!("\"{k}\"")
        );
    }
    assert_eq!(LimiterKind::Embedded.as_str(), "embedded");
    assert_eq!(LimiterKind::Redis.as_str(), "redis");
    assert!("Redis".parse::<LimiterKind>().is_err());
}

/// A word an older or newer trendsync wrote still reads, shows and serializes as
/// itself, and is none of the known values; only the bare type refuses it.
#[test]
fn an_unknown_word_in_the_file_still_reads_as_itself() {
    let conn = rusqlite::Connection::open_in_memory().expect("a database");
    let status: Recorded<RegionStatus> = read(&conn, "partial").expect("an unknown word");
    assert_eq!(status, Recorded::Unknown("partial".to_owned()));
    assert_eq!(status.to_string(), "partial");
    assert_eq!(
        serde_json::to_string(&status).expect("serializing"),
        "\"partial\""
    );
    assert_eq!(status.known(), None);
    assert!(!in_progress(&status));
    assert!(RegionStatus::ALL.iter().all(|s| status != *s));
    let err = read::<RegionStatus>(&conn, "partial").expect_err("not a status");
    assert!(err.to_string().contains("partial"), "{err}");

    let outcome: Recorded<CallOutcome> = read(&conn, "throttled").expect("an unknown word");
    assert_eq!(outcome.to_string(), "throttled");
    assert!(CallOutcome::ALL.iter().all(|o| outcome != *o));
    assert!(read::<CallOutcome>(&conn, "throttled").is_err());

    // Written back as it was read.
    let again: String = conn
        .query_row("SELECT ?1", [&status], |row| row.get(0))
        .expect("writing back");
    assert_eq!(again, "partial");
    // Known words keep the JSON they had as strings.
    let known = Recorded::Known(RegionStatus::NotAttempted);
    assert_eq!(
        serde_json::to_string(&known).expect("serializing"),
        "\"not_attempted\""
    );
    assert!(in_progress(&Recorded::Known(RegionStatus::Queued)));
}
