//! Unit tests of `runner/steps.rs`.

use super::*;

#[test]
fn search_details_keep_the_search_rank() {
    let v = VideoRecord::bare;
    let ids: Vec<String> = ["b", "a", "c"].iter().map(|s| (*s).to_owned()).collect();
    let got: Vec<String> = in_rank_order(&ids, vec![v("a"), v("c"), v("b")])
        .into_iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(got, ids);
}
