//! The integration tests, all in one binary: the limiter's promises against both
//! backends, and the binary end to end.

mod common;

mod budget_cli;
mod budget_promise;
mod charts_e2e;
// The Redis scenarios move a server's clock with an LD_PRELOAD shim: Linux only.
#[cfg(target_os = "linux")]
mod buckets;
// faketime for the binary, the LD_PRELOAD shim for a Redis: Linux only.
#[cfg(target_os = "linux")]
mod clock_confirm;
// An LD_PRELOAD shim: Linux (glibc) only.
#[cfg(target_os = "linux")]
mod clock_shift;
// faketime for the binary, the LD_PRELOAD shim for a Redis: Linux only.
#[cfg(target_os = "linux")]
mod clock_skew;
// faketime for the binary, the LD_PRELOAD shim for a Redis: Linux only.
#[cfg(target_os = "linux")]
mod clocks_apart;
mod config_bounds;
mod config_errors;
// /bin/sh and env -i, as cron runs a line: Unix only.
#[cfg(unix)]
mod config_identity;
mod conformance;
// faketime for the binary, the LD_PRELOAD shim for a Redis: Linux only.
#[cfg(target_os = "linux")]
mod costs_switch;
// SIGKILL, exit statuses by signal, advisory locks: Unix only.
#[cfg(unix)]
mod crash;
// Symbolic and hard links, a newline in a directory's name: Unix only.
#[cfg(unix)]
mod damage;
mod datasette;
mod differential;
mod docs_contract;
mod drift;
mod error_style;
mod export_charts_e2e;
// A pty from `script` for the terminal: Unix only.
#[cfg(unix)]
mod analysts_readme;
mod export_parquet;
#[cfg(unix)]
mod failover;
// The LD_PRELOAD shim moves a Redis's clock; SIGKILL, SIGSTOP: Linux only.
#[cfg(target_os = "linux")]
mod fleet;
mod fleet_readme;
mod follow_e2e;
mod hardening;
// Closed and full streams, signals, FIFOs and symlinks: Unix only.
#[cfg(unix)]
mod hostile;
mod layering;
// The LD_PRELOAD shim moves a Redis's clock: Linux only.
#[cfg(target_os = "linux")]
mod leases;
mod limiter_down;
mod metrics_e2e;
mod monitoring;
// Signals, kill -9, cron's shell and systemd: Unix only.
#[cfg(unix)]
mod operations;
mod output;
// faketime for the binary: Linux only.
#[cfg(target_os = "linux")]
mod over_quota;
mod plan_e2e;
mod read_only_db;
mod redis_acl;
mod redis_config_errors;
mod region_names;
mod run_e2e;
mod search_e2e;
mod secrets_e2e;
mod sink;
mod store_e2e;
mod text_forms;
mod upstream_billing;
mod video_e2e;
mod window_loss;
