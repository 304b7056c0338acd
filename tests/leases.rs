//! The fleet's slot leases and records against a real Redis (docs/budget.md, "A fleet:
//! slot leases"): one claimant wins, a lapsed lease is taken over under a larger
//! token, the old holder is fenced off, a slot fetched is seen as done, a slot not
//! fetched is missed with its reason and may be tried again within the slot, a slot
//! over is over, and tokens only grow across a Redis that lost its keys. Time is the
//! server's clock, moved by the test (no sleeps); a proptest runs random interleavings
//! against a model of the rules.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use trendsync::quota::RedisLimiter;
use trendsync::quota::slots::{Claim, Finish, Holder, SlotRecord, SlotRef, SlotState};

use crate::common::RedisServer;
use crate::common::redis_deployments::Cluster;
use crate::common::redis_server::unix_us;

const LEASE: Duration = Duration::from_secs(60);
const HOUR: u32 = 3600;

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A Redis whose clock reads 14:00:05 on 2026-11-28 now, and the limiter of budget
/// `key` on it.
struct Fleet {
    rt: tokio::runtime::Runtime,
    server: RedisServer,
    limiter: RedisLimiter,
    /// 14:00:00: the start of the hourly slot the clock is in.
    start_s: i64,
}

impl Fleet {
    fn new(key: &str) -> Fleet {
        let start_us = unix_us("2026-11-28T14:00:00Z");
        let server = RedisServer::start_at(start_us + 5_000_000);
        let rt = runtime();
        let limiter = rt
            .block_on(RedisLimiter::connect(
                &server.url(),
                key,
                trendsync::clock::system(),
                None,
            ))
            .expect("connecting");
        Fleet {
            rt,
            server,
            limiter,
            start_s: start_us / 1_000_000,
        }
    }

    fn slot(&self) -> SlotRef {
        SlotRef {
            region: "US".into(),
            start_s: self.start_s,
            secs: HOUR,
        }
    }

    /// Moves the server's clock to `secs` after the slot's start.
    fn at(&self, secs: f64) {
        #[allow(clippy::cast_possible_truncation)]
        let us = self.start_s * 1_000_000 + (secs * 1e6) as i64;
        self.server.clock().set_now_us(us);
    }

    fn claim(&self, host: &str, floor: i64) -> Claim {
        self.rt
            .block_on(
                self.limiter
                    .claim_slot(&self.slot(), host, &run_of(host), LEASE, floor),
            )
            .expect("claiming")
    }

    fn renew(&self, token: i64) -> bool {
        self.rt
            .block_on(self.limiter.renew_slot(&self.slot(), token, LEASE))
            .expect("renewing")
    }

    fn finish(&self, host: &str, token: i64, outcome: &str) -> Finish {
        self.rt
            .block_on(
                self.limiter
                    .finish_slot(&self.slot(), token, host, &run_of(host), outcome),
            )
            .expect("finishing")
    }

    fn records(&self) -> Vec<SlotRecord> {
        self.rt
            .block_on(self.limiter.slot_records(
                "US",
                HOUR,
                0,
                self.start_s - 3 * i64::from(HOUR),
                self.start_s + 3 * i64::from(HOUR),
            ))
            .expect("reading the records")
    }

    fn flushall(&self) {
        self.server.query::<()>(&redis::cmd("FLUSHALL"));
    }
}

pub fn run_of(host: &str) -> String {
    format!("run-of-{host}")
}

fn holder(host: &str, token: i64) -> Holder {
    Holder {
        host: host.into(),
        run_id: run_of(host),
        token,
    }
}

#[track_caller]
pub fn claimed(c: Claim) -> (i64, Option<Holder>) {
    match c {
        Claim::Claimed { token, took_over } => (token, took_over),
        other => panic!("expected the slot claimed, got {other:?}"),
    }
}

#[test]
fn of_two_claimants_one_holds_the_slot_and_the_other_sees_its_lease() {
    let f = Fleet::new("two");
    let (token, took_over) = claimed(f.claim("a", 0));
    assert_eq!(took_over, None);
    match f.claim("b", 0) {
        Claim::Held {
            holder: h,
            until_us,
        } => {
            assert_eq!(h, holder("a", token));
            // The lease runs a lease length from the claim, on Redis's clock.
            let claimed_at = f.start_s * 1_000_000 + 5_000_000;
            assert!(
                until_us >= claimed_at + 60_000_000 && until_us < claimed_at + 61_000_000,
                "{until_us}"
            );
        }
        other => panic!("b should see a's lease, got {other:?}"),
    }
    // The same run claiming again (a claim sent twice) gets its own lease back.
    assert_eq!(claimed(f.claim("a", 0)).0, token);
    // A miss never overwrites a live lease.
    f.rt.block_on(f.limiter.miss_slot(&f.slot(), "limiter_down", "b", None))
        .expect("recording a miss");
    assert!(matches!(f.claim("b", 0), Claim::Held { holder: h, .. } if h == holder("a", token)));
    assert_eq!(f.finish("a", token, "complete"), Finish::Recorded);
    match f.claim("b", 0) {
        Claim::Done { by, .. } => assert_eq!(by, holder("a", token)),
        other => panic!("b should see the slot done, got {other:?}"),
    }
    assert_eq!(
        f.records(),
        vec![SlotRecord {
            start_s: f.start_s,
            state: SlotState::Fetched {
                by: holder("a", token),
                at_us: f.records_at_us(),
            },
        }]
    );
}

