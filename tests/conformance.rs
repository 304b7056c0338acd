//! One conformance suite for both limiters: every scenario runs against the embedded
//! limiter in a temporary SQLite file and against real `redis-server` processes in
//! every deployment form of the README, "Redis deployments": one server of its own per scenario,
//! and, shared by all scenarios (each with a budget key of its own), a TLS server with
//! mutual TLS, a Sentinel set and a Cluster (plain and mutual TLS on every node), which
//! each scenario reaches through a different seed node and protocol. Each shared form
//! also runs the 30-process race and checks the README's ACL.

use std::sync::Arc;
use std::time::Duration;

use trendsync::clock::{Clock, ManualClock, Micros, SystemClock};
use trendsync::quota::{
    Charge, Decision, EmbeddedLimiter, Limiter, Part, PolicyRef, RedisLimiter, Status, TlsFiles,
};

use crate::common::redis_deployments::{Cluster, SentinelSet, TlsCerts};
use crate::common::redis_server::Options;
use crate::common::{RedisServer, Scratch};

const S: i64 = 1_000_000;

/// A deployment shared by every scenario of one form.
pub enum Deployment {
    Tls(RedisServer),
    Sentinel(SentinelSet),
    Cluster(Cluster),
}

impl Deployment {
    pub fn tls() -> Deployment {
        Deployment::Tls(RedisServer::start_with(Options {
            tls: Some(TlsCerts::generate()),
            ..Options::default()
        }))
    }

    pub fn sentinel() -> Deployment {
        Deployment::Sentinel(SentinelSet::start())
    }

    /// A Sentinel set that speaks only mutual TLS, reached with `rediss+sentinel://`.
    pub fn tls_sentinel() -> Deployment {
        Deployment::Sentinel(SentinelSet::start_with(Some(TlsCerts::generate())))
    }

    /// A Cluster that speaks TLS (mutual, between its nodes too) and plain TCP, so
    /// that both `rediss+cluster://` and `redis+cluster://` clients share it.
    pub fn cluster() -> Deployment {
        Deployment::Cluster(Cluster::start_with(Some(TlsCerts::generate())))
    }

    /// The URLs a client may be given, with their TLS files: a Cluster's every node,
    /// one at a time, over TLS and plain.
    pub fn urls(&self) -> Vec<(String, TlsFiles)> {
        match self {
            Deployment::Tls(server) => vec![(
                server.url(),
                server.certs().map(TlsCerts::files).unwrap_or_default(),
            )],
            Deployment::Sentinel(set) => vec![(set.url(), set.tls_files())],
            Deployment::Cluster(cluster) => (0..cluster.nodes.len())
                .flat_map(|i| {
                    let mut both = vec![(cluster.seed_url(i), TlsFiles::default())];
                    if let Some(url) = cluster.tls_seed_url(i) {
                        both.push((url, cluster.client_tls()));
                    }
                    both
                })
                .collect(),
        }
    }

    /// The binary's arguments for the `i`th client.
    pub fn client_args(&self, i: usize) -> Vec<String> {
        let urls = self.urls();
        let (url, tls) = &urls[i % urls.len()];
        let mut args = vec!["--redis-url".to_owned(), url.clone()];
        for (flag, path) in [
            ("--redis-ca-file", &tls.ca_file),
            ("--redis-client-cert", &tls.client_cert),
            ("--redis-client-key", &tls.client_key),
        ] {
            if let Some(path) = path {
                args.extend([flag.to_owned(), path.display().to_string()]);
            }
        }
        args
    }

    /// Every redis-server of the deployment.
    pub fn nodes(&self) -> Vec<&RedisServer> {
        match self {
            Deployment::Tls(server) => vec![server],
            Deployment::Sentinel(set) => set.nodes.iter().collect(),
            Deployment::Cluster(cluster) => cluster.nodes.iter().collect(),
        }
    }

    /// Runs `cmd` where the key it names lives (the primary).
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        match self {
            Deployment::Tls(server) => server.query(cmd),
            Deployment::Sentinel(set) => set.primary().query(cmd),
            Deployment::Cluster(cluster) => cluster.query(cmd),
        }
    }
}

enum Store {
    Redis(RedisServer),
    Shared(Arc<Deployment>),
    /// The embedded limiter decides by a clock the test moves: no sleeping.
    Embedded(Scratch, Arc<ManualClock>),
}

/// A limiter under test, with what it stores in reach.
struct Backend {
    store: Store,
    key: String,
    limiter: Limiter,
    /// The URLs, with their TLS files, clients of a Redis store use.
    urls: Vec<(String, TlsFiles)>,
}

impl Backend {
    async fn redis() -> Backend {
        let server = RedisServer::start();
        let limiter = Limiter::Redis(
            RedisLimiter::connect(&server.url(), "conf", trendsync::clock::system(), None)
                .await
                .expect("connecting to redis"),
        );
        Backend {
            urls: vec![(server.url(), TlsFiles::default())],
            store: Store::Redis(server),
            key: "conf".into(),
            limiter,
        }
    }

