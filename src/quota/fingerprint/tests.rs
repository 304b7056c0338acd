use super::*;
use crate::config::{SourceText, parse_costs};

fn budget(text: &str) -> Budget {
    parse_costs(&SourceText {
        name: "quota-costs.toml".into(),
        text,
    })
    .expect("a valid costs file")
}

#[test]
fn fnv1a_matches_its_published_vectors() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
}

#[test]
fn the_shipped_files_have_different_fingerprints_and_comments_change_nothing() {
    let default = include_str!("../../../quota-costs.toml");
    let granular = include_str!("../../../quota-costs.granular.toml");
    let a = budget(default).fingerprint();
    assert_eq!(a.len(), 16);
    assert_ne!(a, budget(granular).fingerprint());
    let commented = format!("# a comment\n{default}\n# another\n");
    assert_eq!(a, budget(&commented).fingerprint());
}

#[test]
fn a_cost_or_a_window_changes_the_fingerprint() {
    let default = include_str!("../../../quota-costs.toml");
    let a = budget(default).fingerprint();
    let mut cheaper = budget(default);
    cheaper.buckets[0].costs.insert("search.list".into(), 99);
    assert_ne!(a, cheaper.fingerprint());
    let mut longer = budget(default);
    longer.buckets[0].window = Window::Sliding(std::time::Duration::from_secs(25 * 3600));
    assert_ne!(a, longer.fingerprint());
    let mut down = budget(default);
    down.when_limiter_down.clear();
    assert_eq!(a, down.fingerprint(), "when_limiter_down shapes no window");
    let mut raised = budget(default);
    raised.buckets[0].ceiling -= 500;
    raised.buckets[0].quota += 1;
    for l in &mut raised.limits {
        l.max += 1;
    }
    assert_eq!(
        a,
        raised.fingerprint(),
        "how far a caller may fill a window is not what it holds"
    );
}
