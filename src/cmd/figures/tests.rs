//! Unit tests of `cmd/figures.rs`.

use super::*;
use crate::clock::Micros;
use crate::quota::BucketFigures;

fn bucket(used: u64, blocked_until: Option<Micros>) -> BucketJson {
    BucketJson::of(&BucketFigures {
        name: "search".into(),
        used,
        ceiling: 9500,
        quota: 10_000,
        blocked_until,
        upstream_spent_at: None,
    })
}

/// While a bucket is blocked, its line leads with the block, not with what its count
/// leaves: "9468 remaining" first would read as "spend away".
#[test]
fn a_blocked_bucket_leads_with_its_block() {
    let blocked = bucket_text(&bucket(32, Some(Micros::new(1_764_057_600_000_000))));
    assert!(
        blocked.starts_with("blocked until 2025-11-25T08:00:00Z"),
        "{blocked}"
    );
    assert!(
        blocked.contains("nothing can be spent from it until then; 32 used of ceiling 9500, 9468 remaining by this budget's count"),
        "{blocked}"
    );
    let open = bucket_text(&bucket(32, None));
    assert_eq!(open, "32 used of ceiling 9500, 9468 remaining; not blocked");
}

/// The last known figures say when they were read and how long ago, then each
/// bucket; the journal line says how many calls wait and since when.
#[test]
fn the_last_known_figures_and_the_journal_say_when() {
    let read_at = 1_764_000_000_000_000;
    let known = LastKnownJson::of(LastKnown {
        buckets: vec![BucketFigures {
            name: "budget".into(),
            used: 120,
            ceiling: 9500,
            quota: 10_000,
            blocked_until: None,
            upstream_spent_at: None,
        }],
        as_of: Some(Micros::new(read_at)),
    })
    .expect("the main bucket is there");
    assert_eq!(known.as_of.as_deref(), Some("2025-11-24T16:00:00Z"));
    let now_s = read_at / 1_000_000 + 3 * 3600 + 12 * 60;
    let mut out = Vec::new();
    known.write(&mut out, now_s).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(
        text,
        "  last known figures, as the latest run that read the limiter left them at 2025-11-24T16:00:00Z (3h 12m ago):\n    bucket \"budget\": 120 used of ceiling 9500, 9380 remaining; not blocked\n"
    );

    let journal = JournalJson {
        pending_calls: 38,
        oldest_at: Some(rfc3339(read_at)),
        oldest_at_us: Some(read_at),
    };
    assert_eq!(
        journal.text(now_s),
        "journal: 38 calls made while the limiter was down wait to be counted, the oldest made at 2025-11-24T16:00:00Z (3h 12m ago); the next command that reaches the limiter replays them"
    );
    let none = JournalJson {
        pending_calls: 0,
        oldest_at: None,
        oldest_at_us: None,
    };
    assert!(none.text(now_s).contains("no call"), "{}", none.text(now_s));
    // Without a main bucket nothing is known.
    assert!(
        LastKnownJson::of(LastKnown {
            buckets: Vec::new(),
            as_of: None
        })
        .is_none()
    );
}