    /// A scenario's budget on a shared deployment, through its `seed`th URL.
    async fn shared(deployment: Arc<Deployment>, key: &str, seed: usize) -> Backend {
        let mut urls = deployment.urls();
        let n = urls.len();
        urls.rotate_left(seed % n);
        let (url, tls) = &urls[0];
        let limiter = Limiter::Redis(connect(url, tls, key).await);
        Backend {
            store: Store::Shared(deployment),
            key: key.into(),
            limiter,
            urls,
        }
    }

    /// Runs `cmd` on the Redis that holds this budget.
    fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        match &self.store {
            Store::Redis(server) => server.query(cmd),
            Store::Shared(d) => d.query(cmd),
            Store::Embedded(..) => panic!("the embedded limiter has no Redis"),
        }
    }

    fn is_redis(&self) -> bool {
        !matches!(self.store, Store::Embedded(..))
    }

    fn redis_key(&self, suffix: &str) -> String {
        format!("trendsync:{{{}}}:{suffix}", self.key)
    }

    fn embedded() -> Backend {
        let scratch = Scratch::new();
        let clock = Arc::new(ManualClock::starting_at(SystemClock.now()));
        let limiter = Limiter::Embedded(
            EmbeddedLimiter::open(&scratch.file("t.db"), "conf", clock.clone(), None)
                .expect("opening the embedded limiter"),
        );
        Backend {
            store: Store::Embedded(scratch, clock),
            key: "conf".into(),
            limiter,
            urls: Vec::new(),
        }
    }

    /// Another client of the same store, as another process would have; the `i`th
    /// goes through the `i`th URL (on a Cluster, each node in turn).
    async fn another(&self, i: usize) -> Limiter {
        match &self.store {
            Store::Embedded(scratch, clock) => Limiter::Embedded(
                EmbeddedLimiter::open(&scratch.file("t.db"), &self.key, clock.clone(), None)
                    .expect("opening"),
            ),
            _ => {
                let (url, tls) = &self.urls[i % self.urls.len()];
                Limiter::Redis(connect(url, tls, &self.key).await)
            }
        }
    }

    /// How many entries the store physically holds for `policy`.
    fn stored_entries(&self, policy: &str) -> usize {
        match &self.store {
            Store::Redis(_) | Store::Shared(_) => {
                self.query(redis::cmd("ZCARD").arg(self.redis_key(policy)))
            }
            Store::Embedded(scratch, _) => {
                let conn = rusqlite::Connection::open(scratch.file("t.db"))
                    .expect("opening the test database");
                let n: i64 = conn
                    .query_row(
                        "SELECT COUNT(*) FROM quota_entry WHERE policy = ?1",
                        [format!("{}:{policy}", self.key)],
                        |r| r.get(0),
                    )
                    .expect("counting entries");
                usize::try_from(n).unwrap_or(0)
            }
        }
    }

    /// Lets `d` pass on the limiter's clock: Redis's is real, so it is slept.
    async fn wait(&self, d: Duration) {
        match &self.store {
            Store::Redis(_) | Store::Shared(_) => tokio::time::sleep(d).await,
            Store::Embedded(_, clock) => {
                clock.advance(d);
            }
        }
    }

    async fn status(&self, policies: &[(&str, Duration)]) -> Status {
        let refs: Vec<PolicyRef> = policies
            .iter()
            .map(|(n, w)| PolicyRef {
                kind: trendsync::quota::Kind::Bucket,
                methods: methods_of(n),
                name: (*n).into(),
                window: (*w).into(),
            })
            .collect();
        let names: Vec<&str> = policies.iter().map(|(n, _)| *n).collect();
        self.limiter
            .status(&refs, &names)
            .await
            .expect("reading the status")
    }
}

/// A client of a Redis deployment. The scenarios test what the limiter decides, not
/// how fast a connection is set up: on a loaded machine a TLS Sentinel connection (three
/// handshakes) can outlast the product's 1 s connect timeout, so a few tries are given.
async fn connect(url: &str, tls: &TlsFiles, key: &str) -> RedisLimiter {
    let mut tries = 0;
    loop {
        match RedisLimiter::connect_with_tls(url, tls, key, trendsync::clock::system(), None).await
        {
            Ok(limiter) => return limiter,
            Err(e) if tries < 4 && e.is_unavailable() => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("connecting to {url}: {e}"),
        }
    }
}

