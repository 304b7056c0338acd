//! Reading the scripts' replies.

use super::*;

#[test]
fn entries_decode_from_members() {
    let raw = vec![
        "100|search.list|r1-3".to_owned(),
        "1700000000000001".to_owned(),
    ];
    assert_eq!(
        decode_entries(&raw),
        vec![Entry {
            at_us: 1_700_000_000_000_001,
            units: 100,
            method: "search.list".into()
        }]
    );
}
