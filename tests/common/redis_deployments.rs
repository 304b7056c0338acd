//! The Redis deployment forms of the README, "Redis deployments", built from real `redis-server`
//! processes on loopback: TLS certificates made with the `openssl` command, a Sentinel
//! set (one primary, one replica, one Sentinel) and a Cluster of three primaries with a
//! replica each. Timeouts are short so that a failover takes seconds. Everything is
//! stopped when its value is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::redis_server::{Options, RedisServer, free_port};

/// Polls `ready` until it holds, for at most `limit`.
pub fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not within {limit:?}");
}

/// A CA, a server certificate for 127.0.0.1 (or the names given) and a client
/// certificate for mutual TLS, as PEM files in a temporary directory.
#[derive(Clone)]
pub struct TlsCerts {
    dir: Arc<tempfile::TempDir>,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running openssl (scripts/test installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TlsCerts {
    /// A server certificate for 127.0.0.1 and localhost.
    pub fn generate() -> TlsCerts {
        TlsCerts::generate_for("IP:127.0.0.1,DNS:localhost")
    }

    /// A server certificate whose subject alternative names are `names`.
    pub fn generate_for(names: &str) -> TlsCerts {
        let dir = tempfile::tempdir().expect("a directory for certificates");
        let d = dir.path();
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec![
            "req",
            "-x509",
            "-days",
            "2",
            "-subj",
            "/CN=trendsync test CA",
        ];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        openssl(d, &ca);
        for (name, cn, ext) in [
            (
                "server",
                "redis test server",
                // clientAuth too: Cluster nodes and replicas show it to each other.
                format!("subjectAltName={names}\nextendedKeyUsage=serverAuth,clientAuth\n"),
            ),
            (
                "client",
                "trendsync test client",
                "extendedKeyUsage=clientAuth\n".to_owned(),
            ),
        ] {
            std::fs::write(d.join(format!("{name}.ext")), ext).expect("writing an extension file");
            let key = format!("{name}.key");
            let csr = format!("{name}.csr");
            let crt = format!("{name}.crt");
            let extfile = format!("{name}.ext");
            let subj = format!("/CN={cn}");
            let mut req = vec!["req", "-subj", &subj];
            req.extend(ec);
            req.extend(["-keyout", &key, "-out", &csr]);
            openssl(d, &req);
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-days",
                    "2",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    &crt,
                    "-extfile",
                    &extfile,
                ],
            );
        }
        TlsCerts { dir: Arc::new(dir) }
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `--redis-ca-file`, `--redis-client-cert` and `--redis-client-key`.
    pub fn client_args(&self) -> Vec<String> {
        let path = |n: &str| self.file(n).display().to_string();
        vec![
            "--redis-ca-file".into(),
            path("ca.crt"),
            "--redis-client-cert".into(),
            path("client.crt"),
            "--redis-client-key".into(),
            path("client.key"),
        ]
    }

    /// The same, for the library.
    pub fn files(&self) -> trendsync::quota::TlsFiles {
        trendsync::quota::TlsFiles {
            ca_file: Some(self.file("ca.crt")),
            client_cert: Some(self.file("client.crt")),
            client_key: Some(self.file("client.key")),
        }
    }
}

/// A process other than redis-server proper, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A field of `INFO section`, or of `CLUSTER INFO` for the section "cluster".
pub fn info_field(server: &RedisServer, section: &str, field: &str) -> Option<String> {
    let mut cmd = if section == "cluster" {
        redis::cmd("CLUSTER")
    } else {
        redis::cmd("INFO")
    };
    cmd.arg(if section == "cluster" {
        "INFO"
    } else {
        section
    });
    let info: String = cmd.query(&mut server.try_connection()?).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_owned))
}

/// One primary, one replica and one Sentinel watching them as `mymaster`.
pub struct SentinelSet {
    pub nodes: Vec<RedisServer>,
    sentinel: Option<Process>,
    /// The Sentinel's plain port, for the tests' own questions.
    pub sentinel_port: u16,
    /// With TLS, the port clients ask the Sentinel on, and the files they need.
    tls: Option<(u16, TlsCerts)>,
    _dir: tempfile::TempDir,
}