/// The methods of the buckets these scenarios charge, whose blocks make the bucket's.
fn methods_of(bucket: &str) -> Vec<String> {
    match bucket {
        "budget" => vec!["videos.list".into()],
        "search" => vec!["search.list".into()],
        _ => Vec::new(),
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A charge with parts given as (policy, window, max, units).
fn charge(id: &str, method: &str, parts: &[(&str, Duration, u64, u64)]) -> Charge {
    Charge {
        calls: 1,
        bucket: "budget".into(),
        id: id.into(),
        method: method.into(),
        units: parts.first().map_or(0, |p| p.3),
        parts: parts
            .iter()
            .map(|(policy, window, max, units)| Part {
                kind: trendsync::quota::Kind::Bucket,
                policy: (*policy).into(),
                window: (*window).into(),
                max: *max,
                units: *units,
            })
            .collect(),
    }
}

async fn grant(b: &Backend, c: &Charge) {
    let d = b.limiter.charge(c).await.expect("the limiter answers");
    assert!(d.granted, "{} should be granted: {d:?}", c.id);
}

/// Runs each scenario against every backend: a test per scenario on the embedded
/// limiter and on a standalone Redis of its own; and one test per shared deployment
/// form that runs every scenario at once, each on a budget of its own, then the race.
macro_rules! conformance {
    (both: [$($name:ident),* $(,)?], redis: [$($redis_only:ident),* $(,)?] $(,)?) => {
        mod redis_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::redis().await).await;
                }
            )*
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $redis_only() {
                    super::$redis_only(super::Backend::redis().await).await;
                }
            )*
        }
        mod embedded_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::embedded()).await;
                }
            )*
        }
        /// Every scenario on one shared deployment, at once, then (if `race`) the race,
        /// then the README's ACL.
        async fn on_shared(deployment: Deployment, race: bool, bucket_race: bool) {
            let deployment = std::sync::Arc::new(deployment);
            let mut tasks = Vec::new();
            let mut seed = 0;
            $(
                seed += 1;
                tasks.push((stringify!($name), tokio::spawn($name(
                    Backend::shared(deployment.clone(), stringify!($name), seed).await,
                ))));
            )*
            $(
                seed += 1;
                tasks.push((stringify!($redis_only), tokio::spawn($redis_only(
                    Backend::shared(deployment.clone(), stringify!($redis_only), seed).await,
                ))));
            )*
            let _ = seed;
            for (name, task) in tasks {
                if let Err(e) = task.await {
                    eprintln!("scenario {name} failed");
                    std::panic::resume_unwind(e.into_panic());
                }
            }
            let d = deployment.clone();
            tokio::task::spawn_blocking(move || {
                if !race {
                    return;
                }
                crate::budget_cli::racing_processes_grant_exactly_ten_through(
                    "race",
                    |i| d.client_args(i),
                );
                if bucket_race {
                    crate::budget_cli::racing_processes_fill_each_bucket_exactly_through(
                        "bucket-race",
                        |i| d.client_args(i),
                    );
                }
            })
            .await
            .expect("the race");
            let d = deployment.clone();
            tokio::task::spawn_blocking(move || {
                for node in d.nodes() {
                    crate::redis_acl::create_user(node, "acl");
                }
                let mut args = d.client_args(1);
                args[1] = crate::redis_acl::as_user(&args[1]);
                crate::redis_acl::charge_read_and_reload("acl", args, || {
                    let () = d.query(redis::cmd("SCRIPT").arg("FLUSH"));
                });
            })
            .await
            .expect("the README's ACL");
        }
        mod tls_backend {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_scenario_and_the_race() {
                // Not the race per bucket: thirty more TLS handshakes at once can outlast
                // the 1 s connect timeout on a loaded 2-core machine (seen at a load of
                // 14); the race above covers TLS, and the others race each bucket.
                super::on_shared(super::Deployment::tls(), true, false).await;
            }
        }
        mod sentinel_backend {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_scenario_and_the_race() {
                super::on_shared(super::Deployment::sentinel(), true, true).await;
            }
        }
        /// Without the race: 30 processes each making three TLS handshakes at once
        /// (a Sentinel, the primary's role, the primary) outlast the product's 1 s
        /// connect timeout on a loaded 2-core machine, which is the timeout doing its
        /// job, not a fault of the form.
        mod tls_sentinel_backend {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_scenario() {
                super::on_shared(super::Deployment::tls_sentinel(), false, false).await;
            }
        }
        mod cluster_backend {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn every_scenario_and_the_race() {
                super::on_shared(super::Deployment::cluster(), true, true).await;
            }
        }
    };
}

conformance!(
    both: [
        a_weighted_charge_is_one_entry,
        all_or_nothing_across_policies_and_the_strictest_wait_wins,
        retry_after_is_exact_for_a_weighted_charge,
        the_same_charge_twice_counts_once,
        a_replayed_call_counts_once_at_its_original_age,
        idle_windows_expire_by_themselves,
        the_window_slides_across_a_fixed_window_boundary,
        a_block_denies_every_charge_until_it_ends,
        concurrent_charges_grant_exactly_what_fits,
        buckets_fill_apart_with_a_limit_across_them,
        a_block_stops_only_its_own_bucket,
        concurrent_charges_to_two_buckets_grant_exactly_what_fits_in_each,
    ],
    redis: [charges_survive_a_script_flush],
);

