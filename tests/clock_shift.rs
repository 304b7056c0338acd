//! The tests' own tool for the limiter's clock: a redis-server whose wall clock is
//! moved by the LD_PRELOAD shim (`common/clock_shift.c`) reads the chosen time in
//! `TIME`, in a script's `redis.call('TIME')` and in key expiry, and follows every
//! jump at once, across a restart too.

use crate::common::RedisServer;
use crate::common::redis_server::{real_now_us, unix_us};

const SECOND_US: i64 = 1_000_000;
const HOUR_US: i64 = 3600 * SECOND_US;

/// `TIME`, in microseconds since the Unix epoch.
fn time_us(server: &RedisServer) -> i64 {
    let (s, us): (i64, i64) = server.query(&redis::cmd("TIME"));
    s * SECOND_US + us
}

/// `TIME` as a script reads it, the way the limiter's script does.
fn script_time_us(server: &RedisServer) -> i64 {
    let (s, us): (i64, i64) =
        server.query(redis::cmd("EVAL").arg("return redis.call('TIME')").arg(0));
    s * SECOND_US + us
}

/// `at` is at or after `from`, by less than a second.
fn assert_within_a_second(what: &str, at: i64, from: i64) {
    assert!(
        (from..from + SECOND_US).contains(&at),
        "{what} reads {at} µs, {} µs from {from}",
        at - from
    );
}

#[test]
fn time_and_script_time_read_the_chosen_moment() {
    let at = unix_us("2026-03-08T07:59:58Z");
    let server = RedisServer::start_at(at);
    assert_within_a_second("TIME", time_us(&server), at);
    assert_within_a_second("a script's TIME", script_time_us(&server), at);
    let clock = server.clock();
    let now = clock.now_us();
    assert_within_a_second("the handle's now", now, at);
    // The server and the handle agree to well within a second.
    let seen = time_us(&server);
    assert!(
        (now..now + SECOND_US / 2).contains(&seen),
        "{seen} vs {now}"
    );
}

#[test]
fn a_server_without_the_shim_keeps_the_real_clock() {
    let server = RedisServer::start();
    let before = real_now_us();
    assert_within_a_second("TIME", time_us(&server), before);
    assert_within_a_second("a script's TIME", script_time_us(&server), before);
}

#[test]
fn a_jump_shows_in_the_next_time_forward_and_back() {
    let at = unix_us("2026-03-08T07:59:58Z");
    let server = RedisServer::start_at(at);
    let clock = server.clock();
    clock.advance_us(25 * HOUR_US);
    assert_within_a_second("TIME after +25 h", time_us(&server), at + 25 * HOUR_US);
    assert_within_a_second(
        "a script's TIME after +25 h",
        script_time_us(&server),
        at + 25 * HOUR_US,
    );
    let back = unix_us("2026-11-01T08:59:59Z");
    clock.set_now_us(back);
    assert_within_a_second("TIME set back", time_us(&server), back);
    assert_within_a_second("a script's TIME set back", script_time_us(&server), back);
    // A shift with a negative fraction of a second lands on the right microsecond.
    clock.set_shift_us(-1_500_001);
    let real = real_now_us();
    assert_within_a_second("TIME 1.5 s behind", time_us(&server), real - 1_500_001);
}

#[test]
fn time_never_goes_back_while_the_shift_stands() {
    let server = RedisServer::start_at(unix_us("2026-03-08T07:59:59Z"));
    // A fraction of a second just short of a whole one: nearly every reading carries
    // a second over from the microseconds.
    let shift = HOUR_US + 999_999;
    server.clock().set_shift_us(shift);
    let mut conn = server.connection();
    let mut last = 0;
    for _ in 0..500 {
        let real = real_now_us();
        let (s, us): (i64, i64) = redis::cmd("TIME").query(&mut conn).expect("TIME");
        let now = s * SECOND_US + us;
        assert_within_a_second("TIME", now, real + shift);
        assert!(now >= last, "TIME went back from {last} to {now}");
        last = now;
    }
}

#[test]
fn key_expiry_follows_the_moved_clock() {
    let server = RedisServer::start_at(unix_us("2026-03-08T07:59:58Z"));
    let set_px = |key: &str, ms: u64| {
        let _: () = server.query(redis::cmd("SET").arg(key).arg("v").arg("PX").arg(ms));
    };
    set_px("short", 1000);
    set_px("long", 5000);
    // Set by a script, as the limiter sets its keys' expiry.
    let _: () = server.query(
        redis::cmd("EVAL")
            .arg("redis.call('SET', KEYS[1], 'v', 'PX', ARGV[1])")
            .arg(1)
            .arg("scripted")
            .arg(1000),
    );
    let exists = |key: &str| -> bool { server.query(redis::cmd("EXISTS").arg(key)) };
    assert!(exists("short") && exists("scripted"), "before the jump");
    server.clock().advance_us(2 * SECOND_US);
    assert!(!exists("short"), "a 1 s key outlived a 2 s jump");
    assert!(
        !exists("scripted"),
        "a script's 1 s key outlived a 2 s jump"
    );
    let pttl: i64 = server.query(redis::cmd("PTTL").arg("long"));
    assert!(
        (2000..3000).contains(&pttl),
        "the 5 s key has {pttl} ms left"
    );
    // A script sees the same: the key is gone for it too.
    let seen: i64 = server.query(
        redis::cmd("EVAL")
            .arg("return redis.call('EXISTS', KEYS[1])")
            .arg(1)
            .arg("short"),
    );
    assert_eq!(seen, 0);
}

#[test]
fn the_moved_clock_survives_a_restart() {
    let at = unix_us("2026-03-08T07:59:58Z");
    let mut server = RedisServer::start_at(at);
    let clock = server.clock();
    clock.advance_us(25 * HOUR_US);
    server.restart();
    assert_within_a_second("TIME after a restart", time_us(&server), at + 25 * HOUR_US);
    assert_within_a_second(
        "a script's TIME after a restart",
        script_time_us(&server),
        at + 25 * HOUR_US,
    );
    // The handle taken before the restart still moves the new process's clock.
    clock.advance_us(HOUR_US);
    assert_within_a_second("TIME moved again", time_us(&server), at + 26 * HOUR_US);
}
