//! What trendsync writes for others to read once a command's work is done: the
//! metrics file a collector scrapes (`metrics`), drawn from the run's report and the
//! database (docs/metrics.md), and the run's finished slots shipped to object storage
//! (`sink`, docs/commands.md).

pub(crate) mod metrics;
pub(crate) mod sink;
