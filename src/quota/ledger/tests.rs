//! The restore policy as tables of (state, event) -> decision, over a shared window
//! kept in memory by the reference [`Model`]: no server, no sleep, one set clock. That
//! Redis keeps these promises is tested against a real server in
//! `tests/window_loss.rs`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::quota::model::Model;
use crate::quota::{Window, Zone};

const KEY: &str = "key1";
const HOUR: Duration = Duration::from_secs(3600);
const S: i64 = 1_000_000;
/// The clock of every case, which never moves.
const NOW: i64 = 1_700_000_000_000_000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("no test thread panicked holding it")
}

/// The shared window in memory. As the charge script does, a charge or a replay into
/// a window without an epoch creates one: the time, on the window's clock.
struct MemoryWindow {
    model: Mutex<Model>,
    epoch: Mutex<Option<Epoch>>,
    clock: Arc<ManualClock>,
    /// How many replays it answers before it answers nothing; `Some(0)`: it is down.
    answers: Option<usize>,
    /// The charge ids it replayed, in order.
    replayed: Mutex<Vec<String>>,
}

impl MemoryWindow {
    fn answering(&self) -> Result<(), LimiterError> {
        match self.answers {
            Some(n) if lock(&self.replayed).len() >= n => Err(LimiterError::Unavailable {
                endpoint: "memory".into(),
                source: crate::quota::Reason("stopped answering".into()).into(),
            }),
            _ => Ok(()),
        }
    }

    /// A live charge, decided as the charge script decides one: in the window's
    /// epoch, created if there is none.
    fn charge(&self, charge: &Charge) -> (Decision, Epoch) {
        let now = self.clock.now().as_i64();
        let epoch = *lock(&self.epoch).get_or_insert(Epoch(now));
        (lock(&self.model).charge(charge, now, None), epoch)
    }

    fn used(&self) -> u64 {
        lock(&self.model).used(
            crate::quota::Kind::Bucket,
            "budget",
            &HOUR.into(),
            self.clock.now().as_i64(),
        )
    }
}

impl RecordPast for MemoryWindow {
    async fn record_past(&self, charge: &Charge, age: Duration) -> Result<Decision, LimiterError> {
        self.answering()?;
        let now = self.clock.now().as_i64();
        lock(&self.epoch).get_or_insert(Epoch(now));
        lock(&self.replayed).push(charge.id.clone());
        Ok(lock(&self.model).charge(charge, now, Some(age)))
    }
}

impl LedgerStore for MemoryWindow {
    fn endpoint(&self) -> &str {
        "memory"
    }

    async fn epoch(&self) -> Result<Option<Epoch>, LimiterError> {
        self.answering()?;
        Ok(*lock(&self.epoch))
    }

    async fn holds(&self, charge: &Charge, part: &Part) -> Result<bool, LimiterError> {
        self.answering()?;
        Ok(lock(&self.model).holds(part.kind, &part.policy, &charge.id))
    }
}

/// A call to the budget's hour-long window.
fn call(id: &str, units: u64) -> Charge {
    Charge {
        calls: 1,
        id: id.into(),
        bucket: "budget".into(),
        method: "videos.list".into(),
        units,
        parts: vec![Part {
            kind: crate::quota::Kind::Bucket,
            policy: "budget".into(),
            window: HOUR.into(),
            max: 1_000,
            units,
        }],
    }
}

/// What happens to the ledger.
#[derive(Debug, Clone, Copy)]
enum Event {
    /// A command opens it ([`Ledger::keep`]).
    Open,
    /// A live charge of 1 unit, `c1`, is granted ([`Ledger::charged`]).
    Charge,
}

/// The state (the epoch this host last saw, its ledger, the window), the event, and
/// the decision: what was replayed, the epoch remembered, the units in the window.
struct Case {
    name: &'static str,
    known: Option<i64>,
    /// The ledger's grants, oldest first: id, seconds ago, units.
    grants: &'static [(&'static str, i64, u64)],
    /// The window's epoch (`None`: there is no window) and the grants it holds.
    epoch: Option<i64>,
    holds: &'static [&'static str],
    /// How many replays the window answers; `Some(0)`: none, nor anything else.
    answers: Option<usize>,
    event: Event,
    replayed: &'static [&'static str],
    remembered: Option<i64>,
    used: u64,
}

/// Two grants, of 5 and 3 units, twenty and ten minutes ago.
const TWO: &[(&str, i64, u64)] = &[("g1", 1200, 5), ("g2", 600, 3)];

