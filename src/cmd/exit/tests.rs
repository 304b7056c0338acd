use std::path::PathBuf;

use anyhow::Context;

use super::*;
use crate::quota::RedisConfigError;

fn code(err: impl Into<anyhow::Error>) -> ExitCode {
    exit_code_for(&err.into())
}

fn config_error() -> ConfigError {
    ConfigError {
        file: "regions.toml".into(),
        position: Some((3, 1)),
        message: "unknown region".into(),
    }
}

fn http_error() -> reqwest::Error {
    reqwest::Client::new()
        .get("not a url")
        .build()
        .expect_err("a relative URL is no request")
}

/// Every error type that carries a code, each of its variants, and the code it gives.
fn coded() -> Vec<(anyhow::Error, ExitCode)> {
    vec![
        (SilentExit(ExitCode::TryLater).into(), ExitCode::TryLater),
        (
            SilentExit(ExitCode::Terminated).into(),
            ExitCode::Terminated,
        ),
        (UsageError("bad".into()).into(), ExitCode::Usage),
        (
            UsageTip {
                message: "no such column".into(),
                tip: "quote the phrase".into(),
            }
            .into(),
            ExitCode::Usage,
        ),
        (MissingConfig("no key".into()).into(), ExitCode::Config),
        (TryLater("database busy".into()).into(), ExitCode::TryLater),
        (config_error().into(), ExitCode::Config),
        (
            ClientError::BaseUrl {
                base: "ftp://x".into(),
                problem: "not http".into(),
            }
            .into(),
            ExitCode::Config,
        ),
        (ClientError::EmptyKey.into(), ExitCode::Config),
        (ClientError::KeyNotHeaderSafe.into(), ExitCode::Config),
        (ClientError::Http(http_error()).into(), ExitCode::Failed),
        (
            LimiterError::Config(RedisConfigError {
                url: "redis://:***@127.0.0.1:6379".into(),
                problem: "wrong password".into(),
                fix: "check --redis-url".into(),
            })
            .into(),
            ExitCode::Config,
        ),
        (
            LimiterError::Unavailable {
                endpoint: "127.0.0.1:6379".into(),
                source: crate::quota::Reason("connection refused".into()).into(),
            }
            .into(),
            ExitCode::TryLater,
        ),
        (
            LimiterError::Failed {
                endpoint: "127.0.0.1:6379".into(),
                doing: "charging",
                source: crate::quota::Reason("unexpected reply".into()).into(),
            }
            .into(),
            ExitCode::Failed,
        ),
        (
            LimiterError::ClocksApart {
                endpoint: "127.0.0.1:6379".into(),
                apart: crate::quota::skew::ClocksApart {
                    host_at: crate::clock::Micros::new(0),
                    limiter_at: crate::clock::Micros::new(26 * 3_600_000_000),
                },
            }
            .into(),
            ExitCode::TryLater,
        ),
        (
            AtomicError::NoFileName(PathBuf::from("/")).into(),
            ExitCode::Config,
        ),
        (
            AtomicError::NotAFile {
                path: PathBuf::from("/dev/null"),
                what: "a character device",
            }
            .into(),
            ExitCode::Config,
        ),
        (
            AtomicError::Io {
                doing: "renaming",
                path: PathBuf::from("out.csv"),
                source: std::io::Error::other("disk full"),
            }
            .into(),
            ExitCode::Failed,
        ),
    ]
}

#[test]
fn every_coded_error_gives_its_code() {
    for (err, want) in coded() {
        assert_eq!(exit_code_for(&err), want, "{err:#}");
    }
}

