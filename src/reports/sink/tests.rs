use super::{SinkUrl, object_name};

#[test]
fn sink_urls_of_both_forms_and_refusals_that_do_not_repeat_them() {
    assert_eq!(
        SinkUrl::parse("s3://charts/trendsync/v1/"),
        Ok(SinkUrl::S3 {
            bucket: "charts".into(),
            prefix: "trendsync/v1".into()
        })
    );
    assert_eq!(
        SinkUrl::parse("s3://charts"),
        Ok(SinkUrl::S3 {
            bucket: "charts".into(),
            prefix: String::new()
        })
    );
    assert_eq!(
        SinkUrl::parse("file:///srv/sink"),
        Ok(SinkUrl::File {
            root: "/srv/sink".into()
        })
    );
    for bad in [
        "https://example.com/x",
        "s3://",
        "s3:///prefix",
        "s3://b/a//c",
        "s3://b/../c",
        "file://relative/path",
        "file:///srv/../etc",
        "/srv/sink",
        "AKIASECRETKEY:verysecret@bucket",
        "s3://AKIA:verysecret@bucket/p",
        "s3://AKIA:very/secret@bucket/p",
    ] {
        let err = SinkUrl::parse(bad).expect_err(bad);
        assert!(!err.contains("secret"), "{bad}: {err}");
        assert!(
            err.contains("s3://BUCKET/PREFIX") || err.contains("credentials"),
            "{bad}: {err}"
        );
    }
    assert_eq!(
        SinkUrl::parse("s3://charts/trendsync").unwrap().shown(),
        "s3://charts/trendsync"
    );
}

#[test]
fn an_object_is_named_by_its_slot_alone() {
    // 2026-11-28T14:00:00Z
    assert_eq!(
        object_name("US", 1_795_874_400, 0),
        "date=2026-11-28/region=US/20261128T140000Z-chart-0.parquet"
    );
    assert_eq!(
        object_name("GB", 1_795_874_400 + 7 * 60, 10),
        "date=2026-11-28/region=GB/20261128T140700Z-chart-10.parquet"
    );
}

#[test]
fn plain_http_is_allowed_to_this_host_alone() {
    use super::is_loopback_http;
    assert!(is_loopback_http("http://127.0.0.1:9000"));
    assert!(is_loopback_http("http://localhost:9000/"));
    assert!(is_loopback_http("http://[::1]:9000"));
    assert!(!is_loopback_http("https://127.0.0.1:9000"));
    assert!(!is_loopback_http("http://minio.internal:9000"));
    assert!(!is_loopback_http("http://10.0.0.5"));
    assert!(!is_loopback_http(""));
}
