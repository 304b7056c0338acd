//! What trendsync writes for others to read once a command's work is done: the
//! metrics file a collector scrapes (`metrics`), drawn from the run's report and the
//! database (docs/metrics.md).

pub(crate) mod metrics;
