//! The limiter a command charges: either backend behind one type with the same promises
//! (docs/budget.md), or a Redis that could not be reached, which answers every request as
//! unavailable so that `[when_limiter_down]` applies; and which kind of limiter a
//! database's own records say charged its budget.

use super::*;

/// Either backend, with the same promises; or a Redis that could not be reached when
/// the command started, which answers every request as unavailable so that the
/// `[when_limiter_down]` policy applies to the command's calls as it would had Redis
/// gone away mid-run.
pub enum Limiter {
    Redis(RedisLimiter),
    Embedded(EmbeddedLimiter),
    Down { endpoint: String, reason: String },
}

fn unavailable(endpoint: &str, reason: &str) -> LimiterError {
    LimiterError::Unavailable {
        endpoint: endpoint.to_owned(),
        source: Reason(reason.to_owned()).into(),
    }
}

/// What a replay records into: a call already made, `age` ago, counted whatever the
/// window holds. The journal replays into a [`Limiter`]; the Redis backend restores
/// its ledger into itself.
pub trait RecordPast {
    fn record_past(
        &self,
        charge: &Charge,
        age: Duration,
    ) -> impl Future<Output = Result<Decision, LimiterError>> + Send;
}

impl RecordPast for Limiter {
    fn record_past(
        &self,
        charge: &Charge,
        age: Duration,
    ) -> impl Future<Output = Result<Decision, LimiterError>> + Send {
        Limiter::record_past(self, charge, age)
    }
}

impl Limiter {
    /// What to use when opening the limiter failed: a limiter that could not be
    /// reached is [`Limiter::Down`]; any other failure stays an error.
    pub(crate) fn or_down(opened: Result<Limiter, LimiterError>) -> Result<Limiter, LimiterError> {
        match opened {
            Err(LimiterError::Unavailable { endpoint, source }) => Ok(Limiter::Down {
                endpoint,
                reason: crate::error::chain(&*source),
            }),
            other => other,
        }
    }

    pub async fn charge(&self, charge: &Charge) -> Result<Decision, LimiterError> {
        self.charge_timed(charge)
            .await
            .map(|(decision, _)| decision)
    }

