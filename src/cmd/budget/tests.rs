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
    // 22:00 yesterday to 22:00 today: 25 clock hours.
    assert_eq!(bars.len(), 25, "{text}");
    assert_eq!(bars[0], format!("  22:00 {} 25", "#".repeat(9)), "{text}");
    assert_eq!(bars[1], "  23:00  0", "{text}");
    assert_eq!(bars[23], format!("  21:00 {} 100", "#".repeat(34)));
    assert_eq!(bars[24], "  22:00  0", "{text}");
    // Narrow terminals get narrow bars; the count stays.
    let mut out = Vec::new();
    chart(&mut out, &entries, now - 24 * H, now, 10).expect("writing to memory");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.lines().all(|l| l.len() <= 40), "{text}");
    assert!(text.contains("# = 10 units"), "{text}");
}
