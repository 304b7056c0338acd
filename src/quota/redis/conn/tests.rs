//! What a connector refuses before it connects: TLS files without a TLS URL, or half a
//! client certificate.

use super::*;

#[test]
fn tls_files_need_a_tls_url_and_come_in_pairs() {
    let ca = TlsFiles {
        ca_file: Some("/nonexistent/ca.pem".into()),
        ..TlsFiles::default()
    };
    let err = Connector::new("redis://:pw@h:6379", &ca, "k".into())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("redis://:***@h:6379"), "{err}");
    assert!(err.fix.contains("rediss://"), "{err}");
    let err = Connector::new("rediss://h:6379", &ca, "k".into())
        .err()
        .expect("refused");
    assert!(err.problem.contains("/nonexistent/ca.pem"), "{err}");
    let half = TlsFiles {
        client_cert: Some("/nonexistent/c.pem".into()),
        ..TlsFiles::default()
    };
    let err = Connector::new("rediss://h:6379", &half, "k".into())
        .err()
        .expect("refused");
    assert!(err.fix.contains("--redis-client-key"), "{err}");
}