impl SentinelSet {
    pub fn start() -> SentinelSet {
        SentinelSet::start_with(None)
    }

    /// With `certs`, everything speaks mutual TLS: clients to the Sentinel and the
    /// nodes, the Sentinel to the nodes, the replica to the primary.
    pub fn start_with(certs: Option<TlsCerts>) -> SentinelSet {
        let node_extra: Vec<String> = if certs.is_some() {
            vec!["--tls-replication".into(), "yes".into()]
        } else {
            Vec::new()
        };
        let primary = RedisServer::start_with(Options {
            tls: certs.clone(),
            extra: node_extra.clone(),
            ..Options::default()
        });
        let mut extra = node_extra;
        extra.extend([
            "--replicaof".into(),
            "127.0.0.1".into(),
            primary.tls_port().unwrap_or(primary.port()).to_string(),
        ]);
        // Over TLS the Sentinel must find the replica at its TLS port.
        let replica_tls_port = certs.as_ref().map(|_| free_port());
        if let Some(port) = replica_tls_port {
            extra.extend(["--replica-announce-port".into(), port.to_string()]);
        }
        let replica = RedisServer::start_with(Options {
            tls: certs.clone(),
            tls_port: replica_tls_port,
            extra,
            ..Options::default()
        });
        wait_until("the replica syncs", Duration::from_secs(20), || {
            info_field(&replica, "replication", "master_link_status").as_deref() == Some("up")
        });
        let dir = tempfile::tempdir().expect("a directory for the Sentinel");
        let port = free_port();
        let conf = dir.path().join("sentinel.conf");
        let mut text = format!(
            "port {port}\nbind 127.0.0.1\ndir {}\n\
             sentinel monitor mymaster 127.0.0.1 {} 1\n\
             sentinel down-after-milliseconds mymaster 1000\n\
             sentinel failover-timeout mymaster 3000\n\
             sentinel parallel-syncs mymaster 1\n",
            dir.path().display(),
            primary.tls_port().unwrap_or(primary.port())
        );
        let tls = certs.map(|certs| (free_port(), certs));
        if let Some((tls_port, certs)) = &tls {
            text.push_str(&format!(
                "tls-port {tls_port}\ntls-cert-file {}\ntls-key-file {}\n\
                 tls-ca-cert-file {}\ntls-replication yes\n",
                certs.file("server.crt").display(),
                certs.file("server.key").display(),
                certs.file("ca.crt").display()
            ));
        }
        std::fs::write(&conf, text).expect("writing sentinel.conf");
        let child = Command::new(super::redis_server::redis_server_binary())
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting redis-server --sentinel");
        let set = SentinelSet {
            nodes: vec![primary, replica],
            sentinel: Some(Process(child)),
            sentinel_port: port,
            tls,
            _dir: dir,
        };
        wait_until(
            "the Sentinel knows the replica",
            Duration::from_secs(20),
            || {
                set.sentinel_query::<Vec<std::collections::HashMap<String, String>>>(
                    redis::cmd("SENTINEL").arg("REPLICAS").arg("mymaster"),
                )
                .is_some_and(|r| {
                    r.iter().any(|m| {
                        m.get("flags").is_some_and(|f| f == "slave")
                            && m.get("master-link-status").is_some_and(|s| s == "ok")
                    })
                })
            },
        );
        set
    }