impl Fleet {
    /// The `at_us` of the one record read (to compare the rest whole).
    fn records_at_us(&self) -> i64 {
        match self.records().first().map(|r| &r.state) {
            Some(SlotState::Fetched { at_us, .. }) => *at_us,
            other => panic!("expected one fetched record, got {other:?}"),
        }
    }
}

#[test]
fn a_lapsed_lease_is_taken_over_under_a_larger_token_and_the_old_holder_is_fenced_off() {
    let f = Fleet::new("lapse");
    let (a, _) = claimed(f.claim("a", 0));
    // Renewed, the lease outlives its first length.
    f.at(50.0);
    assert!(f.renew(a));
    f.at(100.0);
    assert!(matches!(f.claim("b", 0), Claim::Held { .. }));
    // a stops renewing: a lease length after its last renewal, it has lapsed.
    f.at(111.0);
    let (b, took_over) = claimed(f.claim("b", 0));
    assert!(b > a, "{b} > {a}");
    assert_eq!(took_over, Some(holder("a", a)));
    // a comes back: its renewal and its finish are refused, and name b.
    assert!(!f.renew(a));
    assert_eq!(
        f.finish("a", a, "complete"),
        Finish::Fenced {
            by: Some(holder("b", b))
        }
    );
    assert_eq!(f.finish("b", b, "complete"), Finish::Recorded);
    // The finish of b sent again (a failover) is still recorded, a's still fenced.
    assert_eq!(f.finish("b", b, "complete"), Finish::Recorded);
    assert!(matches!(
        f.finish("a", a, "complete"),
        Finish::Fenced { by: Some(h) } if h == holder("b", b)
    ));
    match f.claim("c", 0) {
        Claim::Done { by, .. } => assert_eq!(by, holder("b", b)),
        other => panic!("c should see b's done mark, got {other:?}"),
    }
}

#[test]
fn a_slot_not_fetched_is_missed_with_its_reason_and_may_be_tried_again_within_the_slot() {
    let f = Fleet::new("missed");
    let (a, _) = claimed(f.claim("a", 0));
    assert_eq!(f.finish("a", a, "budget_exhausted"), Finish::Recorded);
    assert_eq!(
        f.records(),
        vec![SlotRecord {
            start_s: f.start_s,
            state: SlotState::Missed {
                reason: "budget".into(),
                host: Some("a".into()),
                detail: Some("the region ended budget_exhausted".into()),
            },
        }]
    );
    // Another host tries again within the slot, and fetches it.
    f.at(600.0);
    let (b, took_over) = claimed(f.claim("b", 0));
    assert!(b > a);
    assert_eq!(took_over, None);
    assert_eq!(f.finish("b", b, "complete"), Finish::Recorded);
    assert!(matches!(
        f.records()[..],
        [SlotRecord { state: SlotState::Fetched { ref by, .. }, .. }] if *by == holder("b", b)
    ));
    // A miss never overwrites a done mark.
    f.rt.block_on(
        f.limiter
            .miss_slot(&f.slot(), "limiter_down", "c", Some("down")),
    )
    .expect("recording a miss");
    assert!(matches!(
        f.records()[..],
        [SlotRecord {
            state: SlotState::Fetched { .. },
            ..
        }]
    ));
}

#[test]
fn each_status_short_of_complete_records_its_reason() {
    let f = Fleet::new("reasons");
    for (outcome, reason) in [
        ("upstream_quota_exhausted", "upstream"),
        ("failed", "upstream"),
        ("clock_skew", "upstream"),
        ("limiter_down", "limiter_down"),
        ("interrupted", "interrupted"),
        ("budget_exhausted", "budget"),
    ] {
        let (t, _) = claimed(f.claim(outcome, 0));
        assert_eq!(f.finish(outcome, t, outcome), Finish::Recorded);
        match &f.records()[..] {
            [
                SlotRecord {
                    state: SlotState::Missed { reason: r, .. },
                    ..
                },
            ] => assert_eq!(r, reason, "{outcome}"),
            other => panic!("{outcome}: {other:?}"),
        }
    }
}

