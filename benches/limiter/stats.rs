//! The numbers a phase of the limiter bench yields: client-side latency statistics of
//! its samples, and the time Redis itself reports spending in a command.

use std::time::Duration;

/// Latency statistics of one phase.
pub(crate) struct Stats {
    pub(crate) samples: usize,
    pub(crate) mean: Duration,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

impl Stats {
    pub(crate) fn from_samples(mut samples: Vec<Duration>) -> Stats {
        assert!(!samples.is_empty(), "a phase measured no calls");
        samples.sort_unstable();
        let total: Duration = samples.iter().sum();
        let n = samples.len();
        Stats {
            samples: n,
            mean: total / u32::try_from(n).expect("a phase's sample count fits in u32"),
            p50: percentile(&samples, 50.0),
            p99: percentile(&samples, 99.0),
        }
    }

    /// Calls per second of one sequential client.
    pub(crate) fn per_second(&self) -> f64 {
        1.0 / self.mean.as_secs_f64()
    }
}

/// Nearest-rank percentile of sorted samples.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = (p / 100.0 * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Cumulative calls and microseconds Redis has spent in one command.
#[derive(Clone, Copy, Default)]
pub(crate) struct CommandTime {
    pub(crate) calls: u64,
    pub(crate) usec: u64,
}

impl std::ops::Sub for CommandTime {
    type Output = CommandTime;
    fn sub(self, rhs: CommandTime) -> CommandTime {
        CommandTime {
            calls: self.calls - rhs.calls,
            usec: self.usec - rhs.usec,
        }
    }
}

impl std::ops::AddAssign for CommandTime {
    fn add_assign(&mut self, rhs: CommandTime) {
        self.calls += rhs.calls;
        self.usec += rhs.usec;
    }
}

impl CommandTime {
    pub(crate) fn per_call(self) -> f64 {
        if self.calls == 0 {
            return f64::NAN;
        }
        self.usec as f64 / self.calls as f64
    }
}
