//! The budget a limiter counts under, fixed when the limiter is built (docs/budget.md,
//! "When the costs file changes"): both backends hold it the same way, with what every
//! charge compares worked out once.

use std::sync::Arc;

use super::Budget;

/// A budget and the marks a limiter leaves beside its window to tell whether the window
/// was last charged under it: the embedded limiter keeps the fingerprint, Redis the
/// stamp (the fingerprint, then the names of the buckets whose logs hold the entries,
/// each after a space). A window last charged under another budget is counted again at
/// this one's costs first.
#[derive(Debug)]
pub(crate) struct Counting {
    pub(crate) budget: Arc<Budget>,
    pub(crate) fingerprint: String,
    pub(crate) stamp: String,
}

impl Counting {
    /// What a limiter built with `budget` holds; `None` for a limiter built without one
    /// (a tool that charges prepared charges), whose window is charged as it stands.
    pub fn of(budget: Option<Arc<Budget>>) -> Option<Arc<Counting>> {
        let budget = budget?;
        let fingerprint = budget.fingerprint();
        let mut stamp = fingerprint.clone();
        for b in budget.buckets() {
            stamp.push(' ');
            stamp.push_str(&b.name);
        }
        Some(Arc::new(Counting {
            budget,
            fingerprint,
            stamp,
        }))
    }
}