#[test]
fn a_slot_over_is_over_and_a_lease_left_lapsed_in_it_is_taken_over_late() {
    let f = Fleet::new("ended");
    let (a, _) = claimed(f.claim("a", 0));
    // Within the slot, a's lapsed lease still reads as held (someone may take over).
    f.at(3000.0);
    assert!(matches!(
        f.records()[..],
        [SlotRecord {
            state: SlotState::Held { .. },
            ..
        }]
    ));
    f.at(f64::from(HOUR));
    assert_eq!(f.claim("b", 0), Claim::Ended);
    let missed = SlotState::Missed {
        reason: "taken_over_late".into(),
        host: Some("a".into()),
        detail: None,
    };
    assert_eq!(f.records()[0].state, missed);
    // a's late finish adds nothing: the slot was marked missed after its end.
    assert_eq!(f.finish("a", a, "complete"), Finish::Fenced { by: None });
    assert_eq!(f.records()[0].state, missed);
    // A slot with no record at all is over too, and stays without one.
    let next_hour = f.slot().next();
    f.at(2.0 * f64::from(HOUR) + 1.0);
    let c =
        f.rt.block_on(f.limiter.claim_slot(&next_hour, "c", "r", LEASE, 0))
            .expect("claiming");
    assert_eq!(c, Claim::Ended);
    assert_eq!(f.records().len(), 1);
}

#[test]
fn tokens_only_grow_across_a_redis_that_lost_its_keys() {
    let f = Fleet::new("flush");
    let mut before = Vec::new();
    for host in ["a", "b", "c"] {
        let (t, _) = claimed(f.claim(host, 0));
        assert_eq!(f.finish(host, t, "failed"), Finish::Recorded);
        before.push(t);
    }
    assert!(before.windows(2).all(|w| w[0] < w[1]), "{before:?}");
    let most = *before.iter().max().expect("three tokens");
    f.flushall();
    let (t, _) = claimed(f.claim("d", 0));
    assert!(t > most, "after FLUSHALL: {t} > {most}");

    // A Redis that lost its keys and whose clock was set back a day: its new epoch is
    // earlier than the tokens before it, and the caller's floor carries them on.
    f.server
        .clock()
        .set_now_us(f.start_s * 1_000_000 - 86_400_000_000);
    f.flushall();
    let back = SlotRef {
        region: "US".into(),
        start_s: f.start_s - 86_400,
        secs: HOUR,
    };
    let claim = |floor| {
        f.rt.block_on(f.limiter.claim_slot(&back, "e", "r", LEASE, floor))
            .expect("claiming")
    };
    let (unfloored, _) = claimed(claim(0));
    assert!(
        unfloored < t,
        "the floor is what carries the tokens on here"
    );
    f.flushall();
    let (floored, _) = claimed(claim(t));
    assert!(floored > t, "with the floor: {floored} > {t}");
    // A floor above a counter that is still there moves it on as well.
    let (next, _) = claimed(f.claim("f", floored + 1000));
    assert!(next > floored + 1000);
}

#[test]
fn a_holder_whose_record_redis_lost_keeps_its_slot_and_records_it() {
    let f = Fleet::new("lost-record");
    let (a, _) = claimed(f.claim("a", 0));
    f.flushall();
    // The renewal writes the lease again: another host sees it held.
    assert!(f.renew(a));
    assert!(matches!(f.claim("b", 0), Claim::Held { holder, .. } if holder.token == a));
    f.flushall();
    // A finish with no record records (nobody claimed the slot since).
    assert_eq!(f.finish("a", a, "complete"), Finish::Recorded);
    assert!(matches!(f.claim("b", 0), Claim::Done { by, .. } if by == holder("a", a)));
}

#[test]
fn the_limiters_clock_is_redis_time() {
    let f = Fleet::new("time");
    f.at(42.0);
    let now =
        f.rt.block_on(f.limiter.redis_now_us())
            .expect("reading TIME");
    let at = (f.start_s + 42) * 1_000_000;
    assert!(now >= at && now < at + 5_000_000, "{now} vs {at}");
}

#[test]
fn records_are_kept_36_days_after_the_slots_end_and_each_slot_apart() {
    let f = Fleet::new("kept");
    let (a, _) = claimed(f.claim("a", 0));
    assert_eq!(f.finish("a", a, "complete"), Finish::Recorded);
    let key = format!("trendsync:{{kept}}:slot:US:{}", f.start_s);
    let ttl_ms: i64 = f.server.query(redis::cmd("PTTL").arg(&key));
    let end_in_ms = (i64::from(HOUR) - 5) * 1000;
    let kept_ms = 36 * 86_400_000;
    assert!(
        ttl_ms > end_in_ms + kept_ms - 5_000 && ttl_ms <= end_in_ms + kept_ms,
        "{ttl_ms}"
    );
    // The record is JSON with the token whole (16 digits, which Lua's cjson would round).
    let json: String = f.server.query(redis::cmd("GET").arg(&key));
    let value: serde_json::Value = serde_json::from_str(&json).expect("a JSON record");
    assert_eq!(value["token"].as_i64(), Some(a));
    assert_eq!(value["state"], "done");
    assert!(
        a > 1_700_000_000_000_000,
        "seeded from the epoch in us: {a}"
    );
}