    fn sentinel_query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> Option<T> {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}", self.sentinel_port)).ok()?;
        let mut conn = client
            .get_connection_with_timeout(Duration::from_secs(2))
            .ok()?;
        cmd.query(&mut conn).ok()
    }

    /// `redis+sentinel://127.0.0.1:PORT/mymaster/0`, or `rediss+sentinel://` on the
    /// Sentinel's TLS port.
    pub fn url(&self) -> String {
        match &self.tls {
            Some((port, _)) => format!("rediss+sentinel://127.0.0.1:{port}/mymaster/0"),
            None => format!(
                "redis+sentinel://127.0.0.1:{}/mymaster/0",
                self.sentinel_port
            ),
        }
    }

    /// The TLS files a client needs, if the set speaks TLS.
    pub fn tls_files(&self) -> trendsync::quota::TlsFiles {
        self.tls
            .as_ref()
            .map(|(_, certs)| certs.files())
            .unwrap_or_default()
    }

    /// The node the Sentinel names as primary now.
    pub fn primary(&self) -> &RedisServer {
        let (_, port): (String, u16) = self
            .sentinel_query(
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg("mymaster"),
            )
            .expect("the Sentinel names a primary");
        self.nodes
            .iter()
            .find(|n| n.port() == port || n.tls_port() == Some(port))
            .expect("the primary is one of the nodes")
    }

    /// A Sentinel failover: the replica is promoted and the Sentinel names it.
    pub fn failover(&self) {
        let old = self.primary().port();
        wait_until(
            "SENTINEL FAILOVER is accepted",
            Duration::from_secs(20),
            || {
                self.sentinel_query::<()>(redis::cmd("SENTINEL").arg("FAILOVER").arg("mymaster"))
                    .is_some()
            },
        );
        wait_until(
            "the Sentinel names the new primary",
            Duration::from_secs(30),
            || {
                self.primary().port() != old
                    && info_field(self.primary(), "replication", "role").as_deref()
                        == Some("master")
            },
        );
    }
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        self.sentinel.take();
    }
}

/// One line of `CLUSTER NODES`.
struct NodeLine {
    port: u16,
    primary: bool,
    /// The primary's id: its own, or the one a replica follows.
    group: String,
    slots: Vec<(u16, u16)>,
}