async fn a_weighted_charge_is_one_entry(b: Backend) {
    grant(
        &b,
        &charge("small", "videos.list", &[("budget", secs(60), 1000, 1)]),
    )
    .await;
    b.wait(Duration::from_millis(1)).await;
    grant(
        &b,
        &charge("big", "search.list", &[("budget", secs(60), 1000, 100)]),
    )
    .await;
    let st = b.status(&[("budget", secs(60))]).await;
    assert_eq!(st.policies[0].used, 101);
    let listed: Vec<(u64, String)> = st.policies[0]
        .entries
        .iter()
        .flatten()
        .map(|e| (e.units, e.method.clone()))
        .collect();
    assert_eq!(
        listed,
        vec![
            (1, "videos.list".to_owned()),
            (100, "search.list".to_owned())
        ]
    );
    // A 100-unit call is stored as one entry, like a 1-unit call.
    assert_eq!(b.stored_entries("budget"), 2);
}

async fn all_or_nothing_across_policies_and_the_strictest_wait_wins(b: Backend) {
    let search = |id: &str| {
        charge(
            id,
            "search.list",
            &[
                ("budget", secs(60), 1000, 100),
                ("search", secs(10), 200, 100),
            ],
        )
    };
    grant(&b, &search("s1")).await;
    grant(&b, &search("s2")).await;
    // The narrow limit is full: denied by it, and the budget is not charged either.
    let d = b.limiter.charge(&search("s3")).await.expect("answer");
    assert!(!d.granted);
    assert_eq!(d.denied_by.as_deref(), Some("search"));
    let wait = d.retry_after.expect("a wait");
    assert!(
        wait > secs(9) && wait <= secs(10),
        "search frees within its 10 s window, got {wait:?}"
    );
    let st = b
        .status(&[("budget", secs(60)), ("search", secs(10))])
        .await;
    assert_eq!((st.policies[0].used, st.policies[1].used), (200, 200));
    assert_eq!(b.stored_entries("budget"), 2);

    // Fill the budget too: now both say no, and the budget's longer wait wins.
    grant(
        &b,
        &charge("fill", "videos.list", &[("budget", secs(60), 1000, 800)]),
    )
    .await;
    let d = b.limiter.charge(&search("s4")).await.expect("answer");
    assert_eq!(d.denied_by.as_deref(), Some("budget"));
    let wait = d.retry_after.expect("a wait");
    assert!(
        wait > secs(59) && wait <= secs(60),
        "the budget frees after its 60 s window, got {wait:?}"
    );
    assert_eq!(d.used(), 1000);
    assert_eq!(d.remaining(), 0);
}

async fn retry_after_is_exact_for_a_weighted_charge(b: Backend) {
    let w = secs(60);
    for i in 0..5 {
        grant(
            &b,
            &charge(&format!("one-{i}"), "videos.list", &[("budget", w, 150, 1)]),
        )
        .await;
        b.wait(Duration::from_millis(1)).await;
    }
    grant(
        &b,
        &charge("hundred", "search.list", &[("budget", w, 150, 100)]),
    )
    .await;
    // 105 used; another 100 needs 55 units to leave: the five 1-unit entries are not
    // enough, so it waits for the 100-unit entry, not for the oldest entry.
    let d = b
        .limiter
        .charge(&charge("asks", "search.list", &[("budget", w, 150, 100)]))
        .await
        .expect("answer");
    assert!(!d.granted);
    let st = b.status(&[("budget", w)]).await;
    let entries = st.policies[0].entries.clone().unwrap_or_default();
    assert_eq!(entries.len(), 6);
    let oldest = entries[0].at_us;
    let hundred = entries[5].at_us;
    // The decision's own clock, recovered from when its newest entry leaves.
    let empty_in = d.parts[0].empty_in.expect("entries in the window");
    let decided_at = hundred + 60 * S - i64::try_from(empty_in.as_micros()).unwrap_or(0);
    let expected = Duration::from_micros(u64::try_from(hundred + 60 * S - decided_at).unwrap_or(0));
    assert_eq!(d.retry_after, Some(expected));
    let oldest_expiry =
        Duration::from_micros(u64::try_from(oldest + 60 * S - decided_at).unwrap_or(0));
    assert_eq!(d.parts[0].next_free, Some(oldest_expiry));
    assert!(hundred > oldest, "entries are ordered by time");
}

async fn the_same_charge_twice_counts_once(b: Backend) {
    let c = charge(
        "run1-7",
        "search.list",
        &[
            ("budget", secs(60), 1000, 100),
            ("search", secs(60), 500, 100),
        ],
    );
    grant(&b, &c).await;
    // A retry after a dropped connection sends the same charge again.
    let again = b.limiter.charge(&c).await.expect("answer");
    assert!(again.granted && again.duplicate);
    let st = b
        .status(&[("budget", secs(60)), ("search", secs(60))])
        .await;
    assert_eq!((st.policies[0].used, st.policies[1].used), (100, 100));
    assert_eq!(b.stored_entries("budget"), 1);
    // Sent again once the window is full, it is still the same, recorded charge.
    grant(
        &b,
        &charge("filler", "videos.list", &[("budget", secs(60), 1000, 900)]),
    )
    .await;
    let late = b.limiter.charge(&c).await.expect("answer");
    assert!(late.granted && late.duplicate, "{late:?}");
    assert_eq!(
        b.status(&[("budget", secs(60))]).await.policies[0].used,
        1000
    );
}