#[test]
fn the_basic_flow_on_a_redis_cluster() {
    let cluster = Cluster::start();
    let rt = runtime();
    let connect = || {
        rt.block_on(RedisLimiter::connect(
            &cluster.seed_url(0),
            "fleet",
            trendsync::clock::system(),
            None,
        ))
        .expect("connecting to the Cluster")
    };
    let a = connect();
    let b = connect();
    let now_us = rt.block_on(a.redis_now_us()).expect("reading TIME");
    // A slot that began 10 s ago, wherever the hour is: the test cannot cross its end.
    let start_s = now_us / 1_000_000 - 10;
    let offset = u32::try_from(start_s.rem_euclid(i64::from(HOUR))).expect("within an hour");
    let slot = SlotRef::at("US", start_s, HOUR, offset);
    assert_eq!(slot.start_s, start_s);
    let (token, _) = claimed(
        rt.block_on(a.claim_slot(&slot, "a", "ra", LEASE, 0))
            .expect("claiming"),
    );
    assert!(matches!(
        rt.block_on(b.claim_slot(&slot, "b", "rb", LEASE, 0)).expect("claiming"),
        Claim::Held { holder, .. } if holder.token == token
    ));
    assert!(
        rt.block_on(a.renew_slot(&slot, token, LEASE))
            .expect("renewing")
    );
    assert_eq!(
        rt.block_on(a.finish_slot(&slot, token, "a", "ra", "complete"))
            .expect("finishing"),
        Finish::Recorded
    );
    assert!(matches!(
        rt.block_on(b.claim_slot(&slot, "b", "rb", LEASE, 0)).expect("claiming"),
        Claim::Done { by, .. } if by.token == token && by.host == "a"
    ));
    let records = rt
        .block_on(b.slot_records("US", HOUR, offset, slot.start_s - 7200, slot.end_s()))
        .expect("reading the records");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].start_s, slot.start_s);
    // Every key of the budget's slots sits with the budget's own keys.
    let node = cluster.primary_for("trendsync:{fleet}:epoch");
    let key = format!("trendsync:{{fleet}}:slot:US:{}", slot.start_s);
    assert_eq!(node.port(), cluster.primary_for(&key).port());
}

// The model: random interleavings of claims, renewals, finishes, a Redis that loses its
// keys, and time, against the rules of slots.lua written out plainly.

/// The lease of the model's steps, half a second off every whole number of seconds
/// the clock moves by, so that no step lands on a lease's last instant.
const MODEL_LEASE_MS: i64 = 30_500;
const HOSTS: [&str; 3] = ["a", "b", "c"];

#[derive(Debug, Clone)]
enum Step {
    Claim(usize),
    Renew(usize),
    Finish(usize, bool),
    Flush,
    /// Seconds forward.
    Wait(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..HOSTS.len()).prop_map(Step::Claim),
        2 => (0..HOSTS.len()).prop_map(Step::Renew),
        3 => (0..HOSTS.len(), any::<bool>()).prop_map(|(h, c)| Step::Finish(h, c)),
        1 => Just(Step::Flush),
        3 => (1u16..45).prop_map(Step::Wait),
        1 => Just(Step::Wait(1200)),
    ]
}

#[derive(Debug, Clone, PartialEq)]
enum Rec {
    Held {
        token: i64,
        host: String,
        until_ms: i64,
    },
    Done {
        token: i64,
        host: String,
    },
    Missed {
        token: Option<i64>,
        late: bool,
    },
}

