//! Noting missed slots: each once, counted per region, and a file without the table.

use super::*;
use crate::store::test_support::{open, open_read_only, steps_before, temp_db};

fn miss(region: &str, slot_start: i64, reason: &str) -> SlotMiss {
    SlotMiss {
        region: region.into(),
        slot_start,
        reason: reason.into(),
    }
}

#[test]
fn each_missed_slot_is_counted_once_per_region_however_often_it_is_seen() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("a store");
    assert!(store.slot_misses_by_region().expect("reading").is_empty());
    let first = [miss("US", 3600, "no_host_ran"), miss("GB", 3600, "budget")];
    assert_eq!(
        store
            .note_slot_misses(&first, Secs::new(10))
            .expect("noting"),
        2
    );
    // The next run reads the same slots again, and one more.
    let again = [
        miss("US", 3600, "no_host_ran"),
        miss("GB", 3600, "budget"),
        miss("US", 7200, "upstream"),
    ];
    assert_eq!(
        store
            .note_slot_misses(&again, Secs::new(20))
            .expect("noting"),
        1
    );
    assert_eq!(
        store.slot_misses_by_region().expect("reading"),
        BTreeMap::from([("GB".into(), 1), ("US".into(), 2)])
    );
    // The first note is kept.
    let seen: i64 = crate::store::test_support::raw(&path)
        .query_row(
            "SELECT seen_at FROM slot_misses WHERE region = 'US' AND slot_start = 3600",
            [],
            |r| r.get(0),
        )
        .expect("a row");
    assert_eq!(seen, 10);
}

#[test]
fn a_file_from_before_the_table_reads_no_misses() {
    let (_dir, path) = temp_db();
    drop(Store::open_with(&path, steps_before(&STEP)).expect("an older store"));
    let store = open_read_only(&path).expect("opening").expect("a file");
    assert!(store.slot_misses_by_region().expect("reading").is_empty());
}