/// What a command adds on the way up (what it was doing) hides no code.
#[test]
fn every_coded_error_gives_its_code_under_context() {
    for (err, want) in coded() {
        let wrapped = err
            .context("reading the configuration")
            .context("starting the run");
        assert_eq!(exit_code_for(&wrapped), want, "{wrapped:#}");
    }
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

/// The outermost link that carries a code decides, not a cause under it.
#[test]
fn the_outermost_coded_error_decides() {
    let failed = LimiterError::Failed {
        endpoint: "127.0.0.1:6379".into(),
        doing: "reading the ACL file",
        source: Box::new(config_error()),
    };
    assert_eq!(code(failed), ExitCode::Failed);
    let config = LimiterError::Config(RedisConfigError {
        url: "redis://127.0.0.1:6379".into(),
        problem: "no such user".into(),
        fix: "check --redis-url".into(),
    });
    let down = LimiterError::Unavailable {
        endpoint: "127.0.0.1:6379".into(),
        source: Box::new(config),
    };
    assert_eq!(code(down), ExitCode::TryLater);
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
        (RegionStatus::ClockSkew, Some(ExitCode::TryLater)),
        (RegionStatus::LimiterDown, Some(ExitCode::TryLater)),
        (RegionStatus::DoneElsewhere, None),
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
        bucket: "budget".into(),
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

/// Says whether every link of `err`'s chain leaves its cause to the next link, and the
/// chain says each link once.
#[track_caller]
fn assert_says_each_cause_once(err: &(dyn Error + 'static)) {
    let text = crate::error::chain(err);
    let links: Vec<String> = crate::error::links(err).map(|l| l.to_string()).collect();
    for pair in links.windows(2) {
        assert!(
            !pair[0].contains(&pair[1]),
            "{:?} says its cause {:?} too: {text}",
            pair[0],
            pair[1]
        );
    }
    for said in links.iter().filter(|s| !s.is_empty()) {
        assert_eq!(
            text.matches(said.as_str()).count(),
            1,
            "{said:?} twice: {text}"
        );
    }
}

/// Every error with a cause, each of its variants that has one, under the crate's
/// own errors and under a command's context: no cause is said twice.
#[test]
fn every_error_says_its_cause_once() {
    use crate::quota::{JournalError, Reason, SqliteCause};
    use crate::sqlite::{OpenError, SchemaError, StepError};
    use crate::store::StoreError;

    let sqlite = |message: Option<&str>| {
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_FULL),
            message.map(str::to_owned),
        )
    };
    let no_wal = || OpenError::NoWal {
        mode: "delete".into(),
    };
    let schema = || SchemaError::Step {
        path: "t.db".into(),
        to_version: 7,
        source: StepError::Sqlite(sqlite(Some("no such table: runs"))),
    };
    let journal = || JournalError::Sqlite {
        path: "t.db".into(),
        doing: "writing a call",
        source: sqlite(Some("database or disk is full")),
    };
    let io = || std::io::Error::other("No space left on device (os error 28)");
    let mut errors: Vec<anyhow::Error> = vec![
        AtomicError::Io {
            doing: "syncing",
            path: "out.csv".into(),
            source: io(),
        }
        .into(),
        journal().into(),
        JournalError::Open {
            path: "t.db".into(),
            source: no_wal(),
        }
        .into(),
        JournalError::Schema(schema()).into(),
        JournalError::Encode {
            id: "c1".into(),
            source: serde_json::from_str::<u8>("x").expect_err("not JSON"),
        }
        .into(),
        LimiterError::Unavailable {
            endpoint: "127.0.0.1:6379".into(),
            source: Reason("connection refused".into()).into(),
        }
        .into(),
        LimiterError::Failed {
            endpoint: "t.db".into(),
            doing: "charging the budget",
            source: SqliteCause(sqlite(None)).into(),
        }
        .into(),
        LimiterError::Failed {
            endpoint: "t.db".into(),
            doing: "bringing the database's schema up to date",
            source: schema().into(),
        }
        .into(),
        LimiterError::Failed {
            endpoint: "t.db".into(),
            doing: "switching to WAL journaling",
            source: no_wal().into(),
        }
        .into(),
        StoreError::Sqlite {
            path: "t.db".into(),
            context: "inserting the page".into(),
            source: sqlite(None),
        }
        .into(),
        StoreError::Schema(schema()).into(),
        crate::runner::RunError::Journal { source: journal() }.into(),
        crate::reports::metrics::MetricsError::Write(AtomicError::Io {
            doing: "renaming the new file over",
            path: "trendsync.prom".into(),
            source: io(),
        })
        .into(),
        crate::output::parquet::TableError::from(parquet::errors::ParquetError::External(
            Box::new(io()),
        ))
        .into(),
        crate::youtube::CallError::Connection {
            call: crate::youtube::CallContext::new("videos.list"),
            cause: http_error(),
        }
        .into(),
        crate::youtube::CallError::Malformed {
            call: crate::youtube::CallContext::new("videos.list"),
            status: 200,
            problem: crate::youtube::MalformedResponse::Json(
                serde_json::from_str::<u8>("[").expect_err("not JSON"),
            ),
        }
        .into(),
    ];
    errors.extend(coded().into_iter().map(|(err, _)| err));
    for err in errors {
        assert_says_each_cause_once(err.as_ref());
        let err = err.context("starting the run");
        assert_says_each_cause_once(err.as_ref());
    }
}
