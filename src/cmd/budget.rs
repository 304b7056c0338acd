//! `trendsync budget [--json]` and `trendsync budget charge METHOD`.
//!
//! Each action has its file: the report (`show`), `charge` and `unblock`; what their
//! `--json` prints is in `json`.

mod charge;
pub(super) mod json;
mod show;
mod unblock;

use anyhow::Result;

use super::Ctx;
use crate::cli::{BudgetAction, BudgetArgs};
use charge::charge;
use show::show;
use unblock::unblock;

// The parts name these siblings of `budget` as `super::database` and so on, as the
// code did when it was one file.
use super::{identity, maintenance};

pub async fn run(ctx: &Ctx<'_>, args: &BudgetArgs) -> Result<()> {
    match &args.action {
        None => show(ctx, args.json).await,
        Some(BudgetAction::Charge {
            method,
            count,
            reserve,
            json,
        }) => charge(ctx, method, *count, *reserve, *json).await,
        Some(BudgetAction::Unblock { bucket, json }) => {
            unblock(ctx, bucket.as_deref(), *json).await
        }
    }
}

// What the tests (`super::*`) reach in the parts.
#[cfg(test)]
use {
    crate::quota::Entry,
    json::BudgetBucketJson,
    show::{chart, print_bucket},
};

#[cfg(test)]
mod tests;
