//! Unit tests of `config/regions.rs`.

use super::*;

fn parse(text: &str) -> Result<Regions, ConfigError> {
    parse_regions(&SourceText {
        name: "regions.toml".into(),
        text,
    })
}

#[test]
fn categories_come_from_the_defaults_unless_a_region_says_otherwise() {
    let regions = parse(
        r#"
[defaults]
categories = ["17", "25"]

[[region]]
code = "US"
offset = 0

[[region]]
code = "GB"
offset = 7
categories = ["10"]

[[region]]
code = "DE"
offset = 14
categories = []
"#,
    )
    .expect("a valid file");
    let of = |code: &str| regions.get(code).map(|r| r.categories.clone());
    assert_eq!(of("US"), Some(vec![17, 25]));
    assert_eq!(of("GB"), Some(vec![10]));
    assert_eq!(of("DE"), Some(vec![]));
    assert_eq!(regions.follow, None);
}

#[test]
fn follow_ups_take_days_and_a_duration() {
    let region = "[[region]]\ncode = \"US\"\noffset = 0\n";
    let regions =
        parse(&format!("{region}[follow]\ndays = 7\nevery = \"6h\"\n")).expect("a valid file");
    assert_eq!(
        regions.follow,
        Some(Follow {
            days: 7,
            every: Duration::from_secs(6 * 3600)
        })
    );
    let e = parse(&format!("{region}[follow]\ndays = 0\nevery = \"6h\"\n")).expect_err("no days");
    assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
    let e = parse(&format!("{region}[follow]\ndays = 7\nevery = \"often\"\n"))
        .expect_err("not a duration");
    assert_eq!(e.position.map(|p| p.0), Some(6), "{e}");
}

#[test]
fn a_category_that_is_not_a_number_is_placed_in_the_file() {
    for (bad, line) in [
        ("\"sports\"", 5),
        ("\"0\"", 5),
        ("\"-3\"", 5),
        ("\"1e3\"", 5),
    ] {
        let text = format!("[[region]]\ncode = \"US\"\noffset = 0\ncategories = [\n  {bad},\n]\n");
        let e = parse(&text).expect_err(bad);
        assert_eq!(e.position.map(|p| p.0), Some(line), "{bad}: {e}");
        assert!(e.message.contains("such as \"17\""), "{e}");
    }
    let e =
        parse("[defaults]\ncategories = [\"17\", \"17\"]\n[[region]]\ncode = \"US\"\noffset = 0\n")
            .expect_err("twice");
    assert!(e.message.contains("listed twice"), "{e}");
    let e = parse("[[region]]\ncode = \"US\"\noffset = 0\ncategories = [17]\n")
        .expect_err("a bare number");
    assert_eq!(e.position.map(|p| p.0), Some(4), "{e}");
}

#[test]
fn slots_come_from_the_defaults_unless_a_region_says_otherwise() {
    let regions = parse(
        "[defaults]\nslot = \"15m\"\nlease = \"90s\"\n\n[[region]]\ncode = \"US\"\noffset = 0\n\n[[region]]\ncode = \"GB\"\noffset = 7\nslot = \"2h\"\n",
    )
    .expect("a valid file");
    let of = |code: &str| regions.get(code).map(|r| r.slot_secs);
    assert_eq!(of("US"), Some(900));
    assert_eq!(of("GB"), Some(7200));
    assert_eq!(regions.lease, Duration::from_secs(90));
}

#[test]
fn an_unset_slot_is_an_hour_and_an_unset_lease_two_minutes() {
    let regions = parse("[[region]]\ncode = \"US\"\noffset = 0\n").expect("a valid file");
    assert_eq!(regions.get("US").map(|r| r.slot_secs), Some(3600));
    assert_eq!(regions.lease, Duration::from_secs(120));
    // A slot shorter than the default lease cuts the default to it.
    let regions = parse("[defaults]\nslot = \"4s\"\n[[region]]\ncode = \"US\"\noffset = 0\n")
        .expect("a valid file");
    assert_eq!(regions.lease, Duration::from_secs(4));
}

#[test]
fn a_bad_slot_or_lease_is_named_at_its_line() {
    let region = "[[region]]\ncode = \"US\"\noffset = 0\n";
    for bad in [
        "\"0s\"", "\"25h\"", "\"1d\"", "\"1.5h\"", "\"h\"", "\"90\"", "\"-1m\"",
    ] {
        let e = parse(&format!("{region}slot = {bad}\n")).expect_err(bad);
        assert_eq!(e.position.map(|p| p.0), Some(4), "{bad}: {e}");
        assert!(e.to_string().contains("region US slot"), "{e}");
    }
    let e = parse(&format!("[defaults]\nslot = \"1x\"\n{region}")).expect_err("a bad unit");
    assert_eq!(e.position.map(|p| p.0), Some(2), "{e}");
    let e = parse(&format!(
        "[defaults]\nslot = \"10s\"\nlease = \"11s\"\n{region}"
    ))
    .expect_err("a lease past the slot");
    assert_eq!(e.position.map(|p| p.0), Some(3), "{e}");
    assert!(e.to_string().contains("region US's slot of 10 s"), "{e}");
    let e = parse(&format!("[defaults]\nlease = \"soon\"\n{region}")).expect_err("no duration");
    assert_eq!(e.position.map(|p| p.0), Some(2), "{e}");
}