const CASES: &[Case] = &[
    Case {
        name: "a first window is remembered, with nothing to replay",
        known: None,
        grants: TWO,
        epoch: Some(1),
        holds: &["g1", "g2"],
        answers: None,
        event: Event::Open,
        replayed: &[],
        remembered: Some(1),
        used: 8,
    },
    Case {
        name: "the window charged into, whole: nothing to do",
        known: Some(1),
        grants: TWO,
        epoch: Some(1),
        holds: &["g1", "g2"],
        answers: None,
        event: Event::Open,
        replayed: &[],
        remembered: Some(1),
        used: 8,
    },
    Case {
        name: "another epoch: the ledger is replayed and the new epoch remembered",
        known: Some(1),
        grants: TWO,
        epoch: Some(2),
        holds: &[],
        answers: None,
        event: Event::Open,
        replayed: &["g1", "g2"],
        remembered: Some(2),
        used: 8,
    },
    Case {
        name: "no window where there was one: replayed, and the epoch the replay made remembered",
        known: Some(1),
        grants: TWO,
        epoch: None,
        holds: &[],
        answers: None,
        event: Event::Open,
        replayed: &["g1", "g2"],
        remembered: Some(NOW),
        used: 8,
    },
    Case {
        name: "the same epoch without the newest grant (a replica that missed writes): replayed",
        known: Some(1),
        grants: TWO,
        epoch: Some(1),
        holds: &["g1"],
        answers: None,
        event: Event::Open,
        replayed: &["g1", "g2"],
        remembered: Some(1),
        used: 8,
    },
    Case {
        name: "a newest grant about to leave proves nothing by its absence",
        known: Some(1),
        grants: &[("g1", 3570, 5)],
        epoch: Some(1),
        holds: &[],
        answers: None,
        event: Event::Open,
        replayed: &[],
        remembered: Some(1),
        used: 0,
    },
    Case {
        name: "a lost window with an empty ledger: nothing to replay, its absence remembered",
        known: Some(1),
        grants: &[],
        epoch: None,
        holds: &[],
        answers: None,
        event: Event::Open,
        replayed: &[],
        remembered: None,
        used: 0,
    },
    Case {
        name: "a window that does not answer: nothing replayed, nothing forgotten",
        known: Some(1),
        grants: TWO,
        epoch: Some(2),
        holds: &[],
        answers: Some(0),
        event: Event::Open,
        replayed: &[],
        remembered: Some(1),
        used: 0,
    },
    Case {
        name: "a replay cut short keeps the old epoch, so that the next command replays again",
        known: Some(1),
        grants: TWO,
        epoch: Some(2),
        holds: &[],
        answers: Some(1),
        event: Event::Open,
        replayed: &["g1"],
        remembered: Some(1),
        used: 5,
    },
    Case {
        name: "a charge into the window charged into is kept, and nothing replayed",
        known: Some(1),
        grants: TWO,
        epoch: Some(1),
        holds: &["g1", "g2"],
        answers: None,
        event: Event::Charge,
        replayed: &[],
        remembered: Some(1),
        used: 9,
    },
    Case {
        name: "a charge that finds the window lost mid-run replays the ledger, itself counted once",
        known: Some(1),
        grants: TWO,
        epoch: None,
        holds: &[],
        answers: None,
        event: Event::Charge,
        replayed: &["g1", "g2", "c1"],
        remembered: Some(NOW),
        used: 9,
    },
    Case {
        name: "the first charge of a host learns the window's epoch",
        known: None,
        grants: &[],
        epoch: None,
        holds: &[],
        answers: None,
        event: Event::Charge,
        replayed: &[],
        remembered: Some(NOW),
        used: 1,
    },
];

#[tokio::test]
async fn the_ledger_is_replayed_when_and_only_when_the_window_is_lost() {
    for case in CASES {
        let dir = tempfile::tempdir().expect("temp dir");
        let clock = Arc::new(ManualClock::starting_at(crate::clock::Micros::new(NOW)));
        let journal =
            Arc::new(Journal::open(&dir.path().join("host.db"), clock.clone()).expect("journal"));
        journal
            .set_epoch(KEY, case.known.map(Epoch))
            .expect("the epoch last seen");
        let store = MemoryWindow {
            model: Mutex::new(Model::new()),
            epoch: Mutex::new(case.epoch.map(Epoch)),
            clock: clock.clone(),
            answers: case.answers,
            replayed: Mutex::new(Vec::new()),
        };
        for &(id, secs_ago, units) in case.grants {
            let made = NOW - secs_ago * S;
            journal
                .record_granted_at(KEY, &call(id, units), made)
                .expect("a grant");
            if case.holds.contains(&id) {
                let age = Duration::from_secs(secs_ago.unsigned_abs());
                lock(&store.model).charge(&call(id, units), NOW, Some(age));
            }
        }

        let ledger = match case.event {
            Event::Open => Ledger::keep(journal.clone(), KEY, &store)
                .await
                .expect("a ledger"),
            Event::Charge => {
                let ledger = Ledger::new(journal.clone(), KEY).expect("a ledger");
                let c1 = call("c1", 1);
                let (decision, epoch) = store.charge(&c1);
                assert!(decision.granted, "{}: {decision:?}", case.name);
                ledger.charged(&store, &c1, &decision, epoch).await;
                ledger
            }
        };

        assert_eq!(*lock(&store.replayed), case.replayed, "{}", case.name);
        let remembered = case.remembered.map(Epoch);
        assert_eq!(ledger.known(), remembered, "{}", case.name);
        assert_eq!(
            journal.last_epoch(KEY).expect("the epoch"),
            remembered,
            "{}: kept for the next command",
            case.name
        );
        assert_eq!(store.used(), case.used, "{}", case.name);
    }
}