async fn a_replayed_call_counts_once_at_its_original_age(b: Backend) {
    let w = secs(60);
    grant(&b, &charge("full", "videos.list", &[("budget", w, 10, 10)])).await;
    // Made 30 s ago while the limiter was down: counted although the window is full.
    let late = charge("journal-1", "videos.list", &[("budget", w, 10, 3)]);
    for _ in 0..2 {
        let d = b
            .limiter
            .record_past(&late, secs(30))
            .await
            .expect("answer");
        assert!(d.granted);
    }
    let st = b.status(&[("budget", w)]).await;
    assert_eq!(st.policies[0].used, 13);
    // It leaves the window 30 s from now, 60 s after it was made.
    let next_free = st.policies[0].next_free.expect("entries");
    assert!(
        next_free > secs(29) && next_free <= secs(30),
        "{next_free:?}"
    );
    // Older than the window: nothing left to count.
    b.limiter
        .record_past(
            &charge("journal-2", "videos.list", &[("budget", w, 10, 5)]),
            secs(61),
        )
        .await
        .expect("answer");
    assert_eq!(b.status(&[("budget", w)]).await.policies[0].used, 13);
}

async fn idle_windows_expire_by_themselves(b: Backend) {
    let w = Duration::from_millis(1500);
    grant(&b, &charge("a", "videos.list", &[("budget", w, 10, 1)])).await;
    if b.is_redis() {
        // A window and its slack (a tenth of it, at most a second) after the grant.
        for key in [b.redis_key("budget:total"), b.redis_key("budget:oldest")] {
            let ttl: i64 = b.query(redis::cmd("PTTL").arg(&key));
            assert!(
                ttl > 1000 && ttl <= 1650,
                "{key} expires with its window, PTTL {ttl}"
            );
        }
        // The entries stay 31 days (the longest window), to be counted again under
        // another costs file, and the set a week longer, to outlive a Redis clock
        // that jumps ahead.
        let ttl: i64 = b.query(redis::cmd("PTTL").arg(b.redis_key("budget")));
        let days = 24 * 3_600_000;
        assert!(
            ttl > (30 + 7) * days && ttl <= (31 + 7) * days,
            "the set outlives its entries' 31 days by a week, PTTL {ttl}"
        );
    }
    b.wait(Duration::from_millis(1700)).await;
    match &b.store {
        Store::Redis(_) | Store::Shared(_) => {
            let n: i64 = b.query(
                redis::cmd("EXISTS")
                    .arg(b.redis_key("budget:total"))
                    .arg(b.redis_key("budget:oldest")),
            );
            assert_eq!(n, 0, "the window's count is gone after it");
        }
        Store::Embedded(..) => {
            // Any later charge sweeps every expired entry, of any policy.
            grant(
                &b,
                &charge("other", "videos.list", &[("elsewhere", secs(60), 10, 1)]),
            )
            .await;
            assert_eq!(b.stored_entries("budget"), 0);
        }
    }
    assert_eq!(b.status(&[("budget", w)]).await.policies[0].used, 0);
}

async fn the_window_slides_across_a_fixed_window_boundary(b: Backend) {
    // A short window, so that Redis (on its real clock) waits little for a boundary.
    let w = secs(3);
    let period = 3 * S;
    let one = |id: String| charge(&id, "videos.list", &[("budget", w, 10, 1)]);
    // Wait on the limiter's own clock until 1 s before a 3 s boundary.
    let now = b.status(&[("budget", w)]).await.now.as_i64();
    let into = now.rem_euclid(period);
    let target = 2 * S;
    let wait = if into <= target {
        target - into
    } else {
        period - into + target
    };
    b.wait(Duration::from_micros(u64::try_from(wait).unwrap_or(0)))
        .await;
    for i in 0..10 {
        grant(&b, &one(format!("burst1-{i}"))).await;
    }
    // The fixed window the first burst fell in ends here; go just past it, by the
    // limiter's clock, as a second burst would.
    let st = b.status(&[("budget", w)]).await;
    let first = st.policies[0]
        .entries
        .as_deref()
        .unwrap_or_default()
        .first()
        .map(|e| e.at_us)
        .expect("entries");
    let boundary = (first.div_euclid(period) + 1) * period;
    loop {
        let now = b.status(&[("budget", w)]).await.now.as_i64();
        if now > boundary + 100_000 {
            break;
        }
        b.wait(Duration::from_micros(
            u64::try_from(boundary + 100_000 - now)
                .unwrap_or(0)
                .max(1_000),
        ))
        .await;
    }
    // A fixed-window counter would have reset at the boundary and let this through.
    let d = b
        .limiter
        .charge(&one("burst2-0".into()))
        .await
        .expect("answer");
    assert!(
        !d.granted,
        "the second burst must wait for the first to slide out: {d:?}"
    );
    let st = b.status(&[("budget", w)]).await;
    assert_ne!(
        first.div_euclid(period),
        st.now.as_i64().div_euclid(period),
        "the two bursts straddle a fixed-window boundary"
    );
    let wait = d.retry_after.expect("a wait");
    assert!(
        wait > Duration::ZERO && wait < w,
        "the first burst leaves 3 s after it came: {wait:?}"
    );
    assert_eq!(st.policies[0].used, 10);
}

