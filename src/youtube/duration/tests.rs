//! Unit tests of `youtube/duration.rs`.

use super::parse_duration_secs;

#[test]
fn durations_as_youtube_writes_them() {
    let cases: &[(&str, Option<i64>)] = &[
        ("PT1H16M37S", Some(4597)),
        ("PT4M13S", Some(253)),
        ("PT59S", Some(59)),
        ("PT10M", Some(600)),
        ("PT2H", Some(7200)),
        ("PT1H5S", Some(3605)),
        ("PT0S", Some(0)),
        ("P0D", Some(0)),
        ("P1D", Some(86_400)),
        ("P1DT2H", Some(93_600)),
        ("P1DT2H3M4S", Some(93_784)),
        ("P1W", Some(604_800)),
        ("P1W2DT1S", Some(777_601)),
        ("PT0100M", Some(6000)),
        // Not durations, or not ones YouTube sends.
        ("", None),
        ("P", None),
        ("PT", None),
        ("P1DT", None),
        ("T1H", None),
        ("1H", None),
        ("pt1h", None),
        ("PT1H1H", None),
        ("PT1S1M", None),
        ("PT1M1H", None),
        ("P1D1W", None),
        ("PTH", None),
        ("PT5", None),
        ("PT1.5S", None),
        ("PT-1S", None),
        ("PT+1S", None),
        ("P1Y", None),
        ("P1M", None),
        ("P1H", None),
        ("PT1D", None),
        ("PT1W", None),
        (" PT1S", None),
        ("PT1S ", None),
        ("PT٣S", None),
        ("PT9223372036854775807S", Some(i64::MAX)),
        ("PT9223372036854775807M", None),
        ("PT99999999999999999999S", None),
        ("P9223372036854775807DT1S", None),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_duration_secs(text), *expected, "parsing {text:?}");
    }
}
