use super::*;
use crate::clock::Secs;
use crate::store::RunKind;
use crate::store::test_support::{dump, open, query_plan, temp_db, video};

const DAY: i64 = 86_400;

/// Five daily fetches of the US overall chart: `v` is placed on days 1, 2 and 4 (ranks
/// 2, 1, 1), `w` on every day; on day 3 the chart of category 17 holds `v` too, and a
/// search finds it on day 5.
fn five_days() -> (tempfile::TempDir, Store) {
    let (dir, path) = temp_db();
    let store = open(&path).expect("a store");
    for day in 1..=5i64 {
        let at = day * DAY + 3_600;
        let run = format!("r{day}");
        store
            .begin_run(&run, RunKind::Run, Secs::new(at))
            .expect("a run");
        let mut page = vec![video("w", "Always")];
        match day {
            1 => page.push(video("v", "Sometimes")),
            2 | 4 => page.insert(0, video("v", "Sometimes")),
            _ => {}
        }
        store
            .store_trending_page(&run, "US", 1, &page, Secs::new(at))
            .expect("a chart page");
        if day == 3 {
            store
                .store_chart_page(
                    &run,
                    "US",
                    Some(17),
                    1,
                    &[video("v", "Sometimes")],
                    Secs::new(at),
                )
                .expect("a category page");
        }
        if day == 5 {
            store
                .store_search_page(
                    &run,
                    "US",
                    "fresh",
                    1,
                    &[video("v", "Sometimes")],
                    Secs::new(at),
                )
                .expect("a search page");
        }
    }
    (dir, store)
}

fn history(store: &Store, charts: Option<&[u32]>, span: ExportSpan) -> Vec<ChartHistoryRow> {
    history_by(store, charts, span, None)
}

fn history_by(
    store: &Store,
    charts: Option<&[u32]>,
    span: ExportSpan,
    walk: Option<Walk>,
) -> Vec<ChartHistoryRow> {
    let mut rows = Vec::new();
    store
        .export_chart_history_by(&["US".to_owned()], charts, span, walk, |r| {
            rows.push(r.clone());
            Ok::<_, StoreError>(())
        })
        .expect("the history");
    rows
}

const ALL: ExportSpan = ExportSpan {
    since: i64::MIN,
    until: i64::MAX,
};

#[test]
fn days_on_chart_entries_and_the_best_rank_come_from_the_videos_own_places() {
    let (_dir, store) = five_days();
    let rows = history(&store, None, ALL);
    let key: Vec<(&str, Option<u32>)> = rows
        .iter()
        .map(|r| (r.video_id.as_str(), r.chart))
        .collect();
    assert_eq!(key, [("w", None), ("v", None), ("v", Some(17))]);
    let v = &rows[1];
    assert_eq!(v.days_on_chart, 3);
    assert_eq!(v.fetches, 3);
    assert_eq!(v.entries, 2, "on days 1-2, off on day 3, on again on day 4");
    assert_eq!(v.best_rank, 1);
    assert_eq!(
        v.best_rank_at,
        2 * DAY + 3_600,
        "the first time at its best"
    );
    assert_eq!((v.first_seen, v.last_seen), (DAY + 3_600, 4 * DAY + 3_600));
    let w = &rows[0];
    assert_eq!((w.days_on_chart, w.entries, w.fetches), (5, 1, 5));
    assert_eq!(w.best_rank, 1);
    assert_eq!(w.best_rank_at, DAY + 3_600);
    // The category chart counts its own fetches: one, placing v.
    assert_eq!((rows[2].days_on_chart, rows[2].entries), (1, 1));
}

#[test]
fn a_span_or_a_chart_narrows_what_is_counted() {
    let (_dir, store) = five_days();
    let span = ExportSpan {
        since: 2 * DAY,
        until: 3 * DAY + 7_200,
    };
    let rows = history(&store, Some(&[0]), span);
    let v = rows.iter().find(|r| r.video_id == "v").expect("v");
    assert_eq!((v.days_on_chart, v.entries, v.best_rank), (1, 1, 1));
    assert!(rows.iter().all(|r| r.chart.is_none()));
}

#[test]
fn a_span_finds_the_same_rows_through_its_own_fetches_as_through_every_video() {
    let (_dir, store) = five_days();
    // Every span between two of the days' boundaries (the fetches are at 01:00), each
    // chart choice: both walks give the same rows, in the same order.
    let bounds: Vec<i64> = (0..=6).map(|d| d * DAY).collect();
    let mut compared = 0;
    for (i, &since) in bounds.iter().enumerate() {
        for &until in &bounds[i..] {
            for charts in [None, Some(&[0][..]), Some(&[17][..])] {
                let span = ExportSpan { since, until };
                let by_region = history_by(&store, charts, span, Some(Walk::Region));
                let by_span = history_by(&store, charts, span, Some(Walk::Span));
                assert_eq!(by_span, by_region, "{span:?} {charts:?}");
                compared += usize::from(!by_region.is_empty());
            }
        }
    }
    assert!(compared > 20, "only {compared} spans held rows");
    // A day of the five is the span's own walk: it holds less than half the fetches.
    let day_two = ExportSpan {
        since: 2 * DAY,
        until: 3 * DAY - 1,
    };
    let rows = history(&store, None, day_two);
    let v = rows.iter().find(|r| r.video_id == "v").expect("v on day 2");
    assert_eq!((v.fetches, v.best_rank, v.entries), (1, 1, 1));
    assert_eq!(rows, history_by(&store, None, day_two, Some(Walk::Region)));
}

#[test]
fn the_view_agrees_with_the_export() {
    let (_dir, store) = five_days();
    let exported: Vec<String> = {
        let mut rows: Vec<String> = history(&store, None, ALL)
            .iter()
            .map(|r| {
                format!(
                    "{}|{}|{:?}|{}|{}|{}|{}|{}|{}|{}",
                    r.video_id,
                    r.region,
                    r.chart,
                    r.first_seen,
                    r.last_seen,
                    r.days_on_chart,
                    r.fetches,
                    r.best_rank,
                    r.best_rank_at,
                    r.entries
                )
            })
            .collect();
        rows.sort();
        rows
    };
    let viewed: Vec<String> = dump(
        &store.conn,
        "SELECT video_id || '|' || region || '|' ||
                CASE WHEN chart IS NULL THEN 'None' ELSE 'Some(' || chart || ')' END || '|' ||
                first_seen || '|' || last_seen || '|' || days_on_chart || '|' || fetches
                || '|' || best_rank || '|' || best_rank_at || '|' || entries
         FROM chart_history",
    )
    .iter()
    .map(|r| {
        r.trim_start_matches("Text(\"")
            .trim_end_matches("\")")
            .to_owned()
    })
    .collect();
    assert_eq!(viewed, exported);
}

#[test]
fn the_export_reads_a_videos_places_from_indexes() {
    let (_dir, store) = five_days();
    store.conn.execute_batch("ANALYZE").expect("analyze");
    for sql in [
        REGION_VIDEO_PLACES,
        CHART_FETCHES,
        SPAN_VIDEO_PLACES,
        REGION_CHART_FETCHES,
    ] {
        let plan = query_plan(&store.conn, sql);
        for step in &plan {
            // The span's videos, gathered once, are read in order; no table is.
            assert!(
                !step.starts_with("SCAN ") || step == "SCAN s",
                "{step}\n{}",
                plan.join("\n")
            );
        }
    }
}
