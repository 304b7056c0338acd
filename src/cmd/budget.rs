//! `trendsync budget [--json]` and `trendsync budget charge METHOD`.
//!
//! Each action has its file: the report (`show`), `charge` and `unblock`; what their
//! `--json` prints is in `json`.

mod charge;
mod json;
mod show;
mod unblock;

use std::sync::Arc;

use anyhow::Result;

use crate::cli::{BudgetAction, BudgetArgs, Global};
use crate::clock::Clock;
use charge::charge;
use show::show;
use unblock::unblock;

// The parts name these siblings of `budget` as `super::database` and so on, as the
// code did when it was one file.
use super::{database, identity, maintenance};

pub async fn run(global: &Global, args: &BudgetArgs, clock: &Arc<dyn Clock>) -> Result<()> {
    match &args.action {
        None => show(global, args.json, clock).await,
        Some(BudgetAction::Charge {
            method,
            count,
            reserve,
            json,
        }) => charge(global, method, *count, *reserve, *json, clock).await,
        Some(BudgetAction::Unblock { bucket, json }) => {
            unblock(global, bucket.as_deref(), *json, clock).await
        }
    }
}

// What the tests (`super::*`) reach in the parts.
#[cfg(test)]
use {crate::quota::Entry, show::chart};

#[cfg(test)]
mod tests;
