//! Reading a `--redis-url`: every form parses, and each mistake is named.

use super::*;

#[test]
fn every_form_parses() {
    assert!(matches!(
        parse("redis://127.0.0.1:6379/0"),
        Ok(Form::Single { tls: false, .. })
    ));
    assert!(matches!(
        parse("rediss://localhost:6380"),
        Ok(Form::Single { tls: true, .. })
    ));
    assert!(matches!(
        parse("unix:///run/redis.sock?db=1&pass=x"),
        Ok(Form::Single { tls: false, .. })
    ));
    let Ok(Form::Sentinel {
        sentinels,
        service,
        redis,
        tls,
    }) = parse("rediss+sentinel://u:p%40ss@s1:26380,[::1]/mymaster/3")
    else {
        panic!("a Sentinel URL parses")
    };
    assert_eq!(sentinels.len(), 2);
    assert_eq!(service, "mymaster");
    assert_eq!(redis.db(), 3);
    assert_eq!(redis.username(), Some("u"));
    assert_eq!(redis.password(), Some("p@ss"));
    assert!(tls);
    let Ok(Form::Cluster { nodes, tls }) = parse("redis+cluster://:pw@n1,n2:7001/") else {
        panic!("a Cluster URL parses")
    };
    assert_eq!(nodes, ["redis://:pw@n1:6379", "redis://:pw@n2:7001"]);
    assert!(!tls);
}

#[test]
fn mistakes_in_urls_are_named() {
    for (url, says) in [
        ("http://127.0.0.1:6379", "scheme \"http\""),
        ("127.0.0.1:6379", "no scheme"),
        ("redis+sentinel://s1:26379", "names the primary's service"),
        ("redis+cluster://n1:6379/3", "only database 0"),
        ("redis+cluster://n1:notaport", "not a port"),
        ("redis+cluster://n1,,n2", "host is missing"),
        ("redis+sentinel://s1/m/x", "not a database"),
    ] {
        let Err((problem, fix)) = parse(url) else {
            panic!("{url} is refused")
        };
        assert!(problem.contains(says), "{url}: {problem}");
        assert!(!fix.is_empty());
    }
}

#[test]
fn parameters_the_client_would_drop_are_named() {
    assert_eq!(
        ignored_parameters("redis://h:6379/0?password=x&protocol=resp3"),
        ["password"]
    );
    assert_eq!(
        ignored_parameters("rediss://h/?db=2&user=u"),
        ["db", "user"]
    );
    assert!(ignored_parameters("unix:///r.sock?db=1&user=u&pass=x").is_empty());
    assert_eq!(
        ignored_parameters("unix:///r.sock?password=x"),
        ["password"]
    );
    assert!(ignored_parameters("redis://:pw@h:6379/0").is_empty());
    assert!(ignored_parameters("s3cretpw").is_empty());
}
