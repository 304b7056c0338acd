//! The ledger's restore policy (docs/budget.md, "When Redis loses the window"): this host
//! keeps a ledger of the calls Redis granted it, and replays it, at the original times,
//! into a window that is not the one it charged into, so that a Redis that lost its data (a
//! restart without persistence, a failover to a replica that missed writes) counts this
//! host's share again.
//!
//! The policy is written once over [`LedgerStore`], the little it asks of the shared
//! window: its epoch marker, whether it holds a charge, and a replay of a past call.
//! The Redis backend implements it; the tests implement it over the in-memory
//! [`Model`](super::model::Model). The ledger's rows are kept in the [`Journal`].

use std::future::Future;
use std::sync::{Arc, Mutex};

use super::journal::{Epoch, Journal, JournalError, Journalled};
use super::{Charge, Decision, LimiterError, Part, RecordPast};
use crate::error::chain;

/// How far inside its window the newest grant must be for its absence to prove the
/// window lost: further than any clock step between this host and Redis.
const CLOCK_MARGIN_US: i64 = 60_000_000;

/// What the restore policy asks of the shared window. A replay records a call at its
/// original age ([`RecordPast`]), creating the window's epoch if there was none.
pub(crate) trait LedgerStore: RecordPast {
    /// Where the window is, for messages (no password).
    fn endpoint(&self) -> &str;

    /// The epoch of the budget's window as the store holds it now; `None` when it
    /// holds no window (never charged, or lost).
    fn epoch(&self) -> impl Future<Output = Result<Option<Epoch>, LimiterError>> + Send;

    /// Whether the window of `part` holds `charge`'s entry.
    fn holds(
        &self,
        charge: &Charge,
        part: &Part,
    ) -> impl Future<Output = Result<bool, LimiterError>> + Send;
}

/// What an epoch read tells a ledger that last saw another (or the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EpochNews {
    /// The window this host last charged into.
    Same,
    /// The first window this host sees: remembered, with nothing to replay.
    First,
    /// Not the window of epoch `then` that this host charged into (another, or
    /// none): Redis lost it.
    Lost { then: Epoch },
}

/// What reading `seen` means to a ledger that last saw `known`.
fn epoch_news(known: Option<Epoch>, seen: Option<Epoch>) -> EpochNews {
    match known {
        _ if known == seen => EpochNews::Same,
        None => EpochNews::First,
        Some(then) => EpochNews::Lost { then },
    }
}

/// The part of `newest` whose window must still hold it at `now_us`: one that counts
/// it, by a margin no clock step undoes. `None` when no part is sure to, and the
/// grant's absence would prove nothing.
fn part_to_probe(newest: &Journalled, now_us: i64) -> Option<&Part> {
    let made = newest.made_at_us;
    newest.charge.parts.iter().find(|p| {
        made > p.window.at(now_us).cutoff_us + CLOCK_MARGIN_US
            && p.window.leaves(made, now_us) > now_us + CLOCK_MARGIN_US
    })
}

/// A host's ledger of Redis grants for one budget, and the epoch it last saw.
#[derive(Debug)]
pub(crate) struct Ledger {
    journal: Arc<Journal>,
    budget_key: String,
    known: Mutex<Option<Epoch>>,
    /// One restore at a time; the others wait for it and find the epoch known.
    restoring: tokio::sync::Mutex<()>,
}

