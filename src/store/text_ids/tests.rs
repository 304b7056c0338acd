use crate::clock::Secs;
use crate::store::RunKind;
use crate::store::test_support::{open, raw, temp_db, video};

/// Every view column that names a chart holds text (or NULL for the overall chart), as
/// `categories.id` does: the join needs no cast.
#[test]
fn every_view_gives_a_chart_id_as_text_and_joins_the_categories_without_a_cast() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("a store");
    store
        .begin_run("r1", RunKind::Run, Secs::new(100))
        .expect("a run");
    store
        .store_trending_page("r1", "US", 1, &[video("a", "A")], Secs::new(100))
        .expect("a page");
    store
        .store_chart_page("r1", "US", Some(17), 1, &[video("b", "B")], Secs::new(101))
        .expect("a category page");
    store
        .store_categories(
            "US",
            &[("17".to_string(), "Sports".to_string())],
            Secs::new(100),
        )
        .expect("names");
    drop(store);
    let conn = raw(&path);
    for view in [
        "chart_places",
        "chart_places_utc",
        "video_history",
        "video_history_utc",
        "video_history_marked",
        "chart_history",
        "chart_history_utc",
    ] {
        let types: Vec<String> = conn
            .prepare(&format!(
                "SELECT DISTINCT typeof(chart) FROM {view} ORDER BY 1"
            ))
            .expect("a view")
            .query_map([], |r| r.get(0))
            .expect("types")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        assert_eq!(types, ["null", "text"], "{view}");
    }
    let joined: Vec<(String, String)> = conn
        .prepare(
            "SELECT p.video_id, c.title FROM chart_places AS p
             JOIN categories AS c ON c.region = p.region AND c.id = p.chart",
        )
        .expect("the join")
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("rows")
        .collect::<rusqlite::Result<_>>()
        .expect("rows");
    assert_eq!(joined, [("b".to_owned(), "Sports".to_owned())]);
}