async fn a_block_denies_every_charge_until_it_ends(b: Backend) {
    let now = b.status(&[("budget", secs(60))]).await.now.as_i64();
    b.limiter
        .block_until(&methods_of("budget"), Micros::new(now + 1_500_000))
        .await
        .expect("blocking");
    let d = b
        .limiter
        .charge(&charge("a", "videos.list", &[("budget", secs(60), 10, 1)]))
        .await
        .expect("answer");
    assert_eq!(d.denied_by.as_deref(), Some("upstream"));
    assert!(
        d.retry_after
            .is_some_and(|w| w <= Duration::from_millis(1500))
    );
    assert_eq!(
        b.status(&[("budget", secs(60))]).await.blocked_until_us(),
        Some(Micros::new(now + 1_500_000))
    );
    b.wait(Duration::from_millis(1600)).await;
    grant(
        &b,
        &charge("a", "videos.list", &[("budget", secs(60), 10, 1)]),
    )
    .await;
    assert_eq!(
        b.status(&[("budget", secs(60))]).await.blocked_until_us(),
        None
    );
}

/// `c` charged through `limiter`, asked again with the same id while the limiter
/// does not answer in time (a loaded machine can outlast the response timeout):
/// a charge that landed unanswered is then a duplicate, granted, so the race's
/// counts stay exact, as a run's journal replay keeps them.
async fn charge_until_answered(limiter: &Limiter, c: &Charge) -> Decision {
    let mut tries = 1;
    loop {
        match limiter.charge(c).await {
            Err(e) if e.is_unavailable() && tries < 5 => tries += 1,
            answer => return answer.expect("an answer within five tries"),
        }
    }
}

/// Thirty clients of `b`'s store, as thirty processes would have.
async fn thirty_clients(b: &Backend) -> Vec<Limiter> {
    let mut clients = Vec::new();
    for i in 0..30 {
        clients.push(b.another(i).await);
    }
    clients
}

async fn concurrent_charges_grant_exactly_what_fits(b: Backend) {
    let tasks: Vec<_> = thirty_clients(&b)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, limiter)| {
            tokio::spawn(async move {
                let c = charge(
                    &format!("c{i}"),
                    "search.list",
                    &[("budget", secs(60), 1000, 100)],
                );
                charge_until_answered(&limiter, &c).await.granted
            })
        })
        .collect();
    let mut granted = 0;
    for t in tasks {
        if t.await.expect("task") {
            granted += 1;
        }
    }
    assert_eq!(granted, 10);
    assert_eq!(
        b.status(&[("budget", secs(60))]).await.policies[0].used,
        1000
    );
}

/// A charge to bucket `bucket` with parts given as (policy, window, max, units).
fn charge_to(bucket: &str, id: &str, method: &str, parts: &[(&str, Duration, u64, u64)]) -> Charge {
    Charge {
        calls: 1,
        bucket: bucket.into(),
        ..charge(id, method, parts)
    }
}

/// Two buckets (docs/budget.md, "Buckets"), with a per-call limit over both: each bucket fills
/// on its own, the limit across them says no for either, and all or nothing holds.
async fn buckets_fill_apart_with_a_limit_across_them(b: Backend) {
    let main = |id: &str, units| {
        charge(
            id,
            "videos.list",
            &[("budget", secs(60), 10, units), ("calls", secs(60), 4, 1)],
        )
    };
    let search = |id: &str| {
        charge_to(
            "search",
            id,
            "search.list",
            &[("search", secs(60), 2, 1), ("calls", secs(60), 4, 1)],
        )
    };
    grant(&b, &main("m1", 9)).await;
    grant(&b, &search("s1")).await;
    grant(&b, &search("s2")).await;
    // The search bucket is full; the main one is not, and is not touched.
    let d = b.limiter.charge(&search("s3")).await.expect("answer");
    assert_eq!(d.denied_by.as_deref(), Some("search"), "{d:?}");
    grant(&b, &main("m2", 1)).await;
    // Four calls in all: the limit across the buckets says no to either.
    let d = b.limiter.charge(&main("m3", 0)).await.expect("answer");
    assert!(!d.granted);
    assert_eq!(d.denied_by.as_deref(), Some("calls"), "{d:?}");
    let st = b
        .status(&[
            ("budget", secs(60)),
            ("search", secs(60)),
            ("calls", secs(60)),
        ])
        .await;
    let used: Vec<u64> = st.policies.iter().map(|p| p.used).collect();
    assert_eq!(used, [10, 2, 4], "nothing of a denied charge was kept");
}

