//! The README's lines for analysts, run as written: its `trendsync export` lines write
//! CSV, JSON lines and Parquet of `export`, `export --counts` and `export --per video`
//! from a database a real run filled from the fake upstream, and its pandas, Polars
//! and DuckDB lines load each file. Every frame they load is checked for its types
//! (times UTC timestamps, counts nullable integers, chart and category ids text, the
//! column descriptions of the Parquet file) and every column is queried unquoted in
//! DuckDB and SQLite (tests/fixtures/readme_analysts.py). Docs and test cannot drift:
//! the lines are read from README.md.
//!
//! The libraries are found through `TRENDSYNC_TEST_PYTHON` (scripts/test installs them).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::export_parquet::filled;

const README: &str = include_str!("../README.md");

/// The fenced blocks of the README's section "For analysts" in `lang`, in order.
fn blocks(lang: &str) -> Vec<String> {
    let section = README
        .split("\n### For analysts\n")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("README.md has a section \"For analysts\"");
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in section.lines() {
        match &mut current {
            None if line.trim() == format!("```{lang}") => current = Some(String::new()),
            Some(block) if line.trim() == "```" => {
                out.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    out
}

#[test]
fn the_readme_loads_every_export_in_pandas_polars_and_duckdb_with_its_types() {
    let python: PathBuf = std::env::var_os("TRENDSYNC_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "TRENDSYNC_TEST_PYTHON is not set: run scripts/test (it installs pandas, \
                 Polars and DuckDB into target/analysts-venv), or point it at a python \
                 that has them"
            )
        });
    let h = filled();
    let dir = h.scratch.file("analyst");
    std::fs::create_dir(&dir).expect("a directory for the files");

    // The README's export lines, as written, with their files written into `dir`.
    let exports: Vec<Vec<String>> = blocks("sh")
        .iter()
        .flat_map(|b| b.lines().map(str::to_owned).collect::<Vec<_>>())
        .filter(|l| l.starts_with("trendsync export"))
        .map(|l| {
            let l = l.split('#').next().unwrap_or_default();
            l.split_whitespace().skip(1).map(str::to_owned).collect()
        })
        .collect();
    assert_eq!(exports.len(), 9, "three kinds, three formats: {exports:?}");
    for args in &exports {
        let mut args = args.clone();
        let out = args
            .iter()
            .position(|a| a == "--output")
            .expect("each export line names its --output");
        args[out + 1] = dir.join(&args[out + 1]).display().to_string();
        h.bare().args(&args).stdout("").run();
    }

    let code = blocks("python").join("\n");

    let ran = Command::new(&python)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/readme_analysts.py"
        ))
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("a stdin")
                .write_all(code.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap_or_else(|e| panic!("running {}: {e}", python.display()));
    assert!(
        ran.status.success(),
        "the README's lines did not load the exports as they say:\n{}\n{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
}
