//! The monitoring that ships with the project (docs/metrics.md): the Prometheus
//! alert rules pass `promtool check rules` and their own unit tests, the rules and
//! the Grafana dashboard use only metric names the binary writes, and the dashboard's
//! queries parse, scope by instance, and suit their panels (dates, tables).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::harness::Harness;
use crate::common::promtool::promtool_binary;
use crate::common::upstream::{Billing, FakeUpstream};

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path)
}

fn promtool(args: &[&str]) -> (i32, String) {
    let out = Command::new(promtool_binary())
        .current_dir(contrib("prometheus"))
        .args(args)
        .output()
        .expect("running promtool");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn the_alert_rules_are_valid_and_pass_their_unit_tests() {
    let (code, out) = promtool(&["check", "rules", "trendsync.rules.yml"]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = promtool(&["test", "rules", "trendsync.rules.test.yml"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("SUCCESS"), "{out}");
}

/// Every `trendsync_…` name in `text`.
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("trendsync_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

/// The labels of one sample, by name.
type Labels = BTreeMap<String, String>;

/// The metric families the binary writes, each with the labels of its samples.
type Written = BTreeMap<String, Vec<Labels>>;

/// The samples of a metrics file, by family: `# TYPE` names every family, and each
/// sample line adds its labels.
fn samples_of(text: &str) -> Written {
    let mut written = Written::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            written.entry(name.to_owned()).or_default();
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let end = line.find(['{', ' ']).unwrap_or(line.len());
        let mut labels = Labels::new();
        if let Some(inside) = line[end..].strip_prefix('{') {
            let inside = &inside[..inside.rfind('}').unwrap_or(inside.len())];
            // trendsync's label values hold no quote or comma.
            for pair in inside.split(',') {
                if let Some((k, v)) = pair.split_once('=') {
                    labels.insert(k.to_owned(), v.trim_matches('"').to_owned());
                }
            }
        }
        written
            .entry(line[..end].to_owned())
            .or_default()
            .push(labels);
    }
    written
}

/// The metric families a complete run under the granular cost file writes, and a run
/// refused by its configuration.
fn written_families() -> Written {
    let mut h = Harness::with(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.costs(include_str!("../quota-costs.granular.toml"));
    let file = h.scratch.file("trendsync.prom");
    h.cmd()
        .arg("--metrics-file")
        .arg(&file)
        .args(["run", "--region", "US"])
        .run();
    let mut text = std::fs::read_to_string(&file).expect("the metrics file");
    // A family written only on a day the upstream refused a bucket early: a pool of
    // 2 units while the costs file says 10,000.
    let h = Harness::with(FakeUpstream::billing(Billing::single(2)), None);
    let file = h.scratch.file("early.prom");
    h.cmd()
        .arg("--metrics-file")
        .arg(&file)
        .args(["run", "--region", "US", "--concurrency", "1"])
        .status(75)
        .expect_stderr("quota is spent")
        .expect_stderr("quota is lower than configured")
        .expect_stderr("upstream_quota_exhausted")
        .run();
    text.push_str(&std::fs::read_to_string(&file).expect("the metrics file"));
    assert!(
        text.contains("# TYPE trendsync_bucket_upstream_spent_at_units gauge"),
        "{text}"
    );
    // A run refused by its configuration (an offset out of range), after those.
    let mut h = h;
    h.regions("[[region]]\ncode = \"US\"\noffset = 99\n");
    h.cmd()
        .arg("--metrics-file")
        .arg(&file)
        .arg("run")
        .expect_stderr("offset")
        .status(78)
        .run();
    let refused = std::fs::read_to_string(&file).expect("the metrics file");
    assert!(
        refused.contains("trendsync_last_run_status{kind=\"run\",status=\"config_error\"} 1"),
        "{refused}"
    );
    text.push_str(&refused);
    samples_of(&text)
}

#[test]
fn the_rules_and_the_dashboard_use_only_metrics_the_binary_writes() {
    let written: BTreeSet<String> = written_families().into_keys().collect();
    assert!(written.contains("trendsync_build_info"), "{written:?}");
    for file in ["prometheus/trendsync.rules.yml", "grafana/trendsync.json"] {
        let text = std::fs::read_to_string(contrib(file)).expect("a shipped file");
        let used = names_in(&text);
        assert!(!used.is_empty(), "{file} queries no trendsync metric");
        let unknown: Vec<&String> = used.difference(&written).collect();
        assert!(
            unknown.is_empty(),
            "{file} uses metrics the binary never writes: {unknown:?}; it writes {written:?}"
        );
    }
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(contrib("grafana/trendsync.json")).expect("read"),
    )
    .expect("the dashboard is JSON");
    assert!(dashboard["panels"].as_array().is_some_and(|p| p.len() >= 5));
}

/// The metric names a PromQL expression selects, whatever their prefix: its identifiers
/// outside strings, label matchers, ranges and grouping lists that are neither a
/// function (followed by `(`) nor a keyword.
fn metric_names(expr: &str) -> BTreeSet<String> {
    // The keywords a grouping list follows.
    const GROUPING: [&str; 6] = [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    // Other words that are not names: keywords, and the aggregations, which may put
    // their grouping before their `(`.
    const NOT_NAMES: [&str; 21] = [
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "Inf",
        "NaN",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    let chars: Vec<char> = expr.chars().collect();
    let mut names = BTreeSet::new();
    let mut i = 0;
    let mut skip_list = false;
    while i < chars.len() {
        let c = chars[i];
        let close = match c {
            '"' | '\'' | '`' => Some(c),
            '{' => Some('}'),
            '[' => Some(']'),
            '(' if skip_list => Some(')'),
            _ => None,
        };
        if let Some(close) = close {
            // Skip to the closing character, over the strings inside a matcher.
            skip_list = false;
            let mut quote = if close == c { Some(c) } else { None };
            i += 1;
            while i < chars.len() {
                match (quote, chars[i]) {
                    (Some(_), '\\') => i += 1,
                    (Some(q), ch) if ch == q => {
                        if close == q {
                            break;
                        }
                        quote = None;
                    }
                    (None, ch) if ch == close => break,
                    (None, ch @ ('"' | '\'' | '`')) => quote = Some(ch),
                    _ => {}
                }
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || "_:".contains(chars[i])) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace());
            if GROUPING.contains(&word.as_str()) {
                skip_list = true;
            } else if !NOT_NAMES.contains(&word.as_str()) && next != Some(&'(') {
                names.insert(word);
            }
            continue;
        }
        if !c.is_whitespace() {
            skip_list = false;
        }
        i += 1;
    }
    names
}

#[test]
fn metric_names_finds_the_selected_names_only() {
    let names = metric_names(
        r#"sum by (instance, method) (increase(up{job="a b", x=~"c{d}"}[1h] offset 5m)) / on (instance) group_left(version) foo:bar > bool 1e3 * 1000"#,
    );
    let expected: BTreeSet<String> = ["up", "foo:bar"].map(str::to_owned).into();
    assert_eq!(names, expected);
}

/// Grafana's date units: each reads its value as milliseconds since the epoch.
fn is_date_unit(unit: &str) -> bool {
    unit.starts_with("dateTime")
}

/// The panels of `dashboard`, with those nested in collapsed rows.
fn panels(dashboard: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    all
}

/// The units a panel shows its values in: its default and those its overrides set.
fn units(panel: &serde_json::Value) -> Vec<&str> {
    let config = &panel["fieldConfig"];
    let mut units: Vec<&str> = config["defaults"]["unit"].as_str().into_iter().collect();
    for o in config["overrides"].as_array().into_iter().flatten() {
        for p in o["properties"].as_array().into_iter().flatten() {
            if p["id"] == "unit" {
                units.extend(p["value"].as_str());
            }
        }
    }
    units
}

/// One alerting rule of the shipped rules file, as written.
#[derive(Debug)]
struct Rule {
    alert: String,
    expr: String,
    annotations: BTreeMap<String, String>,
}

/// A YAML scalar as the rules file writes one: bare, or double-quoted with `\"` and
/// `\\` escapes.
fn scalar(text: &str) -> String {
    let text = text.trim();
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) => inner.replace("\\\"", "\"").replace("\\\\", "\\"),
        None => text.to_owned(),
    }
}

/// The alerting rules of `contrib/prometheus/trendsync.rules.yml`. The file keeps one
/// shape (each key on one line, no block scalars), which this reads; a line of another
/// shape under a rule fails the test rather than be misread.
fn rules() -> Vec<Rule> {
    let text =
        std::fs::read_to_string(contrib("prometheus/trendsync.rules.yml")).expect("the rules file");
    let mut rules: Vec<Rule> = Vec::new();
    let mut in_annotations = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            rules.push(Rule {
                alert: name.trim().to_owned(),
                expr: String::new(),
                annotations: BTreeMap::new(),
            });
            in_annotations = false;
            continue;
        }
        let Some(rule) = rules.last_mut() else {
            continue;
        };
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let (key, value) = trimmed
            .split_once(':')
            .unwrap_or_else(|| panic!("a line the test cannot read: {line}"));
        assert!(
            !matches!(value.trim(), "|" | ">" | "|-" | ">-"),
            "a block scalar the test cannot read: {line}"
        );
        match (indent, key) {
            (8, "annotations") => in_annotations = true,
            (8, "expr") => {
                rule.expr = scalar(value);
                in_annotations = false;
            }
            (8, _) => in_annotations = false,
            (10, key) if in_annotations => {
                rule.annotations.insert(key.to_owned(), scalar(value));
            }
            _ => {}
        }
    }
    assert!(rules.iter().all(|r| !r.expr.is_empty()), "{rules:#?}");
    rules
}