    /// [`Limiter::charge`], with the limiter's clock when it decided: what an
    /// upstream answer's own time is compared with ([`skew`]).
    pub async fn charge_timed(&self, charge: &Charge) -> Result<(Decision, Micros), LimiterError> {
        match self {
            Limiter::Redis(l) => l.charge_keeping_ledger(charge).await,
            Limiter::Embedded(l) => l.charge(charge, None).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Whose clock this limiter decides by; `None` while it is down.
    pub(crate) fn clock(&self) -> Option<skew::LimiterClock> {
        match self {
            Limiter::Redis(_) => Some(skew::LimiterClock::Redis),
            Limiter::Embedded(_) => Some(skew::LimiterClock::Host),
            Limiter::Down { .. } => None,
        }
    }

    /// Records a charge that already happened `age` ago (a call made while the
    /// limiter was down), whatever the window holds: the call was made, so the
    /// window must count it. Recording the same id twice counts it once.
    pub async fn record_past(
        &self,
        charge: &Charge,
        age: Duration,
    ) -> Result<Decision, LimiterError> {
        match self {
            Limiter::Redis(l) => l.decide(charge, Some(age)).await.map(|d| d.decision),
            Limiter::Embedded(l) => l.charge(charge, Some(age)).await.map(|(d, _)| d),
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// The state of `policies`; entries are listed for those whose name is in
    /// `with_entries`. Charges nothing.
    pub async fn status(
        &self,
        policies: &[PolicyRef],
        with_entries: &[&str],
    ) -> Result<Status, LimiterError> {
        match self {
            Limiter::Redis(l) => l.status(policies, with_entries).await,
            Limiter::Embedded(l) => l.status(policies, with_entries).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Denies every charge of `methods` (a bucket's) until `until`, for every process
    /// sharing this limiter. Other methods are not touched: the block stays with
    /// these methods, whatever bucket a later costs file puts them in (3.8).
    pub async fn block_until(&self, methods: &[String], until: Micros) -> Result<(), LimiterError> {
        match self {
            Limiter::Redis(l) => l.block_until(methods, until).await,
            Limiter::Embedded(l) => l.block_until(methods, until).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// The upstream refused a call of `bucket` (3.5): when this budget had charged it
    /// less than `quota` since the upstream's last midnight (by the limiter's clock),
    /// and this is the first such answer of that bucket and upstream day on any host,
    /// records those units and returns them; otherwise records nothing and returns
    /// `None`. `at` is a recent time on the limiter's clock (the refused call's
    /// charge): the upstream's midnights are taken around it, never around this host's
    /// unchecked clock.
    pub(crate) async fn note_upstream_refusal(
        &self,
        bucket: &str,
        quota: u64,
        at: Micros,
    ) -> Result<Option<drift::SpentDay>, LimiterError> {
        match self {
            Limiter::Redis(l) => l.note_upstream_refusal(bucket, quota, at).await,
            Limiter::Embedded(l) => l.note_upstream_refusal(bucket, quota).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Every bucket's figures of the last few upstream days on which the upstream
    /// refused it early ([`Limiter::note_upstream_refusal`]), oldest first.
    pub(crate) async fn upstream_spent(&self) -> Result<Vec<drift::SpentDay>, LimiterError> {
        let mut days = match self {
            Limiter::Redis(l) => l.upstream_spent().await?,
            Limiter::Embedded(l) => l.upstream_spent().await?,
            Limiter::Down { endpoint, reason } => return Err(unavailable(endpoint, reason)),
        };
        days.sort_by(|a, b| (a.day_us, &a.bucket).cmp(&(b.day_us, &b.bucket)));
        Ok(days)
    }

    /// Lifts the blocks of `methods` (a bucket's) set by [`Limiter::block_until`] before
    /// they end. Returns when the latest would have ended, or `None` when none was
    /// blocked.
    pub async fn unblock(&self, methods: &[String]) -> Result<Option<Micros>, LimiterError> {
        match self {
            Limiter::Redis(l) => l.unblock(methods).await,
            Limiter::Embedded(l) => l.unblock(methods).await,
            Limiter::Down { endpoint, reason } => Err(unavailable(endpoint, reason)),
        }
    }

    /// Whether calls counted in this limiter stay in the local ledger: only Redis can
    /// lose a window while this host's database keeps it.
    pub(crate) fn keeps_ledger(&self) -> bool {
        matches!(self, Limiter::Redis(l) if l.keeps_ledger())
    }

    /// Keeps a ledger of this host's grants in `journal` from now on, replays it if
    /// Redis no longer holds the window this host last charged into, and prunes what
    /// every window has let go. Only Redis needs one; the others are returned as they
    /// are.
    #[must_use = "the limiter that keeps the ledger is the one returned"]
    pub async fn keep_ledger(self, journal: Arc<Journal>, budget_key: &str) -> Limiter {
        match self {
            Limiter::Redis(l) => Limiter::Redis(l.keep_ledger(journal, budget_key).await),
            other => other,
        }
    }

    /// Where the limiter is, for messages (no password).
    pub(crate) fn describe(&self) -> String {
        match self {
            Limiter::Redis(l) => l.endpoint().to_owned(),
            Limiter::Embedded(l) => l.endpoint(),
            Limiter::Down { endpoint, .. } => endpoint.clone(),
        }
    }
}

impl fmt::Debug for Limiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Limiter({})", self.describe())
    }
}

/// The kinds of limiter whose calls of `budget_key` this database still records: the
/// embedded limiter's log, then the Redis ledger and journal (both kept at least a
/// day). What `budget charge` spent leaves no run behind, only these. Empty when
/// neither holds a call, when the file is missing, or when it cannot be read.
///
/// Both kinds only where something moved the database from one kind to the other
/// without a run recording it (a race, or a build from before runs recorded their
/// limiter). Which of them charged last is then not said: only the clocks that stamped
/// the calls could tell, and a clock days ahead would pin its kind for days
/// (docs/commands.md, `--switch-limiter`).
pub fn charged_on(db: Option<&Db>, budget_key: &str) -> Vec<LimiterKind> {
    let Some(db) = db else {
        return Vec::new();
    };
    let conn = db.lock();
    let mut kinds = Vec::new();
    if embedded::logs_any(&conn, budget_key) {
        kinds.push(LimiterKind::Embedded);
    }
    if Journal::holds_any_call(&conn, budget_key) {
        kinds.push(LimiterKind::Redis);
    }
    kinds
}
