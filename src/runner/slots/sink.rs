//! Where a slot the run finished complete goes next: the sink's outbox, with the
//! lease's token, when the run has a sink (docs/commands.md, "The sink").

use super::super::run::Run;
use crate::error::chain;
use crate::quota::SlotRef;

/// Queues `slot`, finished complete under `token`, for the run's sink. A slot that
/// cannot be queued is logged; its rows are stored and current all the same.
pub(super) async fn queue_for_sink(run: &Run, slot: &SlotRef, token: i64) {
    if !run.settings.sink {
        return;
    }
    if let Err(e) = run
        .record
        .queue_for_sink(&slot.region, slot.start_s, slot.secs, Some(token))
        .await
    {
        tracing::error!(region = %slot.region, "{}", chain(&e));
    }
}
