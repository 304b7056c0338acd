//! Unit tests of `mask.rs`.

use super::mask_url;

#[test]
fn redis_urls_keep_their_hosts_user_and_database() {
    for (raw, shown) in [
        (
            "redis://:s3cret@127.0.0.1:6379/0",
            "redis://:***@127.0.0.1:6379/0",
        ),
        (
            "rediss://user:s3cret@h:6380/2",
            "rediss://user:***@h:6380/2",
        ),
        ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
        ("redis://s3cret@h/", "redis://***@h/"),
        (
            "unix:///run/redis.sock?db=2&pass=s3cret",
            "unix:///run/redis.sock?db=2&pass=***",
        ),
        (
            "redis+unix:///r.sock?user=u&password=s3cret#x",
            "redis+unix:///r.sock?user=u&password=***#***",
        ),
        (
            "redis+sentinel://u:s3cret@s1:26379,s2:26379/mymaster/1",
            "redis+sentinel://u:***@s1:26379,s2:26379/mymaster/1",
        ),
        (
            "rediss+cluster://:s3:cret@n1:6379,[::1]:6380",
            "rediss+cluster://:***@n1:6379,[::1]:6380",
        ),
        ("redis://h/?token=s3cret", "redis://h/?token=***"),
        (
            "redis://h/?DB=3&Protocol=resp3",
            "redis://h/?DB=3&Protocol=resp3",
        ),
    ] {
        assert_eq!(mask_url(raw), shown, "{raw}");
    }
}

#[test]
fn upstream_urls_lose_every_query_value_and_fragment() {
    for (raw, shown) in [
        // An --api-base someone wrote with a key in it: trendsync refuses it,
        // and the message that says so must not show the key.
        (
            "https://user:pa55@example.test/v3?key=AIzaSECRET&x",
            "https://user:***@example.test/v3?key=***&x",
        ),
        (
            "http://127.0.0.1:9/v3?part=snippet&k=AIzaSECRET",
            "http://127.0.0.1:9/v3?part=***&k=***",
        ),
        (
            "http://127.0.0.1:9/v3#AIzaSECRET",
            "http://127.0.0.1:9/v3#***",
        ),
        (
            "https://www.googleapis.com/youtube/v3",
            "https://www.googleapis.com/youtube/v3",
        ),
        ("ftp://AIzaSECRET@127.0.0.1/v3", "ftp://***@127.0.0.1/v3"),
        ("redis://u:pa/ss@h:1/0", "redis://u:***@h:1/0"),
    ] {
        assert_eq!(mask_url(raw), shown, "{raw}");
    }
}

/// What no parser takes is masked by position all the same, and text without a
/// scheme is never shown.
#[test]
fn secrets_never_print_from_text_that_is_no_url() {
    assert_eq!(
        mask_url("http://us er:SECRET@host:99999/x?key=SECRET"),
        "http://us er:***@host:99999/x?key=***"
    );
    for raw in [
        "h:s3cret@x",
        "s3cretpw",
        "not a url ?pass=s3cret",
        "ht!tp//a:s3cret@[bad/?k=s3cret",
    ] {
        let shown = mask_url(raw);
        assert!(!shown.contains("s3cret"), "{raw}: {shown}");
    }
    assert!(!mask_url("127.0.0.1").contains("127"));
    assert!(!mask_url("ht!tp://a:s3cret@[bad/?k=s3cret").contains("s3cret"));
}

/// A key in the path of an `--api-base` (a proxy that takes it there) is masked, as a
/// key in its query is; the path's words, versions and database numbers stay.
#[test]
fn a_key_in_the_path_is_masked() {
    for (raw, shown) in [
        (
            "https://proxy.test/AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUv/youtube/v3",
            "https://proxy.test/***/youtube/v3",
        ),
        (
            "https://proxy.test/key=s3cret/youtube/v3",
            "https://proxy.test/key=***/youtube/v3",
        ),
        (
            "http://127.0.0.1:9/t/0123456789abcdefABCDEF/v3",
            "http://127.0.0.1:9/t/***/v3",
        ),
        (
            "https://www.googleapis.com/youtube/v3",
            "https://www.googleapis.com/youtube/v3",
        ),
        (
            "https://proxy.test/youtube-data-api-mirror/v3",
            "https://proxy.test/youtube-data-api-mirror/v3",
        ),
        ("redis://h:6379/15", "redis://h:6379/15"),
    ] {
        assert_eq!(mask_url(raw), shown, "{raw}");
    }
}