impl Ledger {
    pub fn new(journal: Arc<Journal>, budget_key: &str) -> Result<Ledger, JournalError> {
        let known = journal.last_epoch(budget_key)?;
        Ok(Ledger {
            journal,
            budget_key: budget_key.to_owned(),
            known: Mutex::new(known),
            restoring: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn known(&self) -> Option<Epoch> {
        *self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn remember(&self, epoch: Option<Epoch>) -> Result<(), JournalError> {
        *self.known.lock().unwrap_or_else(|p| p.into_inner()) = epoch;
        self.journal.set_epoch(&self.budget_key, epoch)
    }

    /// Writes a granted charge into the ledger, off the async runtime's threads (the
    /// row is fsynced).
    pub(crate) async fn granted(&self, charge: &Charge) -> Result<(), JournalError> {
        let (journal, key, charge) = (
            Arc::clone(&self.journal),
            self.budget_key.clone(),
            charge.clone(),
        );
        let made_at = self.journal.now().as_i64();
        match tokio::task::spawn_blocking(move || journal.record_granted_at(&key, &charge, made_at))
            .await
        {
            Ok(written) => written,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }

    /// The ledger of `budget_key`'s grants in `journal`, kept from now on for
    /// `store`: replayed if the store no longer holds the window this host last
    /// charged into, and pruned of what every window has let go. `None`, with a
    /// warning, when the journal cannot keep one.
    pub(super) async fn keep(
        journal: Arc<Journal>,
        budget_key: &str,
        store: &impl LedgerStore,
    ) -> Option<Ledger> {
        let ledger = match Ledger::new(journal, budget_key) {
            Ok(ledger) => ledger,
            Err(e) => {
                tracing::warn!(
                    "{}; going on without a ledger: should Redis lose the window, this host cannot restore its share",
                    chain(&e)
                );
                return None;
            }
        };
        match store.epoch().await {
            Ok(epoch) => ledger.watch_epoch(store, epoch).await,
            // A Redis that stopped answering: the charges will say so.
            Err(e) => tracing::debug!("reading the window's epoch failed: {}", chain(&e)),
        }
        ledger.probe_newest_grant(store).await;
        if let Err(e) = ledger
            .journal
            .prune(budget_key, ledger.journal.now().as_i64())
        {
            tracing::warn!("{}; the ledger's old rows stay for next time", chain(&e));
        }
        Some(ledger)
    }

    /// After `store` decided `charge` in the window of `epoch`: records a grant in
    /// the ledger, and restores the ledger when the epoch shows the window lost.
    pub(super) async fn charged(
        &self,
        store: &impl LedgerStore,
        charge: &Charge,
        decision: &Decision,
        epoch: Epoch,
    ) {
        if decision.granted
            && let Err(e) = self.granted(charge).await
        {
            tracing::warn!(
                "{}; charge {} is counted in the window, but cannot be restored should Redis lose it",
                chain(&e),
                charge.id
            );
        }
        self.watch_epoch(store, Some(epoch)).await;
    }

    /// Compares the epoch a reply carried with the one this host last saw; when it
    /// moved, Redis lost the window: replays this host's ledger into it.
    async fn watch_epoch(&self, store: &impl LedgerStore, seen: Option<Epoch>) {
        let known = self.known();
        let then = match epoch_news(known, seen) {
            EpochNews::Same => return,
            EpochNews::First => {
                if let Err(e) = self.remember(seen) {
                    tracing::warn!("{}", chain(&e));
                }
                return;
            }
            EpochNews::Lost { then } => then,
        };
        let _one_at_a_time = self.restoring.lock().await;
        if self.known() != known {
            return; // restored meanwhile by another task of this process
        }
        let now = match seen {
            Some(e) => format!("epoch {e}"),
            None => "none".to_owned(),
        };
        self.restore(
            store,
            &format!(
                "the window is not the one this host charged into (epoch {then} then, {now} now)"
            ),
        )
        .await;
    }

    /// Whether the store still holds this host's newest grant, when it should: a
    /// failover to a replica that missed the latest writes keeps the epoch but loses
    /// them.
    async fn probe_newest_grant(&self, store: &impl LedgerStore) {
        let newest = match self.journal.ledger(&self.budget_key) {
            Ok((rows, _)) => rows.into_iter().next_back(),
            Err(e) => {
                tracing::warn!("{}", chain(&e));
                return;
            }
        };
        let Some(newest) = newest else { return };
        let Some(part) = part_to_probe(&newest, self.journal.now().as_i64()) else {
            return;
        };
        match store.holds(&newest.charge, part).await {
            Ok(true) => {}
            Ok(false) => {
                let _one_at_a_time = self.restoring.lock().await;
                self.restore(
                    store,
                    &format!(
                        "the window no longer holds this host's newest charge ({})",
                        newest.charge.id
                    ),
                )
                .await;
            }
            Err(e) => tracing::debug!(
                "looking for this host's newest charge failed: {}",
                chain(&e)
            ),
        }
    }

    /// Replays this host's ledger into a window the store lost (`why` says how it
    /// shows), then remembers the window's epoch.
    async fn restore(&self, store: &impl LedgerStore, why: &str) {
        tracing::warn!(
            "budget \"{}\" on {}: {why}; Redis lost it (a restart without persistence, or a failover to a replica that missed writes). Replaying this host's ledger at the original times; the window is whole again once every host that charged within it has run",
            self.budget_key,
            store.endpoint(),
        );
        let done = match self.journal.restore(&self.budget_key, store).await {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!("{}; the ledger is replayed again next time", chain(&e));
                return;
            }
        };
        tracing::info!(
            "restored {} call{} ({} units) of this host into budget \"{}\" on {}",
            done.calls,
            if done.calls == 1 { "" } else { "s" },
            done.units,
            self.budget_key,
            store.endpoint()
        );
        if let Some(e) = done.interrupted {
            tracing::warn!(
                "restoring the ledger stopped: {}; it is replayed again next time",
                chain(&e)
            );
            return;
        }
        // The replay itself created the epoch if none was there.
        match store.epoch().await {
            Ok(epoch) => {
                if let Err(e) = self.remember(epoch) {
                    tracing::warn!("{}", chain(&e));
                }
            }
            Err(e) => tracing::warn!("{}; the ledger is replayed again next time", chain(&e)),
        }
    }
}

#[cfg(test)]
mod tests;