/// A granted charge is written into the ledger; a denied one is not.
#[tokio::test]
async fn only_a_granted_charge_joins_the_ledger() {
    let dir = tempfile::tempdir().expect("temp dir");
    let clock = Arc::new(ManualClock::starting_at(crate::clock::Micros::new(NOW)));
    let journal =
        Arc::new(Journal::open(&dir.path().join("host.db"), clock.clone()).expect("journal"));
    let store = MemoryWindow {
        model: Mutex::new(Model::new()),
        epoch: Mutex::new(None),
        clock,
        answers: None,
        replayed: Mutex::new(Vec::new()),
    };
    let ledger = Ledger::new(journal.clone(), KEY).expect("a ledger");
    for (id, units) in [("fits", 600), ("too-big", 600)] {
        let c = call(id, units);
        let (decision, epoch) = store.charge(&c);
        ledger.charged(&store, &c, &decision, epoch).await;
    }
    let ids: Vec<String> = journal
        .ledger(KEY)
        .expect("the ledger")
        .0
        .into_iter()
        .map(|j| j.charge.id)
        .collect();
    assert_eq!(ids, ["fits"]);
}

#[test]
fn an_epoch_read_shows_the_same_window_a_first_one_or_a_lost_one() {
    let e = |n| Some(Epoch(n));
    for (known, seen, news) in [
        (None, None, EpochNews::Same),
        (None, e(1), EpochNews::First),
        (e(1), e(1), EpochNews::Same),
        (e(1), e(2), EpochNews::Lost { then: Epoch(1) }),
        (e(1), None, EpochNews::Lost { then: Epoch(1) }),
    ] {
        assert_eq!(
            epoch_news(known, seen),
            news,
            "{known:?} then, {seen:?} now"
        );
    }
}

/// (windows of the newest grant's parts, when it was made, now) -> the part whose
/// window must still hold it, if any.
#[test]
fn the_newest_grant_is_looked_for_only_where_it_must_still_be() {
    let utc = Window::Day(Zone::get("UTC").expect("a known zone"));
    let minute: Window = Duration::from_secs(60).into();
    let hour: Window = HOUR.into();
    let midnight = Zone::get("UTC").expect("a known zone").midnight(NOW, 0);
    let next_midnight = midnight + 86_400 * S;
    type ProbeCase<'a> = (&'a str, Vec<(&'a str, Window)>, i64, i64, Option<&'a str>);
    let cases: Vec<ProbeCase<'_>> = vec![
        (
            "ten minutes into an hour",
            vec![("hour", hour.clone())],
            NOW - 600 * S,
            NOW,
            Some("hour"),
        ),
        (
            "half a minute into an hour",
            vec![("hour", hour.clone())],
            NOW - 30 * S,
            NOW,
            Some("hour"),
        ),
        (
            "half a minute before it leaves",
            vec![("hour", hour.clone())],
            NOW - 3570 * S,
            NOW,
            None,
        ),
        (
            "out of the minute, inside the hour",
            vec![("minute", minute.clone()), ("hour", hour.clone())],
            NOW - 600 * S,
            NOW,
            Some("hour"),
        ),
        (
            "out of its only window",
            vec![("minute", minute)],
            NOW - 600 * S,
            NOW,
            None,
        ),
        (
            "ten minutes into the day",
            vec![("day", utc.clone())],
            midnight + 600 * S,
            midnight + 7200 * S,
            Some("day"),
        ),
        (
            "half a minute into the day",
            vec![("day", utc.clone())],
            midnight + 30 * S,
            midnight + 7200 * S,
            None,
        ),
        (
            "half a minute before the day ends",
            vec![("day", utc)],
            midnight + 600 * S,
            next_midnight - 30 * S,
            None,
        ),
    ];
    for (name, windows, made_at_us, now_us, want) in cases {
        let newest = Journalled {
            charge: Charge {
                calls: 1,
                parts: windows
                    .into_iter()
                    .map(|(policy, window)| Part {
                        kind: crate::quota::Kind::Bucket,
                        policy: policy.into(),
                        window,
                        max: 1_000,
                        units: 1,
                    })
                    .collect(),
                ..call("g1", 1)
            },
            made_at_us,
        };
        let got = part_to_probe(&newest, now_us).map(|p| p.policy.as_str());
        assert_eq!(got, want, "{name}");
    }
}
