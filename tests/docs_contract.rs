//! The contract the repository carries in `docs/`, checked against the binary: every
//! field of every command's JSON is in docs/json.md, every command and flag in
//! docs/commands.md, every metric and its labels in docs/metrics.md, every shipped alert
//! in docs/alerts.md, every exit code in docs/exit-codes.md. The binary is run for real
//! (a fake upstream, the embedded limiter), so a field added to a command's JSON without
//! its documentation fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use clap::CommandFactory;
use serde_json::Value;

use crate::common::harness::Harness;
use crate::common::upstream::{Billing, FakeUpstream};

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

/// The `## ` section of `doc` whose heading contains `marker`, heading included, up to
/// the next `## ` heading.
fn section<'a>(doc: &'a str, marker: &str) -> Option<&'a str> {
    let mut start = None;
    let mut offset = 0;
    for line in doc.split_inclusive('\n') {
        if line.starts_with("## ") {
            if let Some(s) = start {
                return Some(&doc[s..offset]);
            }
            if line.contains(marker) {
                start = Some(offset);
            }
        }
        offset += line.len();
    }
    start.map(|s| &doc[s..])
}

/// The paths a section of docs/json.md documents: the first cell of each row of its
/// field tables (`` `regions[].code` ``).
fn documented(section: &str) -> BTreeSet<String> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(path, _)| path.to_owned())
        .collect()
}