/// The anchor GitHub and most Markdown renderers give a heading: lower case, spaces
/// as hyphens, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every rule links its own section of docs/alerts.md, and says which host it is
/// about; absence is judged per host, never by `absent()` over the whole fleet.
#[test]
fn every_rule_links_its_runbook_and_names_the_instance() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/alerts.md"))
        .expect("docs/alerts.md");
    let anchors: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(anchor)
        .collect();
    let rules = rules();
    assert!(rules.len() >= 10, "{rules:#?}");
    let mut problems = Vec::new();
    for rule in &rules {
        let name = &rule.alert;
        let own = format!("docs/alerts.md#{}", anchor(name));
        match rule.annotations.get("runbook_url") {
            None => problems.push(format!("{name}: no runbook_url")),
            Some(url) if *url != own => {
                problems.push(format!("{name}: runbook_url {url}, not its section {own}"));
            }
            Some(_) if !anchors.contains(&anchor(name)) => {
                problems.push(format!("{name}: docs/alerts.md has no section `## {name}`"));
            }
            Some(_) => {}
        }
        let summary = rule.annotations.get("summary").map_or("", String::as_str);
        if !summary.contains("{{ $labels.instance }}") {
            problems.push(format!(
                "{name}: the summary does not name the instance: {summary}"
            ));
        }
        if rule.expr.contains("absent(") {
            problems.push(format!(
                "{name}: `absent()` is judged over the whole fleet, not per instance: {}",
                rule.expr
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check can fail: a heading that is not there has no anchor.
    assert!(!anchors.contains(&anchor("TrendsyncNoSuchAlert")));
    assert_eq!(anchor("Trendsync Region: Stale"), "trendsync-region-stale");
}

/// The threshold an alert's expression compares with, in the unit of its metric: what
/// follows its last comparison outside parentheses, its numbers multiplied (a metric
/// name there, as in `used >= 0.9 * ceiling`, makes it a ratio). None without one.
fn threshold(expr: &str) -> Option<f64> {
    let bytes = expr.as_bytes();
    let mut depth = 0i32;
    let mut last = None;
    for (i, b) in bytes.iter().enumerate() {
        match b {
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth -= 1,
            b'>' | b'<' if depth == 0 => last = Some(i),
            _ => {}
        }
    }
    let rest = expr[last? + 1..].trim_start_matches('=');
    let mut product = 1.0;
    let mut found = false;
    for word in rest.split(|c: char| c.is_whitespace() || c == '*') {
        if let Ok(n) = word.parse::<f64>() {
            product *= n;
            found = true;
        }
    }
    found.then_some(product)
}

#[test]
fn threshold_reads_the_number_an_alert_compares_with() {
    assert_eq!(threshold("time() - (x > 0) > 3 * 3600"), Some(10800.0));
    assert_eq!(threshold("used >= 0.9 * ceiling"), Some(0.9));
    assert_eq!(threshold("abs(skew) > 300"), Some(300.0));
    assert_eq!(threshold("x{a=\">\"} == 1"), None);
}

/// How many of the metric's own units (seconds, a ratio) one of a Grafana unit is.
fn unit_scale(unit: &str) -> Option<f64> {
    match unit {
        "s" => Some(1.0),
        "m" => Some(60.0),
        "h" => Some(3600.0),
        "d" => Some(86_400.0),
        "percentunit" | "none" | "short" => Some(1.0),
        "percent" => Some(0.01),
        _ => None,
    }
}

/// The values of a panel's threshold steps, the base step (`null`) left out.
fn threshold_steps(panel: &serde_json::Value) -> Vec<f64> {
    panel["fieldConfig"]["defaults"]["thresholds"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["value"].as_f64())
        .collect()
}

/// The value mapping of a table's `status` column: each status and its colour.
fn status_colours(panel: &serde_json::Value) -> BTreeMap<String, String> {
    let mut colours = BTreeMap::new();
    for o in panel["fieldConfig"]["overrides"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if o["matcher"]["options"] != "status" {
            continue;
        }
        for p in o["properties"].as_array().into_iter().flatten() {
            if p["id"] != "mappings" {
                continue;
            }
            for m in p["value"].as_array().into_iter().flatten() {
                for (status, to) in m["options"].as_object().into_iter().flatten() {
                    if let Some(colour) = to["color"].as_str() {
                        colours.insert(status.clone(), colour.to_owned());
                    }
                }
            }
        }
    }
    colours
}

/// Each `trendsync_…` selector in `expr`: the name and its matchers (empty without).
fn selectors(expr: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("trendsync_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let matchers = match tail[end..].strip_prefix('{') {
            Some(inside) => inside.split('}').next().unwrap_or_default().to_owned(),
            None => String::new(),
        };
        found.push((tail[..end].to_owned(), matchers));
        rest = &tail[end..];
    }
    found
}

/// A query variable named `name` whose values are the label_values of `name` on a
/// metric the binary writes with that label; what is wrong with it, if anything.
fn variable_problem(
    dashboard: &serde_json::Value,
    name: &str,
    written: &Written,
) -> Option<String> {
    let Some(v) = dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == name && v["type"] == "query")
    else {
        return Some(format!("no `{name}` query variable"));
    };
    let query = v["query"]["query"].as_str().or(v["query"].as_str());
    let query = query.unwrap_or_default();
    let names = names_in(query);
    // Every sample of each metric it reads carries the label (`instance` is the
    // scrape's, on all of them).
    let labelled = names.iter().all(|n| {
        written.get(n).is_some_and(|samples| {
            name == "instance" || samples.iter().all(|l| l.contains_key(name))
        })
    });
    if names.is_empty()
        || !labelled
        || !query.starts_with("label_values(")
        || !query.ends_with(&format!(", {name})"))
        || v["includeAll"] != true
        || v["multi"] != true
    {
        return Some(format!(
            "the {name} variable's query `{query}` is not the label_values of `{name}` on a \
             metric the binary writes with it, with All and several values"
        ));
    }
    None
}

/// What is wrong with the dashboard, one line each: promtool's parse of every
/// expression, the metric names, the date units, the table panels, the instance and
/// region variables and the scoping by them, the gauges' ranges and thresholds (the
/// alerts' own), the run-outcome tables, the version stat.
fn dashboard_problems(
    dashboard: &serde_json::Value,
    written: &Written,
    alerts: &[Rule],
) -> Vec<String> {
    let mut problems = Vec::new();
    problems.extend(variable_problem(dashboard, "instance", written));
    problems.extend(variable_problem(dashboard, "region", written));
    let has_region = |name: &str| {
        written
            .get(name)
            .is_some_and(|samples| samples.iter().any(|l| l.contains_key("region")))
    };
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or("?");
        let targets: Vec<&serde_json::Value> =
            panel["targets"].as_array().into_iter().flatten().collect();
        for t in &targets {
            let Some(expr) = t["expr"].as_str() else {
                continue;
            };
            let names = metric_names(expr);
            if names.is_empty() {
                problems.push(format!("{title}: `{expr}` reads no trendsync metric"));
            }
            for name in names.iter().filter(|n| !written.contains_key(*n)) {
                problems.push(format!("{title}: `{name}` is not written by the binary"));
            }
            for (name, matchers) in selectors(expr) {
                if !matchers.contains("instance=~\"$instance\"") {
                    problems.push(format!(
                        "{title}: `{expr}` does not select instance=~\"$instance\" on {name}"
                    ));
                }
                if has_region(&name) && !matchers.contains("region=~\"$region\"") {
                    problems.push(format!(
                        "{title}: `{expr}` does not select region=~\"$region\" on {name}"
                    ));
                }
            }
            if units(panel).into_iter().any(is_date_unit) && !expr.contains("* 1000") {
                problems.push(format!(
                    "{title}: a date unit on `{expr}`, which is in seconds (no `* 1000`)"
                ));
            }
            if panel["type"] == "table" && !(t["instant"] == true && t["format"] == "table") {
                problems.push(format!(
                    "{title}: a table panel whose query is not instant with the table format"
                ));
            }
            let parsed = expr.replace("$instance", ".+").replace("$region", ".+");
            rules.push_str(&format!(
                "      - record: dashboard:expr_{}\n        expr: {}\n",
                rules.lines().count(),
                serde_json::Value::from(parsed)
            ));
        }
    }
    problems.extend(gauge_problems(dashboard));
    problems.extend(threshold_problems(dashboard, alerts));
    problems.extend(outcome_problems(dashboard, written, alerts));
    problems.extend(version_problems(dashboard));
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("dashboard.rules.yml");
    std::fs::write(&file, &rules).expect("writing the rules file");
    let (code, out) = promtool(&["check", "rules", &file.to_string_lossy()]);
    if code != 0 {
        problems.push(format!(
            "promtool does not parse every expression:\n{out}\n{rules}"
        ));
    }
    problems
}

