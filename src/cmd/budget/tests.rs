//! Unit tests of `cmd/budget.rs`.

use super::*;

const H: i64 = 3_600_000_000;

fn entry(at_us: i64, units: u64) -> Entry {
    Entry {
        at_us,
        units,
        method: "videos.list".into(),
    }
}

#[test]
fn the_chart_has_one_bar_per_clock_hour_labelled_and_scaled() {
    // 2023-11-14T22:13:20Z; the window starts 24 h before.
    let now = 1_700_000_000_000_000;
    let entries = [entry(now - 23 * H - H / 2, 25), entry(now - H / 2, 100)];
    let mut out = Vec::new();
    chart(&mut out, &entries, now - 24 * H, now, 40).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    let bars: Vec<&str> = text.lines().skip(2).collect();
    assert!(text.contains("units per hour (UTC); # = 3 units"), "{text}");
    // 22:00 yesterday to 22:00 today: 25 clock hours, each day's first dated.
    assert_eq!(bars.len(), 25, "{text}");
    assert_eq!(
        bars[0],
        format!("  11-13 22:00 {} 25", "#".repeat(9)),
        "{text}"
    );
    assert_eq!(bars[1], "        23:00  0", "{text}");
    assert_eq!(bars[2], "  11-14 00:00  0", "{text}");
    assert_eq!(bars[23], format!("        21:00 {} 100", "#".repeat(34)));
    assert_eq!(bars[24], "        22:00  0", "{text}");
    // Narrow terminals get narrow bars; the count stays.
    let mut out = Vec::new();
    chart(&mut out, &entries, now - 24 * H, now, 10).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.lines().all(|l| l.len() <= 40), "{text}");
    assert!(text.contains("# = 10 units"), "{text}");
}

/// The labels of the bars: what each line says before its bar.
fn labels_of(text: &str) -> Vec<String> {
    text.lines()
        .skip(2)
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            // The label is the words before the bar or the count: a time, or a date
            // and a time.
            words
                .iter()
                .take_while(|w| w.contains(':') || w.contains('-'))
                .copied()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// A 24-hour window read at 23:30 spans 23:00 yesterday to 23:00 today: the two bars
/// must not both read "23:00". Likewise a calendar day of 25 hours (the day the
/// clocks go back in Los Angeles) whose chart spans 26 clock hours.
#[test]
fn no_two_bars_of_the_chart_are_labelled_alike() {
    // 2023-11-14T23:30:00Z.
    let now = 1_700_004_600_000_000;
    let mut out = Vec::new();
    chart(&mut out, &[entry(now - H, 3)], now - 24 * H, now, 40).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    let labels = labels_of(&text);
    assert_eq!(labels.len(), 25, "{text}");
    let mut seen = std::collections::BTreeSet::new();
    for label in &labels {
        assert!(seen.insert(label.clone()), "{label} twice:\n{text}");
    }
    assert_eq!(labels[0], "11-13 23:00", "{text}");
    assert_eq!(labels[24], "23:00", "{text}");

    // 2023-11-05 in America/Los_Angeles: from 07:00Z to 08:00Z the next day, 25 hours;
    // read at its last minute.
    let start = 1_699_167_600_000_000;
    let now = start + 25 * H - 60_000_000;
    let mut out = Vec::new();
    chart(&mut out, &[], start, now, 40).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    let labels = labels_of(&text);
    assert_eq!(labels.len(), 25, "{text}");
    let unique: std::collections::BTreeSet<&String> = labels.iter().collect();
    assert_eq!(unique.len(), labels.len(), "{text}");
}

fn bucket(blocked_until: Option<crate::clock::Micros>) -> BudgetBucketJson {
    let figures = crate::quota::BucketFigures {
        name: "budget".into(),
        used: 32,
        ceiling: 9500,
        quota: 10_000,
        blocked_until,
        upstream_spent_at: None,
    };
    BudgetBucketJson {
        bucket: crate::cmd::shared::BucketJson::of(&figures),
        quota: 10_000,
        remaining_to_quota: 9968,
        window: "24h".into(),
        window_s: 86_400.0,
        next_free_s: Some(3600.0),
        empty_in_s: Some(7200.0),
        by_method: std::collections::BTreeMap::new(),
        suggested: None,
    }
}

/// While the upstream's block lasts nothing can be spent, whatever the count says:
/// the block leads, and "available" says none, never "9468 now".
#[test]
fn a_blocked_bucket_leads_with_its_block() {
    let mut out = Vec::new();
    let until = crate::clock::Micros::new(1_700_035_200_000_000);
    print_bucket(&mut out, &bucket(Some(until)), true).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("  blocked     until 2023-11-15T08:00:00Z"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("  available   none until then;"),
        "{text}"
    );
    assert!(!text.contains(" now"), "{text}");
    assert_eq!(text.matches("blocked").count(), 1, "said once: {text}");

    let mut out = Vec::new();
    print_bucket(&mut out, &bucket(None), true).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(
        text.starts_with("  available   9468 now, to the ceiling (9968 to the quota)"),
        "{text}"
    );
    assert!(text.contains("  blocked     no\n"), "{text}");
}
