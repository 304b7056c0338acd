//! Unit tests of `store/follow.rs`.

use super::*;
use crate::store::test_support::{open, temp_db};
use crate::store::{RunKind, VideoRecord};

fn counts(id: &str, views: Option<i64>) -> FollowCounts {
    FollowCounts {
        video_id: id.into(),
        view_count: views,
        like_count: None,
        comment_count: Some(1),
    }
}

#[test]
fn the_stalest_charted_videos_are_due_and_a_follow_up_refreshes_or_marks_them() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
    let v = VideoRecord::bare;
    store
        .store_chart_page("r1", "US", None, 1, &[v("old")], Secs::new(100))
        .unwrap();
    store
        .store_chart_page("r1", "US", Some(17), 1, &[v("new")], Secs::new(200))
        .unwrap();
    store
        .store_search_page("r1", "US", "fresh", 1, &[v("searched")], Secs::new(150))
        .unwrap();
    // Charted at or after 50, counted at or before 300: both, stalest first; the
    // video only a search found is no chart's.
    assert_eq!(store.due_for_follow_up(50, 300).unwrap(), ["old", "new"]);
    assert_eq!(store.due_for_follow_up(150, 300).unwrap(), ["new"]);
    assert_eq!(store.due_for_follow_up(50, 150).unwrap(), ["old"]);
    // A search of a charted video counts it too.
    store
        .store_search_page("r1", "US", "fresh", 2, &[v("old")], Secs::new(250))
        .unwrap();
    assert_eq!(store.due_for_follow_up(50, 300).unwrap(), ["new", "old"]);

    let asked = vec!["new".to_owned(), "old".to_owned()];
    let stored = store
        .store_follow_ups(
            &asked,
            &[counts("new", Some(9)), counts("elsewhere", Some(1))],
            Secs::new(400),
        )
        .unwrap();
    assert_eq!(
        stored,
        FollowStored {
            counted: 1,
            removed: 1
        }
    );
    assert!(store.due_for_follow_up(50, 399).unwrap().is_empty());
    let latest = store.video("new").unwrap().expect("stored");
    assert_eq!(latest.view_count, Some(9));
    let removed: Option<i64> = store
        .conn
        .query_row("SELECT removed_at FROM videos WHERE id = 'old'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(removed, Some(400));
    // Back on a chart, it is shown again.
    store
        .store_chart_page("r1", "GB", None, 1, &[v("old")], Secs::new(500))
        .unwrap();
    let removed: Option<i64> = store
        .conn
        .query_row("SELECT removed_at FROM videos WHERE id = 'old'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(removed, None);
}

/// Retention reaches the follow-ups' series: `prune` deletes the counts taken before
/// its cutoff and keeps the newer ones, with the videos they belong to; a video that
/// then has nothing left goes as before. The dry run counts the same.
#[test]
fn prune_deletes_the_follow_up_counts_before_the_cutoff_and_keeps_the_newer() {
    let (_dir, path) = temp_db();
    let store = open(&path).unwrap();
    store.begin_run("r1", RunKind::Run, Secs::new(100)).unwrap();
    let v = VideoRecord::bare;
    store
        .store_chart_page(
            "r1",
            "US",
            None,
            1,
            &[v("kept"), v("gone"), v("charted")],
            Secs::new(100),
        )
        .unwrap();
    store
        .store_chart_page("r1", "GB", None, 1, &[v("charted")], Secs::new(1_000))
        .unwrap();
    let both = vec!["kept".to_owned(), "gone".to_owned()];
    let counted = [counts("kept", Some(1)), counts("gone", Some(2))];
    store
        .store_follow_ups(&both, &counted, Secs::new(200))
        .unwrap();
    store
        .store_follow_ups(&both[..1], &[counts("kept", Some(3))], Secs::new(500))
        .unwrap();
    let series = |store: &Store| {
        crate::store::test_support::dump(
            &store.conn,
            "SELECT v.id, c.at FROM follow_counts AS c JOIN videos AS v ON v.num = c.video
             ORDER BY v.id, c.at",
        )
    };
    let all = series(&store);
    assert_eq!(all.len(), 3, "{all:?}");

    let cutoff = 300;
    let dry = store.prune(cutoff, true, false).unwrap();
    assert_eq!(series(&store), all, "a dry run deletes nothing");
    let done = store.prune(cutoff, false, false).unwrap();
    assert_eq!(
        done.deleted,
        [
            ("fetches", 1),
            ("places", 3),
            ("extra_counts", 0),
            ("follow_counts", 2)
        ]
    );
    assert_eq!(dry.deleted, done.deleted);
    // "gone" had nothing left; "kept" has its newer follow-up, "charted" its chart.
    assert_eq!(done.videos_deleted, 1);
    assert_eq!(dry.videos_deleted, done.videos_deleted);
    assert_eq!(
        series(&store),
        crate::store::test_support::dump(&store.conn, "SELECT 'kept', 500",)
    );
    assert!(store.video("gone").unwrap().is_none());
    assert_eq!(
        store.video("kept").unwrap().expect("kept").view_count,
        Some(3)
    );
    assert!(store.video("charted").unwrap().is_some());
    assert!(store.integrity_check().unwrap());
}
