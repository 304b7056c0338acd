//! Where a slot the run finished complete goes next: the sink's outbox
//! (`Store::queue_for_sink(run_id, region, slot start, slot secs, Some(token))`), when
//! the run has a sink. This build has no sink, so nothing is queued.

use super::super::run::Run;
use crate::quota::SlotRef;

/// Queues `slot`, finished complete under `token`, for the run's sink.
pub(super) async fn queue_for_sink(_run: &Run, _slot: &SlotRef, _token: i64) {}
