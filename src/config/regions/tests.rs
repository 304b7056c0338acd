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
