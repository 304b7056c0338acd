//! Unit tests of `store/fetch_slots.rs`.

use super::*;
use crate::clock::Secs;
use crate::store::test_support::{open, temp_db, video};
use crate::store::{ExportSpan, RunKind};

const SPAN: ExportSpan = ExportSpan {
    since: 0,
    until: i64::MAX,
};

fn exported(store: &Store) -> Vec<(String, String)> {
    let mut rows = Vec::new();
    store
        .export::<StoreError>(&["US".to_owned(), "GB".to_owned()], SPAN, |r| {
            rows.push((r.region.clone(), r.video_id.clone()));
            Ok(())
        })
        .expect("export");
    rows
}

fn lease(token: i64) -> Option<LeasedSlot> {
    Some(LeasedSlot {
        slot_start: 3600,
        slot_secs: 3600,
        token,
    })
}

#[test]
fn only_a_leased_fetch_its_run_finished_current_is_exported() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("store");
    store
        .begin_run("r1", RunKind::Run, Secs::new(3600))
        .expect("run");
    let page = |region: &str, id: &str, lease| {
        store
            .store_chart_page_leased(
                "r1",
                region,
                None,
                1,
                &[video(id, id)],
                Secs::new(3601),
                lease,
            )
            .expect("a page")
    };
    // US under a lease, GB without one (the embedded limiter): GB is current as ever.
    page("US", "us1", lease(7));
    page("GB", "gb1", None);
    assert_eq!(exported(&store), [("GB".to_owned(), "gb1".to_owned())]);
    // A second page joins the fetch, still not current.
    store
        .store_chart_page_leased(
            "r1",
            "US",
            None,
            2,
            &[video("us2", "x")],
            Secs::new(3602),
            lease(7),
        )
        .expect("page 2");
    assert_eq!(exported(&store).len(), 1);
    store
        .mark_slot("r1", "US", SlotState::Current)
        .expect("current");
    assert_eq!(exported(&store).len(), 3);
    assert_eq!(by_video(&store), ["gb1", "us1", "us2"]);
    assert_eq!(counted(&store), ["gb1", "us1", "us2"]);
    store
        .mark_slot("r1", "US", SlotState::Fenced)
        .expect("fenced");
    assert_eq!(exported(&store), [("GB".to_owned(), "gb1".to_owned())]);
    // `--per video` and `--counts` too.
    assert_eq!(by_video(&store), ["gb1"]);
    assert_eq!(counted(&store), ["gb1"]);
}

/// The videos of `export --per video`, sorted.
fn by_video(store: &Store) -> Vec<String> {
    let mut ids = Vec::new();
    store
        .export_chart_history::<StoreError>(&["US".to_owned(), "GB".to_owned()], None, SPAN, |r| {
            ids.push(r.video_id.clone());
            Ok(())
        })
        .expect("export by video");
    ids.sort();
    ids
}

/// The videos of `export --counts`, sorted.
fn counted(store: &Store) -> Vec<String> {
    let mut ids = Vec::new();
    store
        .export_counts::<StoreError>(&["US".to_owned(), "GB".to_owned()], SPAN, |r| {
            ids.push(r.video_id.clone());
            Ok(())
        })
        .expect("export counts");
    ids.sort();
    ids
}

#[test]
fn the_largest_token_outlives_the_fetches_that_carried_it() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("store");
    assert_eq!(store.largest_slot_token().expect("none yet"), 0);
    store
        .begin_run("r1", RunKind::Run, Secs::new(3600))
        .expect("run");
    for (region, token) in [("US", 9), ("GB", 4)] {
        store
            .store_chart_page_leased(
                "r1",
                region,
                None,
                1,
                &[video("v", "v")],
                Secs::new(3601),
                lease(token),
            )
            .expect("a page");
    }
    assert_eq!(store.largest_slot_token().expect("read"), 9);
    // Prune deletes the fetches, and their slot rows with them; not the floor.
    store.prune(1_000_000, false, false).expect("prune");
    assert_eq!(
        store.fetch_slots_of("r1").expect("rows"),
        Vec::<LeasedRow>::new()
    );
    assert_eq!(store.largest_slot_token().expect("read"), 9);
}

#[test]
fn a_slot_done_elsewhere_moves_the_last_complete_fetch_only_forward() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("store");
    store.mark_done_elsewhere("US", 500).expect("first");
    store
        .mark_region_complete("US", Secs::new(900))
        .expect("own");
    store.mark_done_elsewhere("US", 700).expect("older");
    let us = |store: &Store| {
        store
            .region_states()
            .expect("states")
            .into_iter()
            .find(|s| s.region == "US")
            .and_then(|s| s.last_complete_at)
    };
    assert_eq!(us(&store), Some(900));
    store.mark_done_elsewhere("US", 1_000).expect("newer");
    assert_eq!(us(&store), Some(1_000));
}

/// The analysts' views show what export shows: a fetch not current is in none of them.
#[test]
fn the_analysts_views_show_current_fetches_only() {
    let (_dir, path) = temp_db();
    let store = open(&path).expect("store");
    store
        .begin_run("r1", RunKind::Run, Secs::new(3600))
        .expect("run");
    for (region, id, lease) in [("US", "us1", lease(7)), ("GB", "gb1", None)] {
        store
            .store_chart_page_leased(
                "r1",
                region,
                None,
                1,
                &[video(id, id)],
                Secs::new(3601),
                lease,
            )
            .expect("a page");
    }
    store
        .store_search_page_leased(
            "r1",
            "US",
            "fresh",
            1,
            &[video("us3", "x")],
            Secs::new(3602),
            lease(7),
        )
        .expect("a search");
    let conn = crate::store::test_support::raw(&path);
    let videos = |sql: &str| -> Vec<String> {
        let mut stmt = conn.prepare(sql).expect(sql);
        let mut ids: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .expect(sql)
            .map(|r| r.expect(sql))
            .collect();
        ids.sort();
        ids.dedup();
        ids
    };
    let views = [
        "SELECT video_id FROM trending",
        "SELECT video_id FROM trending_utc",
        "SELECT video_id FROM chart_places",
        "SELECT video_id FROM chart_places_utc",
        "SELECT video_id FROM search_results",
        "SELECT video_id FROM video_stats",
        "SELECT video_id FROM video_history",
        "SELECT video_id FROM video_history_marked",
        "SELECT video_id FROM chart_history",
        "SELECT video_id FROM chart_history_utc",
    ];
    for sql in views {
        let seen = videos(sql);
        assert!(!seen.iter().any(|v| v.starts_with("us")), "{sql}: {seen:?}");
    }
    store
        .mark_slot("r1", "US", SlotState::Current)
        .expect("current");
    assert_eq!(videos("SELECT video_id FROM chart_places"), ["gb1", "us1"]);
    assert_eq!(videos("SELECT video_id FROM search_results"), ["us3"]);
    assert_eq!(videos("SELECT video_id FROM chart_history"), ["gb1", "us1"]);
    assert_eq!(
        videos("SELECT video_id FROM video_history"),
        ["gb1", "us1", "us3"]
    );
}