/// Every gauge has a unit, a range (so that the fullest bar is not always full) and
/// thresholds to colour it by.
fn gauge_problems(dashboard: &serde_json::Value) -> Vec<String> {
    let mut problems = Vec::new();
    for panel in panels(dashboard) {
        if !matches!(panel["type"].as_str(), Some("gauge" | "bargauge")) {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or("?");
        let defaults = &panel["fieldConfig"]["defaults"];
        if defaults["unit"].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{title}: a gauge without a unit"));
        }
        match (defaults["min"].as_f64(), defaults["max"].as_f64()) {
            (Some(min), Some(max)) if min < max => {}
            (min, max) => problems.push(format!(
                "{title}: a gauge without a range (min {min:?}, max {max:?})"
            )),
        }
        if threshold_steps(panel).is_empty() {
            problems.push(format!("{title}: a gauge without thresholds"));
        }
    }
    problems
}

/// A panel with thresholds names, in its description, the alert whose threshold it
/// shows, and its steps are that alert's threshold (either sign, for an alert on an
/// absolute value), in the panel's unit; a gauge's range holds it. The stale region
/// and the nearly spent bucket have such a panel.
fn threshold_problems(dashboard: &serde_json::Value, alerts: &[Rule]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut shown = BTreeSet::new();
    for panel in panels(dashboard) {
        let steps = threshold_steps(panel);
        if steps.is_empty() {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or("?");
        let description = panel["description"].as_str().unwrap_or_default();
        let Some(alert) = alerts
            .iter()
            .find(|a| description.contains(a.alert.as_str()))
        else {
            problems.push(format!(
                "{title}: thresholds, but its description names no alert they stand for"
            ));
            continue;
        };
        shown.insert(alert.alert.clone());
        let Some(want) = threshold(&alert.expr) else {
            problems.push(format!("{title}: {} compares with no number", alert.alert));
            continue;
        };
        let defaults = &panel["fieldConfig"]["defaults"];
        let unit = defaults["unit"].as_str().unwrap_or("none");
        let Some(scale) = unit_scale(unit) else {
            problems.push(format!("{title}: a unit the test cannot convert: {unit}"));
            continue;
        };
        let off = |v: f64| (v * scale - want).abs() > 1e-9 && (v * scale + want).abs() > 1e-9;
        if steps.iter().any(|v| off(*v)) || !steps.iter().any(|v| (v * scale - want).abs() < 1e-9) {
            problems.push(format!(
                "{title}: thresholds {steps:?} {unit}, while {} fires beyond {want} (`{}`)",
                alert.alert, alert.expr
            ));
        }
        if let (Some(min), Some(max)) = (defaults["min"].as_f64(), defaults["max"].as_f64())
            && !(min * scale <= want && want < max * scale)
        {
            problems.push(format!(
                "{title}: its range {min}..{max} {unit} does not show {}'s threshold",
                alert.alert
            ));
        }
    }
    for alert in ["TrendsyncRegionStale", "TrendsyncBucketNearlySpent"] {
        if !shown.contains(alert) {
            problems.push(format!("no panel shows {alert}'s threshold"));
        }
    }
    problems
}

/// For each status family an alert reads (`…_status{status="failed"} == 1`), a table
/// of each one's current status (`== 1`), whose status column gives every status the
/// binary writes a colour, red for each status that alerts.
fn outcome_problems(
    dashboard: &serde_json::Value,
    written: &Written,
    alerts: &[Rule],
) -> Vec<String> {
    let mut alerting: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for rule in alerts {
        for (name, matchers) in selectors(&rule.expr) {
            if let Some(status) = matchers
                .split(',')
                .find_map(|m| m.trim().strip_prefix("status=\""))
                .and_then(|s| s.strip_suffix('"'))
            {
                alerting.entry(name).or_default().insert(status.to_owned());
            }
        }
    }
    let mut problems = Vec::new();
    if !alerting.contains_key("trendsync_last_run_status") {
        problems.push(format!(
            "no alert reads trendsync_last_run_status (a refused run's config_error): {alerting:?}"
        ));
    }
    for (family, statuses) in &alerting {
        let table = panels(dashboard).into_iter().find(|p| {
            p["type"] == "table"
                && p["targets"].as_array().into_iter().flatten().any(|t| {
                    t["expr"].as_str().is_some_and(|e| {
                        selectors(e).iter().any(|(n, _)| n == family) && e.ends_with("== 1")
                    })
                })
        });
        let Some(table) = table else {
            problems.push(format!("no table shows the current {family} (`… == 1`)"));
            continue;
        };
        let title = table["title"].as_str().unwrap_or("?");
        let colours = status_colours(table);
        for status in statuses {
            if colours.get(status).map(String::as_str) != Some("red") {
                problems.push(format!(
                    "{title}: {status}, which alerts, is not red: {colours:?}"
                ));
            }
        }
        let written_statuses: BTreeSet<&str> = written
            .get(family)
            .into_iter()
            .flatten()
            .filter_map(|l| l.get("status").map(String::as_str))
            .collect();
        for status in written_statuses {
            if !colours.contains_key(status) {
                problems.push(format!("{title}: the status {status} has no colour"));
            }
        }
    }
    problems
}

/// The Version stat shows the version label as its text, not the constant 1.
fn version_problems(dashboard: &serde_json::Value) -> Vec<String> {
    let version = panels(dashboard).into_iter().find(|p| {
        p["targets"].as_array().into_iter().flatten().any(|t| {
            t["expr"]
                .as_str()
                .is_some_and(|e| metric_names(e).contains("trendsync_build_info"))
        })
    });
    let Some(panel) = version else {
        return vec!["no panel shows trendsync_build_info".to_owned()];
    };
    let mut problems = Vec::new();
    let options = &panel["options"];
    if panel["type"] != "stat" || options["textMode"] != "name" || options["colorMode"].is_null() {
        problems.push(format!(
            "the version panel is not a stat in text mode (textMode \"name\", a colorMode): {}",
            panel["options"]
        ));
    }
    let shows_version = panel["targets"].as_array().into_iter().flatten().all(|t| {
        t["legendFormat"]
            .as_str()
            .is_some_and(|l| l.contains("{{version}}"))
    });
    if !shows_version {
        problems.push("the version panel's legend, its text, does not hold {{version}}".to_owned());
    }
    problems
}

#[test]
fn the_dashboard_reads_its_data_right() {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(contrib("grafana/trendsync.json")).expect("read"),
    )
    .expect("the dashboard is JSON");
    let problems = dashboard_problems(&dashboard, &written_families(), &rules());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
