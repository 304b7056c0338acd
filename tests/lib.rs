//! The integration tests, all in one binary: the limiter's promises against both
//! backends, and the binary end to end.

mod common;

mod budget_cli;
mod config_bounds;
mod config_errors;
mod conformance;
// SIGKILL, exit statuses by signal, advisory locks: Unix only.
#[cfg(unix)]
mod crash;
mod differential;
#[cfg(unix)]
mod failover;
mod hardening;
// Closed and full streams, signals, FIFOs and symlinks: Unix only.
#[cfg(unix)]
mod hostile;
mod limiter_down;
mod metrics_e2e;
// Signals, kill -9, cron's shell and systemd: Unix only.
#[cfg(unix)]
mod operations;
mod plan_e2e;
mod redis_acl;
mod redis_config_errors;
mod run_e2e;
mod search_e2e;
mod secrets_e2e;
mod store_e2e;
mod window_loss;