/// Every key path of `value`: `a.b` for nested objects, `a[].b` for the objects in an
/// array (all of its elements). An object documented as a map (`p.*`: its keys are
/// data, such as method or bucket names) is walked as `p.*`. A scalar, an array of
/// scalars, or an empty array or object ends a path.
fn key_paths(value: &Value, documented: &BTreeSet<String>) -> BTreeSet<String> {
    fn walk(value: &Value, path: &str, documented: &BTreeSet<String>, out: &mut BTreeSet<String>) {
        let join = |key: &str| {
            if path.is_empty() {
                key.to_owned()
            } else {
                format!("{path}.{key}")
            }
        };
        match value {
            Value::Object(map) if !map.is_empty() => {
                let is_map = !path.is_empty() && documented.contains(&join("*"));
                for (key, v) in map {
                    let child = if is_map { join("*") } else { join(key) };
                    walk(v, &child, documented, out);
                }
            }
            Value::Array(items) if items.iter().any(Value::is_object) => {
                for item in items {
                    walk(item, &format!("{path}[]"), documented, out);
                }
            }
            _ => {
                out.insert(path.to_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(value, "", documented, &mut out);
    out.remove("");
    out
}

/// Whether `path` is documented: its own row, or, for an array or object that was
/// empty or null, a row of a path under it (`` `path[].x` ``, `` `path.x` ``).
fn documents(documented: &BTreeSet<String>, path: &str) -> bool {
    documented.contains(path)
        || documented
            .iter()
            .any(|d| d.starts_with(&format!("{path}.")) || d.starts_with(&format!("{path}[]")))
}

/// The paths of `objects` that `section` does not document.
fn undocumented(objects: &[Value], section: &str) -> BTreeSet<String> {
    let documented = documented(section);
    objects
        .iter()
        .flat_map(|o| key_paths(o, &documented))
        .filter(|p| !documents(&documented, p))
        .collect()
}

/// The granular cost file with a narrower limit, so that `budget --json` has one.
fn costs() -> String {
    format!(
        "{}\n[[limit]]\nname = \"searches\"\nmethods = [\"search.list\"]\nmax = 50\nwindow = \"10m\"\n",
        include_str!("../quota-costs.granular.toml")
    )
}

/// Two regions with a category chart and a search each, and follow-ups: every part of
/// a run's report has something in it.
const REGIONS: &str = r#"
[defaults]
pages = 2
categories = ["17"]

[[region]]
code = "US"
offset = 0

[[region.search]]
name = "fresh"
order = "viewCount"
published_within = "24h"

[[region]]
code = "GB"
offset = 7

[follow]
days = 7
every = "6h"
"#;

/// A video of the fixtures' chart, and a word of its title.
const VIDEO: &str = "Zq3vT8mKpLw";
const WORD: &str = "Lighthouse";

/// One command of the scenario: the heading of docs/json.md that documents its JSON,
/// its arguments, the exit code it ends with, and whether its stdout is JSON lines.
struct Step {
    doc: &'static str,
    args: &'static [&'static str],
    code: i32,
    lines: bool,
}

const fn step(doc: &'static str, args: &'static [&'static str], code: i32) -> Step {
    Step {
        doc,
        args,
        code,
        lines: false,
    }
}

/// Every command that prints JSON, in an order that gives each something to print:
/// a backfill and a run first fill the database.
const STEPS: &[Step] = &[
    // `run` and `backfill` share a section, which the run's heading names.
    step("`run --json`", &["backfill", "--json"], 0),
    step("`run --json`", &["run", "--json"], 0),
    step("`run --json`", &["run", "--dry-run", "--json"], 0),
    step("`run --json`", &["backfill", "--dry-run", "--json"], 0),
    step("`budget --json`", &["budget", "--json"], 0),
    // Nothing listens on port 1 of the loopback: the limiter is down, and what is
    // still known is printed.
    step(
        "`budget --json`",
        &["budget", "--json", "--redis-url", "redis://127.0.0.1:1"],
        75,
    ),
    step(
        "`budget charge --json`",
        &["budget", "charge", "videos.list", "--json"],
        0,
    ),
    step(
        "`budget charge --json`",
        &[
            "budget",
            "charge",
            "search.list",
            "--count",
            "1000",
            "--json",
        ],
        75,
    ),
    step(
        "`budget unblock --json`",
        &["budget", "unblock", "--json"],
        0,
    ),
    step("`status --json`", &["status", "--json"], 0),
    step(
        "`status --json`",
        &["status", "--json", "--redis-url", "redis://127.0.0.1:1"],
        0,
    ),
    step("`runs --json`", &["runs", "--json"], 0),
    step("`search --json`", &["search", WORD, "--json"], 0),
    step("`video --json`", &["video", VIDEO, "--json"], 0),
    step("`config --json`", &["config", "--json"], 0),
    Step {
        doc: "`export --format jsonl`",
        args: &["export", "--format", "jsonl"],
        code: 0,
        lines: true,
    },
    Step {
        doc: "`export --format jsonl`",
        args: &["export", "--format", "jsonl", "--counts"],
        code: 0,
        lines: true,
    },
    Step {
        doc: "`export --format jsonl --per video`",
        args: &["export", "--format", "jsonl", "--per", "video"],
        code: 0,
        lines: true,
    },
    step(
        "`prune --json`",
        &["prune", "--older-than", "1h", "--dry-run", "--json"],
        0,
    ),
    step(
        "`prune --json`",
        &["prune", "--older-than", "1h", "--json"],
        0,
    ),
    step(
        "When a command fails",
        &["status", "--db", "missing.db", "--json"],
        78,
    ),
];

/// Every command, by its path (`budget charge`), from the clap definitions, and
/// whether it takes `--json`.
fn commands() -> BTreeMap<String, bool> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut BTreeMap<String, bool>) {
        for sub in cmd.get_subcommands() {
            let name = format!("{path}{}", sub.get_name());
            let json = sub.get_arguments().any(|a| a.get_long() == Some("json"));
            out.insert(name.clone(), json);
            walk(sub, &format!("{name} "), out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&trendsync::cli::Cli::command(), "", &mut out);
    out
}

/// The commands that take `--json`.
fn json_commands() -> BTreeSet<String> {
    commands()
        .into_iter()
        .filter_map(|(name, json)| json.then_some(name))
        .collect()
}

/// The command a step runs (`budget charge`): its words before the first flag.
fn command_of(step: &Step) -> String {
    let words: Vec<&str> = step
        .args
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .copied()
        .collect();
    let known = commands();
    (1..=words.len())
        .rev()
        .map(|n| words[..n].join(" "))
        .find(|c| known.contains_key(c))
        .unwrap_or_else(|| words.first().copied().unwrap_or_default().to_owned())
}

/// What each step printed, by the heading that documents it. A step of a command the
/// binary does not have is left out.
fn printed(h: &Harness<'_>) -> BTreeMap<&'static str, Vec<Value>> {
    let known = commands();
    let mut out: BTreeMap<&'static str, Vec<Value>> = BTreeMap::new();
    for step in STEPS {
        if !known.contains_key(&command_of(step)) {
            continue;
        }
        // What is checked here is stdout; what the commands log (a denied charge's
        // warning) is other tests' business.
        let ran = h
            .cmd()
            .args(step.args)
            .status(step.code)
            .allow_stderr("")
            .run();
        let values = if step.lines {
            ran.stdout
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON line"))
                .collect()
        } else {
            vec![ran.json()]
        };
        assert!(!values.is_empty(), "{:?} printed nothing", step.args);
        out.entry(step.doc).or_default().extend(values);
    }
    out
}

/// Whether `path`, documented, is among the `printed` paths: itself, or a path under it
/// (a documented array of scalars, or a container the section names whole).
fn is_printed(printed: &BTreeSet<String>, path: &str) -> bool {
    printed.contains(path)
        || printed
            .iter()
            .any(|p| p.starts_with(&format!("{path}.")) || p.starts_with(&format!("{path}[]")))
}

/// Documented fields these scenarios cannot make the binary print: the Redis
/// limiter's URL (the scenario runs the embedded limiter), runs in progress or killed,
/// and a bucket's suggestion (two upstream days in a row spent early).
const NOT_PRINTED_HERE: &[&str] = &[
    "limiter.url",
    "last_run_limiter.url",
    "running[].run_id",
    "running[].started_at",
    "abandoned[].run_id",
    "abandoned[].started_at",
    "buckets[].suggested.quota",
    "buckets[].suggested.ceiling",
    "buckets[].suggested.days[].date",
    "buckets[].suggested.days[].upstream_spent_at",
    // The scenario's video has counts on one side of every change.
    "crosses[].id",
    "crosses[].effective_at",
    "crosses[].what",
];

/// The problems of one section of docs/json.md against what its commands printed:
/// fields printed and not named, and fields named and never printed.
fn section_problems(heading: &str, text: &str, objects: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    let missing = undocumented(objects, text);
    if !missing.is_empty() {
        problems.push(format!(
            "the section {heading} of docs/json.md does not name: {}",
            missing
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let documented = documented(text);
    let printed: BTreeSet<String> = objects
        .iter()
        .flat_map(|o| key_paths(o, &documented))
        .collect();
    let stale: Vec<String> = documented
        .into_iter()
        .filter(|p| !is_printed(&printed, p) && !NOT_PRINTED_HERE.contains(&p.as_str()))
        .map(|p| format!("`{p}`"))
        .collect();
    if !stale.is_empty() {
        problems.push(format!(
            "the section {heading} of docs/json.md names fields the command does not print: {}",
            stale.join(", ")
        ));
    }
    problems
}

#[test]
fn every_json_field_a_command_prints_is_in_docs_json_and_no_other() {
    let doc = repo_file("docs/json.md");
    let mut h = Harness::with(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.costs(costs()).regions(REGIONS);

    // Every command that takes --json has a step here, so none goes unchecked.
    let stepped: BTreeSet<String> = STEPS.iter().map(command_of).collect();
    for command in json_commands() {
        assert!(
            stepped.contains(&command),
            "`{command} --json` has no step in STEPS, so its JSON is not checked against docs/json.md"
        );
    }

    let mut problems = Vec::new();
    for (heading, objects) in printed(&h) {
        match section(&doc, heading) {
            Some(text) => problems.extend(section_problems(heading, text, &objects)),
            None => problems.push(format!("docs/json.md has no section headed {heading}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The JSON examples of a section: each ```json block, as one object or one per line.
fn examples(section: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rest = section;
    while let Some(start) = rest.find("```json\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").expect("a closed code block");
        let block = &body[..end];
        match serde_json::from_str(block) {
            Ok(value) => out.push(value),
            Err(_) => out.extend(block.lines().map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("an example is not JSON ({e}): {l}"))
            })),
        }
        rest = &body[end + 3..];
    }
    out
}

#[test]
fn the_examples_in_docs_json_are_json_with_documented_fields_only() {
    let doc = repo_file("docs/json.md");
    let headings: BTreeSet<&str> = STEPS.iter().map(|s| s.doc).collect();
    for heading in headings {
        let text = section(&doc, heading).expect("a section per heading");
        let examples = examples(text);
        assert!(!examples.is_empty(), "the section {heading} has no example");
        let missing = undocumented(&examples, text);
        assert!(
            missing.is_empty(),
            "the example of {heading} has fields its table does not name: {missing:?}"
        );
    }
}

/// The check catches a field whose row is taken out of the documentation.
#[test]
fn a_field_removed_from_docs_json_is_reported() {
    let doc = repo_file("docs/json.md");
    let text = section(&doc, "`run --json`").expect("the run section");
    let row = text
        .lines()
        .find(|l| l.starts_with("| `units_charged` |"))
        .expect("the row of units_charged");
    let without = text.replace(&format!("{row}\n"), "");
    let example = examples(text);
    assert!(undocumented(&example, text).is_empty());
    assert_eq!(
        undocumented(&example, &without),
        BTreeSet::from(["units_charged".to_owned()])
    );
    let problems = section_problems("`run --json`", &without, &example);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("does not name: `units_charged`")),
        "{problems:?}"
    );
}

#[test]
fn every_command_and_flag_is_in_docs_commands() {
    let doc = repo_file("docs/commands.md");
    let cli = trendsync::cli::Cli::command();
    let mut problems = Vec::new();
    let global = section(&doc, "Global options").expect("a section of the global options");
    for arg in cli.get_arguments() {
        if let Some(long) = arg.get_long().filter(|l| !["help", "version"].contains(l))
            && !global.contains(&format!("`--{long}"))
        {
            problems.push(format!("Global options: `--{long}`"));
        }
    }
    fn walk(cmd: &clap::Command, path: &str, doc: &str, problems: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            let name = format!("{path}{}", sub.get_name());
            let heading = format!("`trendsync {name}`");
            match section(doc, &heading) {
                None => problems.push(format!("no section headed {heading}")),
                Some(text) => {
                    for arg in sub.get_arguments().filter(|a| !a.is_global_set()) {
                        // A flag as `--flag`; an argument by its value name (METHOD).
                        let named = match arg.get_long() {
                            Some("help") => continue,
                            Some(long) => format!("`--{long}"),
                            None => arg
                                .get_value_names()
                                .and_then(|v| v.first())
                                .map_or_else(|| arg.get_id().to_string(), |v| v.to_string())
                                .to_uppercase(),
                        };
                        if !text.contains(&named) {
                            problems.push(format!("{heading}: {named}"));
                        }
                    }
                }
            }
            walk(sub, &format!("{name} "), doc, problems);
        }
    }
    walk(&cli, "", &doc, &mut problems);
    assert!(
        problems.is_empty(),
        "docs/commands.md does not name:\n{}",
        problems.join("\n")
    );
}

/// The metric families of a metrics file, each with the label names its samples carry.
fn families(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_whitespace().next().unwrap_or_default();
            out.entry(name.to_owned()).or_default();
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            let labels = out.entry(line[..end].to_owned()).or_default();
            if let Some(inside) = line[end..].strip_prefix('{') {
                let inside = &inside[..inside.rfind('}').unwrap_or(inside.len())];
                // Label values are quoted; a name is what comes before each `="`.
                for part in inside.split("\",") {
                    if let Some((label, _)) = part.split_once("=\"") {
                        labels.insert(label.trim_start_matches(',').to_owned());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_metric_the_binary_writes_is_in_docs_metrics_with_its_labels() {
    let doc = repo_file("docs/metrics.md");
    let mut h = Harness::with(
        FakeUpstream::billing(Billing::granular(10_000, 100, 10_000)),
        None,
    );
    h.costs(costs()).regions(REGIONS);
    let file = h.scratch.file("trendsync.prom");
    for args in [["backfill", "--json"], ["run", "--json"]] {
        h.cmd().arg("--metrics-file").arg(&file).args(args).run();
    }
    let written = families(&std::fs::read_to_string(&file).expect("the metrics file"));
    assert!(written.contains_key("trendsync_build_info"), "{written:?}");
    let mut problems = Vec::new();
    for (name, labels) in &written {
        let Some(row) = doc
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
        else {
            problems.push(format!("no row for `{name}`"));
            continue;
        };
        for label in labels {
            if !row.contains(&format!("`{label}`")) {
                problems.push(format!(
                    "the row of `{name}` does not name its label `{label}`"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "docs/metrics.md: {}",
        problems.join("\n")
    );
}

#[test]
fn every_shipped_alert_has_a_runbook_entry_in_docs_alerts() {
    let doc = repo_file("docs/alerts.md");
    let rules = repo_file("contrib/prometheus/trendsync.rules.yml");
    let alerts: Vec<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(str::trim)
        .collect();
    assert!(alerts.len() >= 5, "{alerts:?}");
    let missing: Vec<&&str> = alerts
        .iter()
        .filter(|a| {
            section(&doc, &format!("## {a}\n")).is_none_or(|s| !s.contains("**What to do.**"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/alerts.md has no section (with **What to do.**) for {missing:?}"
    );
}

/// Every exit code the binary ends with: 0, and each `ExitCode`. The match has no
/// wildcard, so a code added to `ExitCode` does not compile until it is listed here.
fn exit_codes() -> Vec<u8> {
    use trendsync::error::ExitCode;
    let all = [
        ExitCode::Failed,
        ExitCode::Usage,
        ExitCode::TryLater,
        ExitCode::Config,
        ExitCode::Interrupted,
        ExitCode::Terminated,
    ];
    for code in all {
        match code {
            ExitCode::Failed
            | ExitCode::Usage
            | ExitCode::TryLater
            | ExitCode::Config
            | ExitCode::Interrupted
            | ExitCode::Terminated => {}
        }
    }
    std::iter::once(0).chain(all.map(ExitCode::code)).collect()
}

#[test]
fn every_exit_code_is_in_docs_exit_codes() {
    let doc = repo_file("docs/exit-codes.md");
    // The first cell of each row of the table: "0", "130, 143".
    let listed: BTreeSet<u8> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .flat_map(|cell| cell.split(", ").filter_map(|n| n.trim().parse().ok()))
        .collect();
    let missing: Vec<u8> = exit_codes()
        .into_iter()
        .filter(|c| !listed.contains(c))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/exit-codes.md has no row for {missing:?}"
    );
}

/// The README and docs/ link only to files of the repository: a user of it has no
/// other document.
#[test]
fn the_readme_and_docs_link_only_into_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("an entry of docs/").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a page");
        let name = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        for (at, _) in text.match_indices("](") {
            let target = &text[at + 2..];
            let target = &target[..target.find(')').unwrap_or(target.len())];
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() {
                continue;
            }
            let dir = file.parent().unwrap_or(root);
            if path.contains("://") || !dir.join(path).exists() {
                problems.push(format!(
                    "{name} links to {target}, not a file of the repository"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every Markdown file that the README, the docs, the code, the tests, the benchmarks
/// or the scripts name is a file of the repository: a comment or a page that points a
/// reader at a document the repository does not have sends them nowhere.
#[test]
fn every_document_named_anywhere_is_in_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut have = std::collections::BTreeSet::new();
    let mut read = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory of the repository") {
            let path = entry.expect("an entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    stack.push(path);
                }
                continue;
            }
            if name.ends_with(".md") {
                have.insert(name.to_owned());
            }
            let top = path
                .strip_prefix(root)
                .ok()
                .and_then(|p| p.components().next())
                .and_then(|c| c.as_os_str().to_str())
                .unwrap_or_default()
                .to_owned();
            let named_here = ["src", "tests", "benches", "scripts", "docs", "README.md"];
            if named_here.contains(&top.as_str())
                && (name.ends_with(".rs") || name.ends_with(".md") || !name.contains('.'))
            {
                read.push(path);
            }
        }
    }
    let mut problems = Vec::new();
    for file in &read {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        // In code, what its comments say; a string may name a file the code writes.
        let markdown = file.extension().is_some_and(|e| e == "md");
        let text: String = if markdown {
            text
        } else {
            text.lines()
                .filter_map(|l| l.find("//").map(|at| &l[at..]))
                .collect::<Vec<_>>()
                .join("\n")
        };
        for (at, _) in text.match_indices(".md") {
            let before = &text[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-".contains(c)))
                .map_or(0, |i| i + 1);
            let stem = &before[start..];
            let after = text[at + 3..].chars().next();
            if stem.is_empty() || after.is_some_and(|c| c.is_ascii_alphanumeric()) {
                continue;
            }
            let name = format!("{stem}.md");
            if !have.contains(&name) {
                problems.push(format!(
                    "{shown} names {name}, which the repository does not have"
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `status --coverage --json` reads a fleet's slot records in Redis, which the scenario
/// above does not run: its section is checked here against records a fleet left.
#[cfg(target_os = "linux")]
#[test]
fn the_coverage_json_is_in_docs_json_and_no_other() {
    use crate::common::RedisServer;
    use crate::common::redis_server::unix_us;
    let server = RedisServer::start_at(unix_us("2026-11-28T09:00:00Z"));
    crate::leases::a_fleets_morning(&server);
    let mut h = Harness::new(Some(&server));
    h.regions(crate::leases::FLEET_REGIONS);
    let json = h
        .bare()
        .args(["status", "--coverage", "--since", "10h", "--json"])
        .run()
        .json();
    let doc = repo_file("docs/json.md");
    let heading = "`status --coverage --json`";
    let text = section(&doc, heading).expect("a section of docs/json.md for the coverage");
    let problems = section_problems(heading, text, &[json]);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let examples = examples(text);
    assert!(!examples.is_empty(), "the section {heading} has no example");
    let missing = undocumented(&examples, text);
    assert!(
        missing.is_empty(),
        "the example has fields its table does not name: {missing:?}"
    );
}
