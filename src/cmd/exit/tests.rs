use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context;

use super::*;
use crate::config::ConfigError;
use crate::error::ExitCode;
use crate::quota::{LimiterError, RedisConfigError};
use crate::region_status::RegionStatus;
use crate::youtube::ClientError;

/// The types that implement [`Exit`] somewhere under `src/`, by full path, found in
/// the source: the compiler cannot list a trait's implementations, so this is how
/// the test knows of one added without its line in [`CODED`].
fn implementations() -> BTreeSet<String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = BTreeSet::new();
    let mut dirs = vec![src.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("listing src/") {
            let path = entry.expect("listing src/").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("reading a source file");
                for name in text.lines().filter_map(implemented_type) {
                    found.insert(format!("{}::{name}", module_of(&src, &path)));
                }
            }
        }
    }
    found
}

/// `Name` from a line `impl Exit for Name {` (the trait named by any path).
fn implemented_type(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix("impl ")?;
    let (tr, ty) = rest.split_once(" for ")?;
    if tr.trim().rsplit("::").next() != Some("Exit") {
        return None;
    }
    let end = ty.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(&ty[..end])
}

/// `trendsync::youtube::client` for `src/youtube/client.rs`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file under src/");
    let mut parts = vec![env!("CARGO_CRATE_NAME").to_owned()];
    for part in relative.with_extension("").iter() {
        let part = part.to_string_lossy();
        if part != "mod" && part != "lib" {
            parts.push(part.into_owned());
        }
    }
    parts.join("::")
}

#[test]
fn every_type_with_an_exit_code_is_asked() {
    let listed: BTreeSet<String> = coded_type_names().into_iter().map(str::to_owned).collect();
    let implemented = implementations();
    // The scan must see the ones this module defines, or it would pass by finding nothing.
    assert!(implemented.contains(std::any::type_name::<UsageError>()));
    assert_eq!(
        implemented, listed,
        "every implementation of error::Exit must be in error::CODED, and only those"
    );
}

#[test]
fn the_scan_reads_an_implementation_however_the_trait_is_named() {
    assert_eq!(implemented_type("impl Exit for Foo {"), Some("Foo"));
    assert_eq!(
        implemented_type("    impl crate::error::Exit for FooError {"),
        Some("FooError")
    );
    assert_eq!(implemented_type("impl ExitLike for Foo {"), None);
    assert_eq!(implemented_type("impl fmt::Display for Foo {"), None);
}

fn code(err: impl Into<anyhow::Error>) -> ExitCode {
    exit_code_for(&err.into())
}

#[test]
fn the_command_level_errors_say_their_codes() {
    assert_eq!(code(SilentExit(ExitCode::TryLater)), ExitCode::TryLater);
    assert_eq!(code(SilentExit(ExitCode::Terminated)), ExitCode::Terminated);
    assert_eq!(code(UsageError("bad".into())), ExitCode::Usage);
    assert_eq!(code(MissingConfig("no key".into())), ExitCode::Config);
}

#[test]
fn a_config_file_mistake_is_78() {
    let e = ConfigError {
        file: "regions.toml".into(),
        position: Some((3, 1)),
        message: "unknown region".into(),
    };
    assert_eq!(e.exit_code(), ExitCode::Config);
    assert_eq!(code(e), ExitCode::Config);
}

#[test]
fn a_client_is_78_when_configured_wrongly_and_1_when_it_cannot_be_built() {
    for e in [
        ClientError::BaseUrl {
            base: "ftp://x".into(),
            problem: "not http".into(),
        },
        ClientError::EmptyKey,
        ClientError::KeyNotHeaderSafe,
    ] {
        assert_eq!(e.exit_code(), ExitCode::Config, "{e}");
    }
    let http = reqwest::Client::new()
        .get("not a url")
        .build()
        .expect_err("a relative URL is no request");
    assert_eq!(ClientError::Http(http).exit_code(), ExitCode::Failed);
}

#[test]
fn a_limiter_is_78_only_when_no_retry_can_help() {
    let config = LimiterError::Config(RedisConfigError {
        url: "redis://:***@127.0.0.1:6379".into(),
        problem: "wrong password".into(),
        fix: "check --redis-url".into(),
    });
    assert_eq!(config.exit_code(), ExitCode::Config);
    let down = LimiterError::Unavailable {
        endpoint: "127.0.0.1:6379".into(),
        reason: "connection refused".into(),
        source: None,
    };
    assert_eq!(down.exit_code(), ExitCode::Failed);
    let failed = LimiterError::Failed {
        endpoint: "127.0.0.1:6379".into(),
        doing: "charging",
        reason: "unexpected reply".into(),
        source: None,
    };
    assert_eq!(failed.exit_code(), ExitCode::Failed);
    assert_eq!(code(config), ExitCode::Config);
}

#[test]
fn the_code_is_found_under_context_and_under_untyped_causes() {
    let wrapped = Err::<(), _>(UsageError("bad --since".into()))
        .context("reading the query")
        .context("searching")
        .unwrap_err();
    assert_eq!(exit_code_for(&wrapped), ExitCode::Usage);

    #[derive(Debug, thiserror::Error)]
    #[error("loading the configuration")]
    struct Loading(#[source] ConfigError);
    let inner = ConfigError {
        file: "quota-costs.toml".into(),
        position: None,
        message: "budget.quota must be positive".into(),
    };
    assert_eq!(code(Loading(inner)), ExitCode::Config);
}

#[test]
fn an_error_no_type_claims_is_a_failure() {
    let io = std::io::Error::other("disk full");
    assert_eq!(code(io), ExitCode::Failed);
    assert_eq!(
        exit_code_for(&anyhow::anyhow!("something broke")),
        ExitCode::Failed
    );
}

/// Every status and the code a run that ended with it gives: failures a person must
/// look at, clean stops cron simply retries, and the signal's.
#[test]
fn every_status_gives_its_code() {
    let table = [
        (RegionStatus::Complete, None),
        (RegionStatus::BudgetExhausted, Some(ExitCode::TryLater)),
        (
            RegionStatus::UpstreamQuotaExhausted,
            Some(ExitCode::TryLater),
        ),
        (RegionStatus::Failed, Some(ExitCode::Failed)),
        (RegionStatus::Skipped, Some(ExitCode::TryLater)),
        (RegionStatus::Interrupted, Some(ExitCode::Interrupted)),
        (RegionStatus::NotAttempted, Some(ExitCode::TryLater)),
        (RegionStatus::Queued, Some(ExitCode::TryLater)),
        (RegionStatus::Running, Some(ExitCode::TryLater)),
        (RegionStatus::Abandoned, Some(ExitCode::Failed)),
    ];
    let listed: Vec<RegionStatus> = table.iter().map(|(s, _)| *s).collect();
    assert_eq!(listed, RegionStatus::ALL, "the table names every status");
    for (status, want) in table {
        assert_eq!(exit_code_for_status(status), want, "{status}");
    }
}

/// A run stopped by its budget with no region failed asks cron to come back.
#[test]
fn a_clean_stop_of_a_run_is_75() {
    use crate::runner::outcome::{RegionReport, Stop, overall};
    let stop = Stop::Budget {
        method: "videos.list",
        units: 1,
        denied_by: "budget".into(),
        retry_after: None,
        remaining: 0,
    };
    let regions = [
        RegionReport::new("US"),
        RegionReport {
            status: RegionStatus::BudgetExhausted,
            ..RegionReport::new("GB")
        },
    ];
    assert_eq!(
        exit_code_for_status(overall(&regions, Some(&stop))),
        Some(ExitCode::TryLater)
    );
}
