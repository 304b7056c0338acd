//! A Redis configuration that cannot work however long one waits is a configuration
//! error (exit 78), never an outage and never exit 1: the message names the URL with
//! its password masked, says what is wrong and what to do.

use std::io::{Read, Write};
use std::net::TcpListener;

use crate::common::redis_deployments::TlsCerts;
use crate::common::redis_server::Options;
use crate::common::{Costs, RedisServer, Scratch, contains, lacks};

const PASSWORD: &str = "cOnFiG-pAsS-4471";

/// `budget charge videos.list` with `args`: exits 78, and stderr names `shown` and
/// says each of `says`, and never the password.
fn refused(args: &[String], shown: &str, says: &[&str]) {
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1000).ceiling(1000).to_toml(),
    );
    let mut charge = s
        .cmd()
        .costs(&costs)
        .args(args)
        .args(["budget", "charge", "videos.list"])
        .expect_stderr(shown)
        .status(78)
        .stderr(lacks(PASSWORD))
        .stdout(lacks(PASSWORD));
    for phrase in says {
        charge = charge.stderr(contains(*phrase));
    }
    charge.run();
}

fn url_args(url: &str) -> Vec<String> {
    vec!["--redis-url".to_owned(), url.to_owned()]
}

#[test]
fn an_unsupported_scheme() {
    refused(
        &url_args(&format!("memcached://:{PASSWORD}@127.0.0.1:11211/")),
        "memcached://:***@127.0.0.1:11211/",
        &["does not support", "use redis://, rediss://, unix://"],
    );
}

#[test]
fn a_malformed_url() {
    refused(
        &url_args(&format!("redis://:{PASSWORD}@127.0.0.1:notaport/0")),
        "redis://:***@127.0.0.1:notaport/0",
        &[
            "not a valid Redis URL",
            "redis://[user:password@]host:6379/0",
        ],
    );
    refused(
        &url_args(&format!("redis+sentinel://:{PASSWORD}@127.0.0.1:26379")),
        "redis+sentinel://:***@127.0.0.1:26379",
        &["names the primary's service"],
    );
}

#[test]
fn tls_files_that_cannot_be_read() {
    let s = Scratch::new();
    let missing = s.file("no-such-ca.pem");
    let mut args = url_args(&format!("rediss://:{PASSWORD}@127.0.0.1:6380/0"));
    args.extend(["--redis-ca-file".into(), missing.display().to_string()]);
    refused(
        &args,
        "rediss://:***@127.0.0.1:6380/0",
        &[
            "cannot use --redis-ca-file",
            "no-such-ca.pem",
            "readable PEM file",
        ],
    );
    let not_pem = s.write("ca.txt", "not a certificate\n");
    let mut args = url_args("rediss://127.0.0.1:6380/0");
    args.extend(["--redis-ca-file".into(), not_pem.display().to_string()]);
    refused(&args, "rediss://127.0.0.1:6380/0", &["holds no PEM"]);
}

/// One TLS server for the TLS mistakes: its certificate names 127.0.0.1, and it asks
/// every client for a certificate.
#[test]
fn tls_mistakes() {
    let server = RedisServer::start_with(Options {
        tls: Some(TlsCerts::generate()),
        password: Some(PASSWORD.to_owned()),
        ..Options::default()
    });
    let certs = server.certs().expect("a TLS server").clone();
    let tls_port = server.tls_port().expect("a TLS port");

    // Plain redis:// against the TLS port.
    refused(
        &url_args(&format!("redis://:{PASSWORD}@127.0.0.1:{tls_port}/0")),
        &format!("redis://:***@127.0.0.1:{tls_port}/0"),
        &["speaks TLS", "use rediss://"],
    );

    // rediss:// against the plain port.
    let mut args = url_args(&format!(
        "rediss://:{PASSWORD}@127.0.0.1:{}/0",
        server.port()
    ));
    args.extend(certs.client_args());
    refused(
        &args,
        &format!("rediss://:***@127.0.0.1:{}/0", server.port()),
        &["does not speak TLS", "use redis://"],
    );

    // The system's trust store does not know the test CA.
    refused(
        &url_args(&format!("rediss://:{PASSWORD}@127.0.0.1:{tls_port}/0")),
        &format!("rediss://:***@127.0.0.1:{tls_port}/0"),
        &["issuer this host does not trust", "--redis-ca-file"],
    );

    // The server asks for a client certificate.
    let mut args = url_args(&format!("rediss://:{PASSWORD}@127.0.0.1:{tls_port}/0"));
    args.extend([
        "--redis-ca-file".into(),
        certs.file("ca.crt").display().to_string(),
    ]);
    refused(
        &args,
        &format!("rediss://:***@127.0.0.1:{tls_port}/0"),
        &["--redis-client-cert"],
    );

    // A server that works with the same files, for contrast.
    let s = Scratch::new();
    let costs = s.write(
        "c.toml",
        &Costs::youtube().quota(1000).ceiling(1000).to_toml(),
    );
    s.cmd()
        .costs(&costs)
        .args(server.client_args())
        .args(["budget", "charge", "videos.list"])
        .run();
}

#[test]
fn a_certificate_for_another_name() {
    let server = RedisServer::start_with(Options {
        tls: Some(TlsCerts::generate_for("DNS:elsewhere.invalid")),
        ..Options::default()
    });
    let url = server.url();
    let mut args = url_args(&url);
    args.extend(server.certs().expect("TLS").client_args());
    refused(
        &args,
        &url,
        &["does not name the host", "subject alternative names"],
    );
}

#[test]
fn a_password_protected_server_reached_without_one_or_with_a_wrong_one() {
    let server = RedisServer::start_with_password(PASSWORD);
    let bare = format!("redis://127.0.0.1:{}/0", server.port());
    refused(
        &url_args(&bare),
        &bare,
        &["requires a password", "redis://:PASSWORD@host:port"],
    );
    refused(
        &url_args(&format!(
            "redis://:wrong-{PASSWORD}x@127.0.0.1:{}/0",
            server.port()
        )),
        &format!("redis://:***@127.0.0.1:{}/0", server.port()),
        &["refused the user name or password"],
    );
}

#[test]
fn a_url_that_points_at_something_that_is_not_redis() {
    // An HTTP server, as a URL with the wrong port would find.
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    refused(
        &url_args(&format!("redis://:{PASSWORD}@127.0.0.1:{port}/0")),
        &format!("redis://:***@127.0.0.1:{port}/0"),
        &[
            "did not answer as Redis does",
            "point the URL at a Redis server",
        ],
    );
}
