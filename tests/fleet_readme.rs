//! The README's "Two hosts" deployment, copied: its lines for `/etc/trendsync/env` go
//! into each host's env file as written, but for the addresses a reader replaces (the
//! Redis URL and the sink, here a loopback Redis and a directory), and its check
//! commands run as written after `set -a; . env`. Two hosts, each with its own
//! database, at the same minute: one fetches every region, the other skips every one
//! as fetched elsewhere, the coverage names the first, and the sink holds each slot
//! once.

use std::path::Path;

use crate::common::harness::Harness;
use crate::common::{Costs, RedisServer, files_under};

const README: &str = include_str!("../README.md");

/// The section "Two hosts" of the README.
fn section() -> &'static str {
    README
        .split("\n### Two hosts: one schedule, one dataset\n")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("README.md has a section \"Two hosts: one schedule, one dataset\"")
}

/// The fenced `sh` blocks of that section, in order.
fn blocks() -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in section().lines() {
        match &mut current {
            None if line.trim() == "```sh" => current = Some(String::new()),
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

/// The env lines as the README gives them, with the two addresses a reader fills in
/// replaced, and the host's name set where the README shows the line to uncomment.
fn env_file(lines: &str, redis_url: &str, sink: &str, host: &str) -> String {
    let mut seen = (false, false, false);
    let text: Vec<String> = lines
        .lines()
        .map(|line| {
            if line.starts_with("TRENDSYNC_REDIS_URL=") {
                seen.0 = true;
                format!("TRENDSYNC_REDIS_URL={redis_url}")
            } else if line.starts_with("TRENDSYNC_SINK=") {
                seen.1 = true;
                format!("TRENDSYNC_SINK={sink}")
            } else if line.starts_with("#TRENDSYNC_HOST_NAME=") {
                seen.2 = true;
                format!("TRENDSYNC_HOST_NAME={host}")
            } else {
                line.to_owned()
            }
        })
        .collect();
    assert_eq!(
        seen,
        (true, true, true),
        "the README's env lines set TRENDSYNC_REDIS_URL, TRENDSYNC_SINK and show TRENDSYNC_HOST_NAME:\n{lines}"
    );
    text.join("\n") + "\n"
}

#[test]
fn the_readme_two_hosts_deployment_fetches_each_slot_once_into_one_sink() {
    let blocks = blocks();
    let [env_lines, checks] = blocks.as_slice() else {
        panic!("the section has two sh blocks (the env lines, the checks): {blocks:?}");
    };
    let redis = RedisServer::start();
    let sink_dir = tempfile::tempdir().expect("a sink directory");
    let sink = format!("file://{}", sink_dir.path().display());
    let hosts: Vec<Harness<'_>> = (0..2)
        .map(|_| {
            let mut h = Harness::new(None);
            h.costs(Costs::one_unit_each());
            h
        })
        .collect();
    for (h, name) in hosts.iter().zip(["collector-a", "collector-b"]) {
        h.scratch
            .write("env", &env_file(env_lines, &redis.url(), &sink, name));
    }
    let in_env = |h: &Harness<'_>, script: &str| {
        h.cmd().within(
            Path::new("/bin/sh"),
            &["-c", &format!("set -a; . ./env; set +a; {script}")],
        )
    };

    // Both hosts' runs at the same minute, as the units start them.
    let mut reports = Vec::new();
    for h in &hosts {
        let ran = in_env(h, "exec \"$0\" \"$@\"")
            .args(["run", "--json"])
            .run();
        reports.push(ran.json());
    }
    let statuses = |r: &serde_json::Value| -> Vec<String> {
        r["regions"]
            .as_array()
            .expect("regions")
            .iter()
            .map(|r| r["status"].as_str().expect("a status").to_owned())
            .collect()
    };
    assert_eq!(reports[0]["status"], "complete", "{}", reports[0]);
    assert!(
        statuses(&reports[0]).iter().all(|s| s == "complete"),
        "{}",
        reports[0]
    );
    assert_eq!(reports[1]["status"], "complete", "{}", reports[1]);
    assert!(
        statuses(&reports[1]).iter().all(|s| s == "done_elsewhere"),
        "{}",
        reports[1]
    );
    let regions = statuses(&reports[0]).len();

    // The sink: one object per region's slot (the overall chart), shipped by host A.
    let shipped = files_under(sink_dir.path());
    assert_eq!(shipped.len(), regions, "{shipped:?}");
    assert!(
        shipped.iter().all(|o| o.starts_with("date=")
            && o.contains("/region=")
            && o.ends_with("-chart-0.parquet")),
        "{shipped:?}"
    );

    // The README's checks, as written, on host B: the coverage names host A for every
    // region's slot now going, and nothing waits for the sink.
    // The binary is not on PATH here, and the env file is the scratch directory's: a
    // function stands in for the installed binary, with the harness's global flags.
    let checks = checks.replace("/etc/trendsync/env", "./env");
    let ran = in_env(
        &hosts[1],
        &format!("G=\"$*\"; trendsync() {{ \"$0\" $G \"$@\"; }}; {checks}"),
    )
    .run();
    let out = &ran.stdout;
    assert!(out.contains("collector-a"), "{out}");
    assert!(!out.contains("collector-b"), "{out}");
    assert!(!out.contains("wait to be shipped"), "{out}");
}