/// The upstream's block of one bucket denies its charges and no other bucket's.
async fn a_block_stops_only_its_own_bucket(b: Backend) {
    let now = b.status(&[("budget", secs(60))]).await.now.as_i64();
    b.limiter
        .block_until(&methods_of("search"), Micros::new(now + 60 * S))
        .await
        .expect("blocking");
    let blocked = charge_to("search", "s", "search.list", &[("search", secs(60), 10, 1)]);
    let d = b.limiter.charge(&blocked).await.expect("answer");
    assert_eq!(d.denied_by.as_deref(), Some("upstream"), "{d:?}");
    grant(
        &b,
        &charge("v", "videos.list", &[("budget", secs(60), 10, 1)]),
    )
    .await;
    let st = b
        .status(&[("budget", secs(60)), ("search", secs(60))])
        .await;
    assert_eq!(st.blocked_until("search"), Some(Micros::new(now + 60 * S)));
    assert_eq!(
        st.blocked_until_us(),
        None,
        "the main bucket is not blocked"
    );
    assert_eq!(
        b.limiter
            .unblock(&methods_of("search"))
            .await
            .expect("unblocking"),
        Some(Micros::new(now + 60 * S))
    );
    grant(&b, &blocked).await;
}

/// Thirty clients at once, half charging each bucket: each bucket grants exactly what
/// fits in it, and neither loses anything to the other.
async fn concurrent_charges_to_two_buckets_grant_exactly_what_fits_in_each(b: Backend) {
    let tasks: Vec<_> = thirty_clients(&b)
        .await
        .into_iter()
        .enumerate()
        .map(|(i, limiter)| {
            tokio::spawn(async move {
                let c = if i % 2 == 0 {
                    charge(
                        &format!("v{i}"),
                        "videos.list",
                        &[("budget", secs(60), 20, 2)],
                    )
                } else {
                    charge_to(
                        "search",
                        &format!("s{i}"),
                        "search.list",
                        &[("search", secs(60), 7, 1)],
                    )
                };
                (i % 2, charge_until_answered(&limiter, &c).await.granted)
            })
        })
        .collect();
    let mut granted = [0, 0];
    for t in tasks {
        let (bucket, yes) = t.await.expect("task");
        granted[bucket] += usize::from(yes);
    }
    assert_eq!(granted, [10, 7], "grants per bucket: 20 ÷ 2 and 7 ÷ 1");
    let st = b
        .status(&[("budget", secs(60)), ("search", secs(60))])
        .await;
    assert_eq!(st.policies[0].used, 20);
    assert_eq!(st.policies[1].used, 7);
}

