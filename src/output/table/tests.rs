//! Unit tests of `output/table.rs`.

use super::*;

fn lines(table: &Table, width: Option<usize>) -> Vec<String> {
    let mut out = Vec::new();
    table.write(&mut out, width).expect("writing to memory");
    String::from_utf8(out)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn sample() -> Table {
    let mut t = Table::new(vec![
        Column::text("region", 0),
        Column::number("units", 1),
        Column::text("run", 2),
        Column::flex("reason"),
    ]);
    t.row(vec![
        "US".into(),
        "12".into(),
        "18c0-abcdef01".into(),
        "the upstream said the chart of category 17 does not exist in this region".into(),
    ]);
    t.row(vec![
        "JP".into(),
        "3".into(),
        "18c0-abcdef02".into(),
        "東京の動画🎉がトレンドに入った理由".into(),
    ]);
    t
}

#[test]
fn without_a_width_nothing_is_cut() {
    let all = lines(&sample(), None);
    assert_eq!(all[0], "region units run           reason");
    assert!(all[1].ends_with("does not exist in this region"), "{all:?}");
    assert!(!all.iter().any(|l| l.contains('…')));
}

#[test]
fn the_long_column_is_cut_to_the_width_in_display_columns() {
    for width in [80, 60, 40, 30, 12, 3] {
        let all = lines(&sample(), Some(width));
        for l in &all {
            assert!(l.width() <= width, "{width}: {l:?} is {} wide", l.width());
        }
        assert!(all[1].contains('…'), "{width}: {all:?}");
    }
    let at_60 = lines(&sample(), Some(60));
    assert!(at_60[0].contains("run"), "room for every column: {at_60:?}");
    let at_30 = lines(&sample(), Some(30));
    assert!(
        !at_30[0].contains("run"),
        "the run id goes first: {at_30:?}"
    );
    assert!(at_30[0].contains("units"), "{at_30:?}");
    assert!(at_30[2].starts_with("JP"), "{at_30:?}");
}

#[test]
fn cutting_counts_wide_characters_as_two_columns() {
    assert_eq!(cut("東京の動画", 6), "東京…");
    assert_eq!(cut("東京の動画", 10), "東京の動画");
    assert_eq!(cut("abcdef", 4), "abc…");
    assert_eq!(cut("abc", 0), "");
}

#[test]
fn prose_wraps_between_words() {
    let mut out = Vec::new();
    write_wrapped(
        &mut out,
        "3 of 8 regions not fetched completely within 2h",
        Some(20),
    )
    .expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(
        text,
        "3 of 8 regions not\n  fetched completely\n  within 2h\n"
    );
    let mut out = Vec::new();
    write_wrapped(&mut out, "  ---- stop here: budget", Some(16)).expect("in memory");
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(text, "  ---- stop\n    here: budget\n");
}

#[test]
fn a_reason_cut_in_its_middle_keeps_its_cause() {
    let reason = "videos.list for region FR, page token \"CAUQAA\": the upstream answered 403 forbidden (accessNotConfigured)";
    for max in [1, 2, 3, 10, 24, 40, 79] {
        let shown = cut_middle(reason, max);
        assert!(shown.width() <= max, "{max}: {shown}");
        if max >= 24 {
            assert!(shown.starts_with("videos"), "{max}: {shown}");
            assert!(shown.ends_with("Configured)"), "{max}: {shown}");
            assert_eq!(shown.matches('…').count(), 1, "{max}: {shown}");
        }
    }
    assert_eq!(cut_middle("short", 5), "short");
    assert_eq!(cut_middle("quota exceeded", 9), "qu…ceeded");
    // Wide characters count as two columns on either side.
    let wide = cut_middle("日本語のタイトル: 理由", 9);
    assert!(wide.width() <= 9, "{wide}");
}
