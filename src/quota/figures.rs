//! A bucket's figures: what the limiter says of one bucket's window, with the ceiling
//! and quota it is measured against (docs/budget.md, "Buckets"). One type for every
//! reader: a run's report and its metrics, `status`, `budget` and the dry run.

use super::drift::{self, SpentDay};
use super::{Allowance, BUDGET_POLICY, Budget, Kind, Status};
use crate::clock::Micros;

/// One bucket's figures at one moment on the limiter's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketFigures {
    /// The bucket's policy name: [`BUDGET_POLICY`] for the main one.
    pub name: String,
    /// Units in its window.
    pub used: u64,
    pub ceiling: u64,
    pub quota: u64,
    /// The end of an upstream block of the bucket, if one is in force.
    pub blocked_until: Option<Micros>,
    /// What this budget had charged the bucket this upstream day when the upstream
    /// first refused it early (docs/budget.md, "When the upstream refuses"); `None`
    /// when it has not.
    pub upstream_spent_at: Option<u64>,
}

impl BucketFigures {
    /// Units left to the ceiling or to the quota.
    pub fn remaining(&self, allowance: Allowance) -> u64 {
        let max = match allowance {
            Allowance::Ceiling => self.ceiling,
            Allowance::Quota => self.quota,
        };
        max.saturating_sub(self.used)
    }

    pub fn is_main(&self) -> bool {
        self.name == BUDGET_POLICY
    }
}

impl Budget {
    /// Every bucket's figures, the main one first, from the limiter's `status` (read
    /// for [`Budget::policies`] or at least every bucket's) and its record of the
    /// upstream's early refusals (`spent`, [`super::Limiter::upstream_spent`]). A
    /// bucket `status` does not cover counts as empty.
    pub fn figures(&self, status: &Status, spent: &[SpentDay]) -> Vec<BucketFigures> {
        self.buckets()
            .iter()
            .map(|b| BucketFigures {
                name: b.name.clone(),
                used: status
                    .policies
                    .iter()
                    .find(|p| p.kind == Kind::Bucket && p.name == b.name)
                    .map_or(0, |p| p.used),
                ceiling: b.ceiling,
                quota: b.quota,
                blocked_until: status.blocked_until(&b.name),
                upstream_spent_at: drift::spent_today(spent, &b.name, status.now),
            })
            .collect()
    }
}