/// On a Cluster, the script is loaded again on the primary that holds the budget.
async fn charges_survive_a_script_flush(b: Backend) {
    grant(
        &b,
        &charge("a", "videos.list", &[("budget", secs(60), 10, 1)]),
    )
    .await;
    let () = b.query(redis::cmd("SCRIPT").arg("FLUSH"));
    // NOSCRIPT: the script is loaded again and the charge retried, once.
    grant(
        &b,
        &charge("b", "videos.list", &[("budget", secs(60), 10, 1)]),
    )
    .await;
    assert_eq!(b.status(&[("budget", secs(60))]).await.policies[0].used, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_recounts_a_total_deleted_by_hand_once() {
    let b = Backend::redis().await;
    for id in ["a", "b"] {
        grant(
            &b,
            &charge(id, "search.list", &[("budget", secs(60), 1000, 100)]),
        )
        .await;
    }
    let Store::Redis(server) = &b.store else {
        unreachable!()
    };
    let mut conn = server.connection();
    let _: () = redis::cmd("DEL")
        .arg("trendsync:{conf}:budget:total")
        .query(&mut conn)
        .expect("DEL");
    let d = b
        .limiter
        .charge(&charge(
            "c",
            "search.list",
            &[("budget", secs(60), 250, 100)],
        ))
        .await
        .expect("answer");
    assert!(!d.granted, "200 units are still in the window: {d:?}");
    assert_eq!(d.used(), 200);
    let total: String = redis::cmd("GET")
        .arg("trendsync:{conf}:budget:total")
        .query(&mut conn)
        .expect("GET");
    assert_eq!(total, "200");
    let ttl: i64 = redis::cmd("PTTL")
        .arg("trendsync:{conf}:budget:total")
        .query(&mut conn)
        .expect("PTTL");
    assert!(
        ttl > 0 && ttl <= 61_000,
        "the recounted total expires with its window and slack (1 s): {ttl}"
    );
    // "<oldest>:<expires>": the oldest entry's time, and a window and its slack after
    // the newest entry.
    let oldest: String = redis::cmd("GET")
        .arg("trendsync:{conf}:budget:oldest")
        .query(&mut conn)
        .expect("GET");
    let entries = b.status(&[("budget", secs(60))]).await.policies[0]
        .entries
        .clone()
        .unwrap_or_default();
    assert_eq!(
        oldest,
        format!("{}:{}", entries[0].at_us, entries[1].at_us + 61 * S)
    );
    // The older layout's oldest time (a bare number, expiring with its entry) is read
    // as missing: the oldest entry is found again from the set.
    let _: () = redis::cmd("SET")
        .arg("trendsync:{conf}:budget:oldest")
        .arg(entries[0].at_us)
        .query(&mut conn)
        .expect("SET");
    let d = b
        .limiter
        .charge(&charge(
            "d",
            "search.list",
            &[("budget", secs(60), 1000, 100)],
        ))
        .await
        .expect("answer");
    assert!(d.granted, "{d:?}");
    assert_eq!(d.used(), 300);
    let oldest: String = redis::cmd("GET")
        .arg("trendsync:{conf}:budget:oldest")
        .query(&mut conn)
        .expect("GET");
    assert!(
        oldest.starts_with(&format!("{}:", entries[0].at_us)),
        "{oldest}"
    );
}

/// The expiry rule of `prelude.lua`: a grant moves the expiry of a policy's keys only
/// when it would fall short of a window after the grant, and then to a window plus
/// the slack (a tenth of the window) after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_moves_the_expiry_only_when_it_falls_short_of_a_window() {
    let b = Backend::redis().await;
    let w = secs(5);
    let slack = 500_000;
    let one = |id: &str| charge(id, "videos.list", &[("budget", w, 100, 1)]);
    grant(&b, &one("a")).await;
    let (first, a, expires) = expiry_state(&b, w).await;
    assert_eq!(expires, a + 5 * S + slack, "a first entry sets it");
    // Past the slack: the expiry would fall short of a window after the next grant.
    tokio::time::sleep(Duration::from_millis(550)).await;
    grant(&b, &one("b")).await;
    let (_, b_at, expires) = expiry_state(&b, w).await;
    assert!(b_at - a > slack);
    assert_eq!(
        expires,
        b_at + 5 * S + slack,
        "moved for a grant after the slack"
    );
    grant(&b, &one("c")).await;
    let (oldest, c, expires) = expiry_state(&b, w).await;
    assert_eq!(oldest, first, "nothing left the window");
    if c - b_at <= slack {
        assert_eq!(expires, b_at + 5 * S + slack, "left alone within the slack");
    } else {
        assert_eq!(
            expires,
            c + 5 * S + slack,
            "moved: the machine took its time"
        );
    }
    for key in ["budget:total", "budget:oldest"] {
        let ttl: i64 = b.query(redis::cmd("PTTL").arg(b.redis_key(key)));
        let left_ms = (expires - c) / 1000;
        assert!(
            ttl > 0 && ttl <= left_ms + 1,
            "{key} expires with the others: PTTL {ttl}, {left_ms} ms to go"
        );
    }
}

/// The oldest and the newest entry's time, and the expiry the oldest time key records.
async fn expiry_state(b: &Backend, w: Duration) -> (i64, i64, i64) {
    let entries = b.status(&[("budget", w)]).await.policies[0]
        .entries
        .clone()
        .unwrap_or_default();
    let kept: String = b.query(redis::cmd("GET").arg(b.redis_key("budget:oldest")));
    let expires: i64 = kept
        .split(':')
        .nth(1)
        .and_then(|e| e.parse().ok())
        .unwrap_or_else(|| panic!("\"oldest:expires\", not {kept}"));
    let at = |e: Option<&trendsync::quota::Entry>| e.map_or(0, |e| e.at_us);
    (at(entries.first()), at(entries.last()), expires)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keys_share_one_hash_tag_and_never_hold_the_api_key() {
    let b = Backend::redis().await;
    grant(
        &b,
        &charge(
            "a",
            "search.list",
            &[
                ("budget", secs(60), 1000, 100),
                ("search", secs(60), 1000, 100),
            ],
        ),
    )
    .await;
    let now = b.status(&[("budget", secs(60))]).await.now.as_i64();
    b.limiter
        .block_until(&methods_of("budget"), Micros::new(now + 60 * S))
        .await
        .expect("blocking");
    let Store::Redis(server) = &b.store else {
        unreachable!()
    };
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query(&mut server.connection())
        .expect("KEYS");
    keys.sort();
    assert_eq!(
        keys,
        vec![
            "trendsync:{conf}:blocked:videos.list",
            "trendsync:{conf}:budget",
            "trendsync:{conf}:budget:oldest",
            "trendsync:{conf}:budget:total",
            "trendsync:{conf}:epoch",
            "trendsync:{conf}:search",
            "trendsync:{conf}:search:oldest",
            "trendsync:{conf}:search:total"
        ]
    );
}

#[tokio::test]
async fn an_unreachable_redis_is_reported_as_down_quickly() {
    let mut server = RedisServer::start();
    let url = server.url();
    server.stop();
    let err = RedisLimiter::connect(&url, "conf", trendsync::clock::system(), None)
        .await
        .expect_err("nothing listens");
    assert!(err.is_unavailable(), "{err}");
    // Where something accepts and closes each connection at once, the connection is
    // tried a few times (the connection, then the probes that say why it failed), not
    // for as long as a failover would be waited for.
    let asked = crate::common::redis_server::closing_listener(server.port());
    let err = RedisLimiter::connect(&url, "conf", trendsync::clock::system(), None)
        .await
        .expect_err("nothing answers");
    assert!(err.is_unavailable(), "{err}");
    let asked = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert!(asked <= 3, "connecting must not loop: {asked} connections");
}
