//! The integration tests, all in one binary: the limiter's promises against both
//! backends, and the binary end to end.

mod common;

mod budget_cli;
mod config_errors;
mod conformance;
// SIGKILL, exit statuses by signal, advisory locks: Unix only.
#[cfg(unix)]
mod crash;
mod limiter_down;
mod metrics_e2e;
mod run_e2e;
mod search_e2e;
mod secrets_e2e;
mod store_e2e;