/// Three primaries with a replica each, made with `redis-cli --cluster create`.
pub struct Cluster {
    pub nodes: Vec<RedisServer>,
    certs: Option<TlsCerts>,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with(None)
    }

    /// With `certs`, every node also listens for TLS and the nodes speak TLS to each
    /// other; clients may use either port.
    pub fn start_with(certs: Option<TlsCerts>) -> Cluster {
        let tls_extra: &[&str] = if certs.is_some() {
            &["--tls-cluster", "yes", "--tls-replication", "yes"]
        } else {
            &[]
        };
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_with(Options {
                    tls: certs.clone(),
                    extra: [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        "1000",
                        // A replica may take over however long it was cut off.
                        "--cluster-replica-validity-factor",
                        "0",
                    ]
                    .iter()
                    .chain(tls_extra)
                    .map(|a| (*a).to_owned())
                    .collect(),
                    ..Options::default()
                })
            })
            .collect();
        let mut create = Command::new(redis_cli());
        create.args(["--cluster", "create"]);
        match &certs {
            // The cluster bus speaks TLS: the nodes meet on their TLS ports.
            Some(certs) => {
                create
                    .args(
                        nodes
                            .iter()
                            .map(|n| format!("127.0.0.1:{}", n.tls_port().expect("a TLS port"))),
                    )
                    .arg("--tls")
                    .arg("--cacert")
                    .arg(certs.file("ca.crt"))
                    .arg("--cert")
                    .arg(certs.file("client.crt"))
                    .arg("--key")
                    .arg(certs.file("client.key"));
            }
            None => {
                create.args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
            }
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("running redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes, certs };
        cluster.wait_healthy();
        cluster
    }

    /// Every live node says the cluster is ok, and every live replica is in sync.
    pub fn wait_healthy(&self) {
        wait_until("the Cluster is ok", Duration::from_secs(30), || {
            self.live().all(|n| {
                info_field(n, "cluster", "cluster_state").as_deref() == Some("ok")
                    && (info_field(n, "replication", "role").as_deref() == Some("master")
                        || info_field(n, "replication", "master_link_status").as_deref()
                            == Some("up"))
            })
        });
    }

    fn live(&self) -> impl Iterator<Item = &RedisServer> {
        self.nodes.iter().filter(|n| n.is_running())
    }

    /// All nodes in one URL.
    // The limiter benchmark's; the tests seed from one node at a time.
    #[allow(dead_code)]
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// Only node `i` (primary or replica) as the seed.
    pub fn seed_url(&self, i: usize) -> String {
        format!("redis+cluster://127.0.0.1:{}", self.nodes[i].port())
    }

    /// Only node `i`, over TLS, if the cluster speaks it.
    pub fn tls_seed_url(&self, i: usize) -> Option<String> {
        self.nodes[i]
            .tls_port()
            .map(|port| format!("rediss+cluster://127.0.0.1:{port}"))
    }

    /// The TLS files of a client of a TLS cluster: the CA and a client certificate.
    pub fn client_tls(&self) -> trendsync::quota::TlsFiles {
        self.certs.as_ref().map(TlsCerts::files).unwrap_or_default()
    }

    /// `CLUSTER NODES` of a live node, failed nodes left out.
    fn topology(&self) -> Vec<NodeLine> {
        let node = self.live().next().expect("a live node");
        let text: String = node.query(redis::cmd("CLUSTER").arg("NODES"));
        text.lines()
            .filter_map(|line| {
                let f: Vec<&str> = line.split_whitespace().collect();
                let port: u16 = f.get(1)?.split(['@', ':']).nth(1)?.parse().ok()?;
                let flags = f.get(2)?;
                if flags.contains("fail") && !flags.contains("fail?") {
                    return None;
                }
                let primary = flags.contains("master");
                let group = if primary { f[0] } else { f.get(3)? }.to_owned();
                let slots = f[8.min(f.len())..]
                    .iter()
                    .filter_map(|r| {
                        let (a, b) = r.split_once('-').unwrap_or((r, r));
                        Some((a.parse().ok()?, b.parse().ok()?))
                    })
                    .collect();
                Some(NodeLine {
                    port,
                    primary,
                    group,
                    slots,
                })
            })
            .collect()
    }

    fn slot(&self, key: &str) -> u16 {
        let node = self.live().next().expect("a live node");
        node.query(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
    }

    fn node(&self, port: u16) -> &RedisServer {
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("a node of the cluster")
    }

    /// The primary that holds `key`.
    pub fn primary_for(&self, key: &str) -> &RedisServer {
        self.node(self.try_primary_for(key).expect("a primary holds the slot"))
    }

    /// The port of the primary that holds `key`, if one does (not while a failed
    /// one's replica is still being elected).
    pub fn try_primary_for(&self, key: &str) -> Option<u16> {
        let slot = self.slot(key);
        self.topology()
            .into_iter()
            .find(|n| n.primary && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
            .map(|n| n.port)
    }

    /// A replica of the primary that holds `key`.
    pub fn replica_for(&self, key: &str) -> &RedisServer {
        let primary = self.primary_for(key).port();
        let topology = self.topology();
        let group = topology
            .iter()
            .find(|n| n.port == primary)
            .map(|n| n.group.clone())
            .expect("the primary is listed");
        let port = topology
            .iter()
            .find(|n| !n.primary && n.group == group && self.node(n.port).is_running())
            .map(|n| n.port)
            .expect("the primary has a live replica");
        self.node(port)
    }

    /// The primaries, by port.
    // The limiter benchmark's, to say where each budget landed.
    #[allow(dead_code)]
    pub fn primaries(&self) -> Vec<&RedisServer> {
        self.topology()
            .into_iter()
            .filter(|n| n.primary && !n.slots.is_empty())
            .map(|n| self.node(n.port))
            .collect()
    }

    /// A command routed by the cluster client (to the key's primary).
    pub fn query<T: redis::FromRedisValue>(&self, cmd: &redis::Cmd) -> T {
        let seeds: Vec<String> = self
            .live()
            .map(|n| format!("redis://127.0.0.1:{}", n.port()))
            .collect();
        let mut conn = redis::cluster::ClusterClient::new(seeds)
            .and_then(|c| c.get_connection())
            .expect("connecting to the cluster");
        cmd.query(&mut conn)
            .unwrap_or_else(|e| panic!("{cmd:?} on the cluster: {e}"))
    }
}

pub fn redis_cli() -> PathBuf {
    let server = super::redis_server::redis_server_binary();
    let beside = server.with_file_name("redis-cli");
    if beside.is_file() {
        beside
    } else {
        PathBuf::from("redis-cli")
    }
}