fn model_case(server: &RedisServer, steps: &[Step]) -> Result<(), TestCaseError> {
    static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let key = format!(
        "model{}",
        CASE.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    );
    let rt = runtime();
    let limiter = rt
        .block_on(RedisLimiter::connect(
            &server.url(),
            &key,
            trendsync::clock::system(),
            None,
        ))
        .expect("connecting");
    let start_s = unix_us("2026-11-28T14:00:00Z") / 1_000_000;
    let slot = SlotRef {
        region: "US".into(),
        start_s,
        secs: HOUR,
    };
    let end_ms = slot.end_s() * 1000;
    let lease = Duration::from_millis(u64::try_from(MODEL_LEASE_MS).expect("positive"));
    // The model's clock, in whole seconds after the slot's start; the server's is set
    // to it before every step.
    let mut now_s: i64 = 1;
    let mut rec: Option<Rec> = None;
    let mut tokens: [Option<i64>; 3] = [None; 3];
    // Each host's floor: the largest token it ever held, as its SQLite file keeps.
    let mut floors = [0i64; 3];
    let mut largest = 0i64;
    // The server's clock is set to the model's at the start and after each wait, and
    // runs on in between (less than the half second of margin the lease leaves), so
    // that it never goes back: a Redis that lost its keys and whose clock went back
    // needs each host's floor, which this model does not share between hosts.
    server.clock().set_now_us((start_s + now_s) * 1_000_000);
    let mut dones = 0;
    for s in steps {
        let now_ms = (start_s + now_s) * 1000;
        let lapsed = |until_ms: i64| until_ms < now_ms;
        match *s {
            Step::Wait(secs) => {
                now_s += i64::from(secs);
                server.clock().set_now_us((start_s + now_s) * 1_000_000);
            }
            Step::Flush => {
                server.query::<()>(&redis::cmd("FLUSHALL"));
                rec = None;
                dones = 0;
            }
            Step::Claim(h) => {
                let host = HOSTS[h];
                let got = rt
                    .block_on(limiter.claim_slot(&slot, host, &run_of(host), lease, floors[h]))
                    .expect("claiming");
                match (&rec, got) {
                    (Some(Rec::Done { token, host: by }), Claim::Done { by: got, .. }) => {
                        prop_assert_eq!((*token, by.as_str()), (got.token, got.host.as_str()));
                    }
                    (r, Claim::Ended) if now_ms >= end_ms => {
                        if let Some(Rec::Held {
                            token, until_ms, ..
                        }) = r
                            && lapsed(*until_ms)
                        {
                            rec = Some(Rec::Missed {
                                token: Some(*token),
                                late: true,
                            });
                        }
                    }
                    (
                        Some(Rec::Held {
                            token,
                            host: by,
                            until_ms,
                        }),
                        Claim::Held { holder, .. },
                    ) if by.as_str() != host && !lapsed(*until_ms) => {
                        prop_assert_eq!(*token, holder.token);
                    }
                    (
                        Some(Rec::Held {
                            token, host: by, ..
                        }),
                        Claim::Claimed { token: got, .. },
                    ) if by.as_str() == host && now_ms < end_ms => {
                        prop_assert_eq!(*token, got, "a claim again by its holder");
                        rec = Some(Rec::Held {
                            token: got,
                            host: host.into(),
                            until_ms: now_ms + MODEL_LEASE_MS,
                        });
                    }
                    (r, Claim::Claimed { token, took_over }) if now_ms < end_ms => {
                        let (prev, ok) = match r {
                            None | Some(Rec::Missed { .. }) => (None, true),
                            Some(Rec::Held {
                                token,
                                host,
                                until_ms,
                            }) => (Some((*token, host.clone())), lapsed(*until_ms)),
                            Some(Rec::Done { .. }) => (None, false),
                        };
                        prop_assert!(ok, "claimed over {:?}", r);
                        prop_assert_eq!(prev, took_over.map(|h| (h.token, h.host)));
                        prop_assert!(token > largest, "token {} after {}", token, largest);
                        prop_assert!(token > floors[h]);
                        largest = token;
                        floors[h] = token;
                        tokens[h] = Some(token);
                        rec = Some(Rec::Held {
                            token,
                            host: host.into(),
                            until_ms: now_ms + MODEL_LEASE_MS,
                        });
                    }
                    (r, got) => {
                        prop_assert!(
                            false,
                            "{} claimed over {:?} at {}: {:?}",
                            host,
                            r,
                            now_s,
                            got
                        );
                    }
                }
            }
            Step::Renew(h) => {
                let Some(token) = tokens[h] else { continue };
                let got = rt
                    .block_on(limiter.renew_slot(&slot, token, lease))
                    .expect("renewing");
                let want = match &rec {
                    None => true,
                    Some(Rec::Held { token: t, .. }) => *t == token,
                    _ => false,
                };
                prop_assert_eq!(got, want, "renewal by {} over {:?}", HOSTS[h], rec);
                if want {
                    let host = match &rec {
                        Some(Rec::Held { host, .. }) => host.clone(),
                        // Written again from the token alone.
                        _ => String::new(),
                    };
                    rec = Some(Rec::Held {
                        token,
                        host,
                        until_ms: now_ms + MODEL_LEASE_MS,
                    });
                }
            }
            Step::Finish(h, complete) => {
                let Some(token) = tokens[h] else { continue };
                let host = HOSTS[h];
                let outcome = if complete { "complete" } else { "failed" };
                let got = rt
                    .block_on(limiter.finish_slot(&slot, token, host, &run_of(host), outcome))
                    .expect("finishing");
                let records = match &rec {
                    None => true,
                    Some(Rec::Held { token: t, .. }) => *t == token,
                    _ => false,
                };
                let again = match &rec {
                    Some(Rec::Done { token: t, .. }) => *t == token,
                    Some(Rec::Missed { token: t, late }) => *t == Some(token) && !late,
                    _ => false,
                };
                if records {
                    prop_assert_eq!(&got, &Finish::Recorded);
                    if complete {
                        dones += 1;
                        prop_assert!(dones <= 1, "a second done mark");
                    }
                    rec = Some(if complete {
                        Rec::Done {
                            token,
                            host: host.into(),
                        }
                    } else {
                        Rec::Missed {
                            token: Some(token),
                            late: false,
                        }
                    });
                } else if again {
                    prop_assert_eq!(&got, &Finish::Recorded, "the same finish again");
                } else {
                    // A stale token never records.
                    prop_assert!(
                        matches!(got, Finish::Fenced { .. }),
                        "{} with token {} over {:?}: {:?}",
                        host,
                        token,
                        rec,
                        got
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        source_file: Some(file!()),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_interleavings_keep_one_holder_growing_tokens_and_no_stale_write(
        steps in prop::collection::vec(step(), 1..40)
    ) {
        thread_local! {
            static SERVER: RedisServer =
                RedisServer::start_at(unix_us("2026-11-28T14:00:00Z"));
        }
        SERVER.with(|server| model_case(server, &steps))?;
    }
}

// `status --coverage`: the binary reading the records a fleet left.

/// Marks `region`'s slot starting at `start_s` (`secs` long) fetched by `host`, on
/// `server`'s limiter of budget `key`, with its clock moved into the slot to do it;
/// `outcome` other than `complete` marks it missed instead.
pub fn record_slot(server: &RedisServer, key: &str, slot: &SlotRef, host: &str, outcome: &str) {
    let rt = runtime();
    server
        .clock()
        .set_now_us(slot.start_s * 1_000_000 + 1_000_000);
    let limiter = rt
        .block_on(RedisLimiter::connect(
            &server.url(),
            key,
            trendsync::clock::system(),
            None,
        ))
        .expect("connecting");
    let run = run_of(host);
    let (token, _) = claimed(
        rt.block_on(limiter.claim_slot(slot, host, &run, LEASE, 0))
            .expect("claiming"),
    );
    assert_eq!(
        rt.block_on(limiter.finish_slot(slot, token, host, &run, outcome))
            .expect("finishing"),
        Finish::Recorded
    );
}

/// US hourly at offset 0 and GB at minute 7, the shipped budget's key: 10:00 to 13:00
/// of US fetched by a, b, a and missed for the budget, and GB's 10:07 by b; then the
/// server's clock at 14:00:05, with a's lease on US's 14:00 slot live.
pub fn a_fleets_morning(server: &RedisServer) -> i64 {
    let t = unix_us("2026-11-28T14:00:00Z") / 1_000_000;
    let us = |h: i64| SlotRef {
        region: "US".into(),
        start_s: t - h * 3600,
        secs: HOUR,
    };
    record_slot(server, "key1", &us(4), "a", "complete");
    record_slot(server, "key1", &us(3), "b", "complete");
    record_slot(server, "key1", &us(2), "a", "complete");
    record_slot(server, "key1", &us(1), "a", "budget_exhausted");
    let gb = SlotRef {
        region: "GB".into(),
        start_s: t - 4 * 3600 + 7 * 60,
        secs: HOUR,
    };
    record_slot(server, "key1", &gb, "b", "complete");
    server.clock().set_now_us(t * 1_000_000 + 5_000_000);
    let rt = runtime();
    let limiter = rt
        .block_on(RedisLimiter::connect(
            &server.url(),
            "key1",
            trendsync::clock::system(),
            None,
        ))
        .expect("connecting");
    claimed(
        rt.block_on(limiter.claim_slot(&us(0), "a", "now", LEASE, 0))
            .expect("claiming"),
    );
    t
}

pub const FLEET_REGIONS: &str =
    "[[region]]\ncode = \"US\"\noffset = 0\n\n[[region]]\ncode = \"GB\"\noffset = 7\n";

#[test]
fn coverage_counts_each_regions_ended_slots_fetched_by_host_and_missed_with_reasons() {
    let server = RedisServer::start_at(unix_us("2026-11-28T09:00:00Z"));
    a_fleets_morning(&server);
    let mut h = crate::common::harness::Harness::new(Some(&server));
    h.regions(FLEET_REGIONS);
    let json = h
        .bare()
        .args([
            "status",
            "--coverage",
            "--since",
            "2026-11-28T10:00:00Z",
            "--json",
        ])
        .run()
        .json();
    assert_eq!(json["since"], "2026-11-28T10:00:00Z");
    assert!(
        json["until"]
            .as_str()
            .is_some_and(|u| u.starts_with("2026-11-28T14:00:0")),
        "{json}"
    );
    let us = &json["regions"][0];
    assert_eq!(us["region"], "US");
    assert_eq!(us["slot_secs"], 3600);
    assert_eq!(
        (&us["expected"], &us["fetched"], &us["missed"]),
        (&4.into(), &3.into(), &1.into())
    );
    assert_eq!(us["in_progress"], true);
    assert_eq!(us["hosts"], serde_json::json!({"a": 2, "b": 1}));
    assert_eq!(
        us["missed_slots"],
        serde_json::json!([{"slot": "2026-11-28T13:00:00Z", "reason": "budget", "host": "a",
            "detail": "the region ended budget_exhausted"}])
    );
    // GB at minute 7: 10:07, 11:07, 12:07 ended (13:07 runs to 14:07); one fetched.
    let gb = &json["regions"][1];
    assert_eq!(
        (&gb["expected"], &gb["fetched"], &gb["missed"]),
        (&3.into(), &1.into(), &2.into())
    );
    assert_eq!(gb["in_progress"], false);
    assert_eq!(gb["missed_slots"][0]["slot"], "2026-11-28T11:07:00Z");
    assert_eq!(gb["missed_slots"][0]["reason"], "no_host_ran");
    assert_eq!(gb["missed_slots"][0]["host"], serde_json::Value::Null);
    assert_eq!(json["missed"], 3);

    // The text says the same, a line per missed slot; 4 h back from 14:00:05 leaves
    // out US's 10:00.
    let text = h
        .bare()
        .args(["status", "--coverage", "--since", "4h"])
        .run()
        .stdout;
    for line in [
        "missed  US 2026-11-28T13:00:00Z: budget (host a): the region ended budget_exhausted",
        "missed  GB 2026-11-28T11:07:00Z: no_host_ran",
        "missed  GB 2026-11-28T12:07:00Z: no_host_ran",
        "3 of 6 slots missed across 2 regions",
    ] {
        assert!(text.contains(line), "{line:?} in:\n{text}");
    }
    assert!(text.contains("fetching a 1, b 1"), "{text}");
    // Further back than the records are kept, the span starts where they end.
    let json = h
        .bare()
        .args(["status", "--coverage", "--since", "2026-01-01", "--json"])
        .run()
        .json();
    assert!(
        json["since"]
            .as_str()
            .is_some_and(|s| s.starts_with("2026-10-23T14:00:0")),
        "36 days before 14:00:0x: {json}"
    );
}

#[test]
fn coverage_without_redis_is_a_configuration_error_and_with_redis_down_a_try_later() {
    let h = crate::common::harness::Harness::new(None);
    h.bare()
        .args(["status", "--coverage"])
        .status(78)
        .expect_stderr("give --redis-url")
        .run();
    h.bare()
        .args(["status", "--coverage", "--redis-url", "redis://127.0.0.1:1"])
        .status(75)
        .expect_stderr("the slot records are kept there")
        .run();
    // --since belongs to --coverage.
    h.bare()
        .args(["status", "--since", "1h"])
        .status(2)
        .expect_stderr("the following required arguments were not provided")
        .run();
}

/// The `trendsync_slots_missed_total{region="US"}` sample of the file at `path`.
fn missed_total(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).expect("reading the metrics file");
    text.lines()
        .find(|l| l.starts_with("trendsync_slots_missed_total{region=\"US\"}"))
        .unwrap_or_else(|| panic!("no missed-slots series in:\n{text}"))
        .to_owned()
}

#[test]
fn a_run_on_redis_counts_the_fleets_misses_once_each_and_keeps_them() {
    // Redis on the real clock (the run checks it against the upstream's), moved into
    // earlier hours to leave records there, then back.
    let server = RedisServer::start_at(crate::common::redis_server::real_now_us());
    let hour = crate::common::redis_server::real_now_us() / 1_000_000 / 3600 * 3600;
    let us = |h: i64| SlotRef {
        region: "US".into(),
        start_s: hour - h * 3600,
        secs: HOUR,
    };
    // 7 h back: fetched; 6 h: no record; 5 h: the upstream failed; 4 h: fetched; 3 h
    // to 1 h: no record. Before the 7 h, nothing: the fleet did not run yet.
    record_slot(&server, "key1", &us(7), "a", "complete");
    record_slot(&server, "key1", &us(5), "b", "failed");
    record_slot(&server, "key1", &us(4), "a", "complete");
    server.clock().set_shift_us(0);

    let mut h = crate::common::harness::Harness::new(Some(&server));
    h.regions("[[region]]\ncode = \"US\"\noffset = 0\npages = 1\n");
    let metrics = h.scratch.file("trendsync.prom");
    let run = || {
        h.cmd()
            .args(["run", "--metrics-file"])
            .arg(&metrics)
            .allow_stderr("missed slots of the fleet")
            // After the FLUSHALL below, the ledger is replayed.
            .allow_stderr("the window is not the one this host charged into")
            .run();
    };
    run();
    // 6 h, 5 h, 3 h, 2 h and 1 h back.
    assert_eq!(
        missed_total(&metrics),
        "trendsync_slots_missed_total{region=\"US\"} 5"
    );
    let reasons: Vec<(i64, String)> = {
        let conn = h.db();
        let mut stmt = conn
            .prepare("SELECT slot_start, reason FROM slot_misses ORDER BY slot_start")
            .expect("the table");
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("reading")
            .collect::<rusqlite::Result<_>>()
            .expect("rows")
    };
    assert_eq!(
        reasons,
        [
            (us(6).start_s, "no_host_ran".to_owned()),
            (us(5).start_s, "upstream".to_owned()),
            (us(3).start_s, "no_host_ran".to_owned()),
            (us(2).start_s, "no_host_ran".to_owned()),
            (us(1).start_s, "no_host_ran".to_owned()),
        ]
    );
    // The next run reads the same slots: nothing is counted twice.
    run();
    assert_eq!(
        missed_total(&metrics),
        "trendsync_slots_missed_total{region=\"US\"} 5"
    );
    // Redis loses its keys: the counter does not go back.
    server.query::<()>(&redis::cmd("FLUSHALL"));
    run();
    assert_eq!(
        missed_total(&metrics),
        "trendsync_slots_missed_total{region=\"US\"} 5"
    );
}

#[test]
fn a_run_on_the_embedded_limiter_reads_no_slots_and_counts_none() {
    let mut h = crate::common::harness::Harness::new(None);
    h.regions("[[region]]\ncode = \"US\"\noffset = 0\npages = 1\n");
    let metrics = h.scratch.file("trendsync.prom");
    h.cmd().args(["run", "--metrics-file"]).arg(&metrics).run();
    assert_eq!(
        missed_total(&metrics),
        "trendsync_slots_missed_total{region=\"US\"} 0"
    );
}

#[test]
fn the_readme_acl_is_enough_for_the_slots() {
    let server = RedisServer::start();
    crate::redis_acl::create_user(&server, "acl");
    let rt = runtime();
    let limiter = rt
        .block_on(RedisLimiter::connect(
            &crate::redis_acl::as_user(&server.url()),
            "acl",
            trendsync::clock::system(),
            None,
        ))
        .expect("connecting as the README's user");
    let now_s = rt.block_on(limiter.redis_now_us()).expect("reading TIME") / 1_000_000;
    // A slot that began 10 s ago: the test cannot cross its end.
    let slot = SlotRef {
        region: "US".into(),
        start_s: now_s - 10,
        secs: HOUR,
    };
    let (token, _) = claimed(
        rt.block_on(limiter.claim_slot(&slot, "a", "r", LEASE, 0))
            .expect("claiming"),
    );
    assert!(
        rt.block_on(limiter.renew_slot(&slot, token, LEASE))
            .expect("renewing")
    );
    // A script cache flushed meanwhile is loaded again.
    server.query::<()>(redis::cmd("SCRIPT").arg("FLUSH"));
    assert_eq!(
        rt.block_on(limiter.finish_slot(&slot, token, "a", "r", "complete"))
            .expect("finishing"),
        Finish::Recorded
    );
    rt.block_on(limiter.miss_slot(&slot.next(), "no_host_ran", "a", None))
        .expect("recording a miss");
    let records = rt
        .block_on(limiter.slot_records(
            "US",
            HOUR,
            u32::try_from(slot.start_s.rem_euclid(3600)).expect("within an hour"),
            slot.start_s - 3600,
            slot.end_s() + 3600,
        ))
        .expect("reading");
    assert_eq!(records.len(), 2);
}

/// Claims, sees held, finishes and reads back on `url` with `tls`, as hosts `a` and `b`
/// of budget `key`.
async fn basic_flow(url: &str, tls: &trendsync::quota::TlsFiles, key: &str) {
    let connect = || async {
        RedisLimiter::connect_with_tls(url, tls, key, trendsync::clock::system(), None)
            .await
            .unwrap_or_else(|e| panic!("connecting to {url}: {e}"))
    };
    let (a, b) = (connect().await, connect().await);
    let now_s = a.redis_now_us().await.expect("reading TIME") / 1_000_000;
    // A slot that began 10 s ago: the test cannot cross its end.
    let offset = u32::try_from((now_s - 10).rem_euclid(3600)).expect("within an hour");
    let slot = SlotRef::at("US", now_s - 10, HOUR, offset);
    let (token, _) = claimed(
        a.claim_slot(&slot, "a", "ra", LEASE, 0)
            .await
            .expect("claiming"),
    );
    assert!(
        matches!(
            b.claim_slot(&slot, "b", "rb", LEASE, 0).await.expect("claiming"),
            Claim::Held { holder, .. } if holder.token == token
        ),
        "{url}"
    );
    assert!(a.renew_slot(&slot, token, LEASE).await.expect("renewing"));
    assert_eq!(
        a.finish_slot(&slot, token, "a", "ra", "complete")
            .await
            .expect("finishing"),
        Finish::Recorded,
        "{url}"
    );
    assert!(
        matches!(
            b.claim_slot(&slot, "b", "rb", LEASE, 0).await.expect("claiming"),
            Claim::Done { by, .. } if by.token == token
        ),
        "{url}"
    );
    let records = b
        .slot_records("US", HOUR, offset, slot.start_s, slot.end_s())
        .await
        .expect("reading");
    assert_eq!(records.len(), 1, "{url}");
}

/// The leases in the README's other deployment forms: mutual TLS, Sentinel over TLS
/// and a Cluster over TLS, each reached as the runs would reach it.
#[test]
fn the_basic_flow_over_tls_sentinel_and_a_tls_cluster() {
    use crate::conformance::Deployment;
    let rt = runtime();
    for (form, deployment) in [
        ("tls", Deployment::tls()),
        ("sentinel", Deployment::tls_sentinel()),
        ("cluster", Deployment::cluster()),
    ] {
        for (i, (url, tls)) in deployment.urls().iter().enumerate().take(2) {
            rt.block_on(basic_flow(url, tls, &format!("{form}{i}")));
        }
    }
}
