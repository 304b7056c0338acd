//! Tests of the client against fixtures shaped like real YouTube Data API v3 answers,
//! served by wiremock (or, where wiremock cannot misbehave enough, a raw socket) on
//! 127.0.0.1; and of when the upstream's daily quota resets.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::raw::{self, MAX_JSON_DEPTH, MalformedResponse, check_depth};
use super::*;
use crate::clock::Secs;

const KEY: &str = "AIzaSyTEST-k3y-0123456789abcdefghijklm";

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/youtube/",
            $name
        ))
        .as_slice()
    };
}

fn client_for(base: &str, timeout: Duration) -> Client {
    Client::new(
        &format!("{base}/youtube/v3"),
        ApiKey::new(KEY.to_owned()),
        timeout,
    )
    .expect("client for a loopback base")
}

async fn serve(status: u16, body: &[u8], content_type: &str) -> (MockServer, Client) {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(status).set_body_raw(body.to_vec(), content_type))
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_secs(5));
    (server, client)
}

async fn only_request(server: &MockServer) -> wiremock::Request {
    let mut requests = server
        .received_requests()
        .await
        .expect("request recording is on");
    assert_eq!(requests.len(), 1, "exactly one HTTP attempt");
    requests.remove(0)
}

fn query_pairs(request: &wiremock::Request) -> Vec<(String, String)> {
    request
        .url
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------
// Fixtures parse to the records the store will write.

#[test]
fn videos_page1_parses_to_records() {
    let page = raw::video_page(fixture!("videos_page1.json")).expect("fixture parses");
    assert_eq!(page.next_page_token.as_deref(), Some("CDIQAA"));
    let ids: Vec<&str> = page.items.iter().map(|v| v.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "Zq3vT8mKpLw",
            "b7RkQw2XnE0",
            "Lm0pX9cYt4U",
            "s_4HdVnQ8aI",
            "Vr2fJ8kLq-M",
            "Hx81cWmZo3g",
            "pK5eRt7uYwA"
        ]
    );

    assert_eq!(
        page.items[0],
        VideoRecord {
            id: "Zq3vT8mKpLw".into(),
            title: "Glasswing Orchestra & Friends - Copper Lighthouse (Official Music Video)"
                .into(),
            description: "The official video for \u{201c}Copper Lighthouse\u{201d} from the album \
                Saltglass Hymns, out now.\n\nListen everywhere: https://glasswing.example/copper\n\n\
                Directed by a crew of three and one very patient lighthouse keeper.\n\n\
                #GlasswingOrchestra #CopperLighthouse"
                .into(),
            channel_id: "UCq7Jx2LmVb9Rt4NsKd3WfHg".into(),
            channel_title: "Glasswing Orchestra".into(),
            published_at: "2024-06-07T16:00:06Z".into(),
            category_id: Some("10".into()),
            tags: Some(strings(&[
                "Glasswing Orchestra",
                "Copper Lighthouse",
                "Saltglass Hymns",
                "orchestral pop",
                "official music video"
            ])),
            default_language: None,
            default_audio_language: Some("en".into()),
            duration_s: Some(253),
            live_broadcast_content: Some("none".into()),
            thumbnail_url: Some("https://i.ytimg.com/vi/Zq3vT8mKpLw/maxresdefault.jpg".into()),
            region_restriction: None,
            view_count: Some(4_815_162),
            like_count: Some(231_042),
            comment_count: Some(12_877),
        }
    );

    // Likes hidden: absent, not zero.
    let hidden_likes = &page.items[1];
    assert_eq!(hidden_likes.like_count, None);
    assert_eq!(hidden_likes.view_count, Some(2_290_455));
    assert_eq!(hidden_likes.comment_count, Some(8_421));
    assert_eq!(hidden_likes.duration_s, Some(4597));
    assert_eq!(hidden_likes.default_language.as_deref(), Some("en"));
    assert_eq!(
        hidden_likes.default_audio_language.as_deref(),
        Some("en-US")
    );

    // Comments off.
    let comments_off = &page.items[2];
    assert_eq!(comments_off.comment_count, None);
    assert_eq!(comments_off.like_count, Some(48_810));
    assert_eq!(comments_off.duration_s, Some(482));

    // No tags, and no maxres thumbnail: standard is the best.
    let untagged = &page.items[3];
    assert_eq!(untagged.tags, None);
    assert_eq!(untagged.default_language, None);
    assert_eq!(
        untagged.thumbnail_url.as_deref(),
        Some("https://i.ytimg.com/vi/s_4HdVnQ8aI/sddefault.jpg")
    );

    // Live: P0D is zero seconds, not missing.
    let live = &page.items[4];
    assert_eq!(live.live_broadcast_content.as_deref(), Some("live"));
    assert_eq!(live.duration_s, Some(0));
    assert_eq!(live.comment_count, Some(0));
    assert_eq!(
        live.title,
        "\u{1f534} LIVE: Aurora Borealis Night Watch from Troms\u{f8}"
    );
    assert_eq!(
        live.thumbnail_url.as_deref(),
        Some("https://i.ytimg.com/vi/Vr2fJ8kLq-M/maxresdefault_live.jpg")
    );

    // Only default/medium/high thumbnails.
    let three_thumbs = &page.items[5];
    assert_eq!(
        three_thumbs.thumbnail_url.as_deref(),
        Some("https://i.ytimg.com/vi/Hx81cWmZo3g/hqdefault.jpg")
    );

    let restricted = &page.items[6];
    assert_eq!(
        restricted.region_restriction.as_deref(),
        Some(r#"{"blocked":["DE","AT"]}"#)
    );
    assert_eq!(restricted.duration_s, Some(1260));
    assert!(
        page.items[..6]
            .iter()
            .all(|v| v.region_restriction.is_none()),
        "only one item is restricted"
    );
}

#[test]
fn videos_last_page_has_no_next_token() {
    let page = raw::video_page(fixture!("videos_last_page.json")).expect("fixture parses");
    assert_eq!(page.next_page_token, None);
    let summary: Vec<(&str, Option<i64>)> = page
        .items
        .iter()
        .map(|v| (v.id.as_str(), v.duration_s))
        .collect();
    assert_eq!(
        summary,
        [
            ("Tq9wErTyU1o", Some(599)),
            ("Nb3vC6xZ8aS", Some(1650)),
            ("Jd7kL2mNp4Q", Some(93_600)),
        ]
    );
    assert_eq!(
        page.items[1].title,
        "Fossil Hunting on the Jurassic Coast: Ammonite Jackpot"
    );
}

#[test]
fn search_fixture_parses_to_ids_in_rank_order() {
    let page = raw::search_page(fixture!("search.json")).expect("fixture parses");
    assert_eq!(
        page,
        SearchPage {
            video_ids: strings(&["Wf5gH2jKl8E", "Cx4vB7nM1qZ", "Ry6tU3iOp9S"]),
            next_page_token: Some("CDIQAA".into()),
        }
    );
}

#[test]
fn pages_that_break_the_protocol_are_malformed() {
    let search = |ids: &[String]| {
        let items: Vec<serde_json::Value> = ids
            .iter()
            .map(|id| serde_json::json!({"id": {"kind": "youtube#video", "videoId": id}}))
            .collect();
        serde_json::json!({ "items": items }).to_string()
    };
    let fifty_one: Vec<String> = (0..51).map(|i| format!("v{i:010}")).collect();
    assert!(matches!(
        raw::search_page(search(&fifty_one).as_bytes()),
        Err(MalformedResponse::TooManyItems { got: 51, max: 50 })
    ));
    assert!(raw::search_page(search(&fifty_one[..50]).as_bytes()).is_ok());
    for bad in ["abc,def", "", "a b", "x\u{1b}y"] {
        let ids = strings(&["Wf5gH2jKl8E", bad]);
        assert!(
            matches!(
                raw::search_page(search(&ids).as_bytes()),
                Err(MalformedResponse::BadVideoId { index: 1, .. })
            ),
            "{bad:?}"
        );
    }
    let twice = strings(&["Wf5gH2jKl8E", "Cx4vB7nM1qZ", "Wf5gH2jKl8E"]);
    assert!(matches!(
        raw::search_page(search(&twice).as_bytes()),
        Err(MalformedResponse::DuplicateId {
            first: 0,
            again: 2,
            ..
        })
    ));
    let mut page: serde_json::Value =
        serde_json::from_slice(fixture!("videos_page1.json")).expect("fixture parses");
    page["items"][2]["id"] = page["items"][0]["id"].clone();
    assert!(matches!(
        raw::video_page(page.to_string().as_bytes()),
        Err(MalformedResponse::DuplicateId {
            first: 0,
            again: 2,
            ..
        })
    ));
}

#[test]
fn videos_by_id_fixture_matches_the_search_results() {
    let search = raw::search_page(fixture!("search.json")).expect("search parses");
    let page = raw::video_page(fixture!("videos_by_id.json")).expect("details parse");
    let ids: Vec<String> = page.items.iter().map(|v| v.id.clone()).collect();
    assert_eq!(ids, search.video_ids);
    assert_eq!(page.next_page_token, None);
    // videos.list titles are plain text; search.list's are HTML-escaped.
    assert_eq!(page.items[0].title, "Grandpa's Solar Kiln Bread Experiment");
    assert_eq!(page.items[1].tags, None);
    assert_eq!(page.items[1].duration_s, Some(59));
    assert_eq!(page.items[2].like_count, None);
    assert_eq!(page.items[2].comment_count, Some(120));
    assert_eq!(
        page.items[2].thumbnail_url.as_deref(),
        Some("https://i.ytimg.com/vi/Ry6tU3iOp9S/maxresdefault.jpg")
    );
}

#[test]
fn categories_fixture_parses() {
    let categories = raw::categories(fixture!("categories.json")).expect("fixture parses");
    assert_eq!(categories.len(), 32);
    assert_eq!(
        categories[2],
        Category {
            id: "10".into(),
            title: "Music".into(),
        }
    );
    assert_eq!(
        categories[5],
        Category {
            id: "18".into(),
            title: "Short Movies".into(),
        }
    );
}

#[test]
fn items_without_statistics_or_content_details_parse_to_none() {
    let body = br#"{"kind":"youtube#videoListResponse","etag":"x","items":[{"kind":"youtube#video","etag":"y","id":"abcdefghijk","snippet":{"publishedAt":"2024-01-02T03:04:05Z","channelId":"UCx","title":"t","description":"","thumbnails":{},"channelTitle":"c"}}],"pageInfo":{"totalResults":1,"resultsPerPage":1}}"#;
    let page = raw::video_page(body).expect("parses");
    let video = &page.items[0];
    assert_eq!(
        (
            video.view_count,
            video.like_count,
            video.comment_count,
            video.duration_s
        ),
        (None, None, None, None)
    );
    assert_eq!(video.thumbnail_url, None);
    assert_eq!(video.region_restriction, None);
    assert_eq!(video.category_id, None);
}

#[test]
fn bad_values_in_items_are_malformed_not_zero() {
    let item = |statistics: &str, duration: &str, published: &str| {
        format!(
            r#"{{"items":[{{"id":"abcdefghijk","snippet":{{"publishedAt":"{published}","channelId":"UCx","title":"t"}},"contentDetails":{{"duration":"{duration}"}},"statistics":{statistics}}}]}}"#
        )
    };
    let good = item(r#"{"viewCount":"12"}"#, "PT1S", "2024-01-02T03:04:05Z");
    assert_eq!(
        raw::video_page(good.as_bytes()).expect("parses").items[0].view_count,
        Some(12)
    );
    let cases = [
        (
            item(r#"{"viewCount":"12a"}"#, "PT1S", "2024-01-02T03:04:05Z"),
            "statistics.viewCount",
        ),
        (
            item(r#"{"likeCount":""}"#, "PT1S", "2024-01-02T03:04:05Z"),
            "statistics.likeCount",
        ),
        (
            item(r#"{"commentCount":"-3"}"#, "PT1S", "2024-01-02T03:04:05Z"),
            "statistics.commentCount",
        ),
        (
            item(r#"{"viewCount":"+3"}"#, "PT1S", "2024-01-02T03:04:05Z"),
            "statistics.viewCount",
        ),
        (
            item(
                r#"{"viewCount":"9223372036854775808"}"#,
                "PT1S",
                "2024-01-02T03:04:05Z",
            ),
            "statistics.viewCount",
        ),
        (
            item("{}", "PT1H1H", "2024-01-02T03:04:05Z"),
            "contentDetails.duration",
        ),
        (item("{}", "PT1S", "yesterday"), "snippet.publishedAt"),
    ];
    for (body, expected_field) in cases {
        match raw::video_page(body.as_bytes()) {
            Err(MalformedResponse::BadField {
                video_id, field, ..
            }) => {
                assert_eq!(video_id, "abcdefghijk");
                assert_eq!(field, expected_field, "{body}");
            }
            other => panic!("{body}: expected a bad field, got {other:?}"),
        }
    }
    // A number where the upstream sends a string is a change of contract.
    let numeric = item(r#"{"viewCount":12}"#, "PT1S", "2024-01-02T03:04:05Z");
    assert!(matches!(
        raw::video_page(numeric.as_bytes()),
        Err(MalformedResponse::Json(_))
    ));
}

#[test]
fn search_items_that_are_not_videos_are_skipped() {
    let body = br#"{"items":[{"id":{"kind":"youtube#channel","channelId":"UCx"}},{"id":{"kind":"youtube#video","videoId":"abcdefghijk"}}]}"#;
    let page = raw::search_page(body).expect("parses");
    assert_eq!(page.video_ids, strings(&["abcdefghijk"]));
    let broken = br#"{"items":[{"id":{"kind":"youtube#video"}}]}"#;
    assert!(matches!(
        raw::search_page(broken),
        Err(MalformedResponse::SearchResultWithoutId { index: 0 })
    ));
}

#[test]
fn depth_check_counts_only_structure() {
    assert!(check_depth(br#"{"a":[{"b":1}]}"#, 3).is_ok());
    assert!(check_depth(br#"{"a":[{"b":1}]}"#, 2).is_err());
    // Brackets inside strings, escaped quotes included, are text.
    assert!(check_depth(br#"{"a":"[[[{{{"}"#, 1).is_ok());
    assert!(check_depth(br#"{"a":"\"[[[{{{"}"#, 1).is_ok());
    assert!(check_depth(br#"{"a":"\\"}"#, 1).is_ok());
    assert!(check_depth(br#"{"a":"\\",[]}"#, 1).is_err());
    let deep = format!("{}{}", "[".repeat(33), "]".repeat(33));
    assert!(matches!(
        check_depth(deep.as_bytes(), MAX_JSON_DEPTH),
        Err(MalformedResponse::TooDeep { limit: 32 })
    ));
    // Every fixture is well within the limit.
    for body in [
        fixture!("videos_page1.json"),
        fixture!("videos_last_page.json"),
        fixture!("videos_by_id.json"),
        fixture!("search.json"),
        fixture!("categories.json"),
        fixture!("error_access_not_configured.json"),
    ] {
        assert!(check_depth(body, 8).is_ok());
    }
}

// ---------------------------------------------------------------------------------
// Requests: paths, query parameters, the key.

#[tokio::test]
async fn trending_page_asks_for_the_chart() {
    let (server, client) = serve(200, fixture!("videos_page1.json"), "application/json").await;
    let page = client
        .trending_page("US", None, None)
        .await
        .result
        .expect("first page");
    assert_eq!(page.items.len(), 7);
    assert_eq!(page.next_page_token.as_deref(), Some("CDIQAA"));
    let request = only_request(&server).await;
    assert_eq!(request.url.path(), "/youtube/v3/videos");
    assert_eq!(
        query_pairs(&request),
        pairs(&[
            ("part", "snippet,statistics,contentDetails"),
            ("chart", "mostPopular"),
            ("regionCode", "US"),
            ("maxResults", "50"),
        ])
    );
}

#[tokio::test]
async fn a_category_chart_asks_for_its_category() {
    let (server, client) = serve(200, fixture!("videos_page1.json"), "application/json").await;
    client
        .chart_page("GB", Some(17), None, None)
        .await
        .result
        .expect("first page");
    let request = only_request(&server).await;
    assert_eq!(
        query_pairs(&request),
        pairs(&[
            ("part", "snippet,statistics,contentDetails"),
            ("chart", "mostPopular"),
            ("regionCode", "GB"),
            ("maxResults", "50"),
            ("videoCategoryId", "17"),
        ])
    );
}

#[tokio::test]
async fn video_counts_asks_batch_get_stats_for_the_ids() {
    let (server, client) = serve(200, fixture!("video_stats.json"), "application/json").await;
    let ids = strings(&["Zq3vT8mKpLw", "b7RkQw2XnE0"]);
    let counts = client.video_counts(&ids).await.result.expect("counts");
    assert_eq!(counts.len(), 9);
    assert_eq!(
        counts[1],
        VideoCounts {
            id: "b7RkQw2XnE0".into(),
            view_count: Some(2_291_456),
            like_count: None,
            comment_count: Some(9_422),
        }
    );
    let request = only_request(&server).await;
    assert_eq!(request.url.path(), "/youtube/v3/videos:batchGetStats");
    assert_eq!(
        query_pairs(&request),
        pairs(&[("part", "statistics"), ("id", "Zq3vT8mKpLw,b7RkQw2XnE0")])
    );
    let too_many: Vec<String> = (0..51).map(|i| format!("v{i}")).collect();
    assert!(matches!(
        client.video_counts(&too_many).await.result,
        Err(CallError::InvalidArgument { .. })
    ));
}

#[test]
fn counts_that_are_not_strings_of_digits_are_malformed() {
    let body = br#"{"items": [{"id": "Zq3vT8mKpLw", "statistics": {"viewCount": 12}}]}"#;
    assert!(raw::video_counts(body).is_err());
    let body = br#"{"items": [{"id": "Zq3vT8mKpLw", "statistics": {"viewCount": "-1"}}]}"#;
    assert!(raw::video_counts(body).is_err());
    let body = br#"{"items": [{"id": "Zq3vT8mKpLw"}]}"#;
    let counts = raw::video_counts(body).expect("no statistics is hidden counts");
    assert_eq!(counts[0].view_count, None);
}

#[tokio::test]
async fn trending_page_passes_page_token_and_hl() {
    let (server, client) = serve(200, fixture!("videos_last_page.json"), "application/json").await;
    let page = client
        .trending_page("DE", Some("de_DE"), Some("CJYBEAA"))
        .await
        .result
        .expect("last page");
    assert_eq!(page.next_page_token, None);
    let request = only_request(&server).await;
    assert_eq!(
        query_pairs(&request),
        pairs(&[
            ("part", "snippet,statistics,contentDetails"),
            ("chart", "mostPopular"),
            ("regionCode", "DE"),
            ("maxResults", "50"),
            ("pageToken", "CJYBEAA"),
            ("hl", "de_DE"),
        ])
    );
}

#[tokio::test]
async fn search_page_escapes_q() {
    let (server, client) = serve(200, fixture!("search.json"), "application/json").await;
    let q = "cats & dogs +1 #shorts/ü?x=y";
    let after: jiff::Timestamp = "2024-06-09T12:30:15.123456Z".parse().expect("timestamp");
    let page = client
        .search_page(&SearchRequest {
            region: "GB",
            q,
            order: SearchOrder::ViewCount,
            published_after: Some(after),
        })
        .await
        .result
        .expect("search page");
    assert_eq!(page.video_ids.len(), 3);
    let request = only_request(&server).await;
    assert_eq!(request.url.path(), "/youtube/v3/search");
    assert_eq!(
        query_pairs(&request),
        pairs(&[
            ("part", "snippet"),
            ("type", "video"),
            ("regionCode", "GB"),
            ("maxResults", "50"),
            ("order", "viewCount"),
            ("publishedAfter", "2024-06-09T12:30:15Z"),
            ("q", q),
        ])
    );
    let raw_query = request.url.query().expect("a query string");
    assert!(
        raw_query.contains("q=cats+%26+dogs+%2B1+%23shorts%2F%C3%BC%3Fx%3Dy"),
        "{raw_query}"
    );
}

#[tokio::test]
async fn search_page_sends_empty_q_and_omits_published_after() {
    let (server, client) = serve(200, fixture!("search.json"), "application/json").await;
    client
        .search_page(&SearchRequest {
            region: "US",
            q: "",
            order: SearchOrder::default(),
            published_after: None,
        })
        .await
        .result
        .expect("search page");
    assert_eq!(
        query_pairs(&only_request(&server).await),
        pairs(&[
            ("part", "snippet"),
            ("type", "video"),
            ("regionCode", "US"),
            ("maxResults", "50"),
            ("order", "relevance"),
            ("q", ""),
        ])
    );
}

#[tokio::test]
async fn videos_by_id_joins_ids() {
    let (server, client) = serve(200, fixture!("videos_by_id.json"), "application/json").await;
    let ids = strings(&["Wf5gH2jKl8E", "Cx4vB7nM1qZ", "Ry6tU3iOp9S"]);
    let page = client
        .videos_by_id(&ids, Some("en"))
        .await
        .result
        .expect("details");
    assert_eq!(page.items.len(), 3);
    let request = only_request(&server).await;
    assert_eq!(request.url.path(), "/youtube/v3/videos");
    assert_eq!(
        query_pairs(&request),
        pairs(&[
            ("id", "Wf5gH2jKl8E,Cx4vB7nM1qZ,Ry6tU3iOp9S"),
            ("part", "snippet,statistics,contentDetails"),
            ("hl", "en"),
        ])
    );
}

#[tokio::test]
async fn videos_by_id_refuses_bad_arguments_without_a_request() {
    let (server, client) = serve(200, fixture!("videos_by_id.json"), "application/json").await;
    let too_many: Vec<String> = (0..51).map(|i| format!("video{i:06}")).collect();
    let error = client
        .videos_by_id(&too_many, None)
        .await
        .result
        .expect_err("51 ids is a caller bug");
    assert_eq!(error.class(), ErrorClass::Fatal);
    assert_eq!(error.status(), None);
    assert!(error.to_string().contains("51 ids"), "{error}");

    let error = client
        .videos_by_id(&strings(&["abc", "def,ghi"]), None)
        .await
        .result
        .expect_err("a comma would corrupt the id list");
    assert_eq!(error.class(), ErrorClass::Fatal);
    assert!(error.to_string().contains("\"def,ghi\""), "{error}");

    let empty = client
        .videos_by_id(&[], None)
        .await
        .result
        .expect("no ids, no call");
    assert!(empty.items.is_empty());

    let fifty: Vec<String> = (0..50).map(|i| format!("video{i:06}")).collect();
    client
        .videos_by_id(&fifty, None)
        .await
        .result
        .expect("50 ids are fine");
    // Only the last call reached the upstream.
    let request = only_request(&server).await;
    assert_eq!(query_pairs(&request)[0].1.split(',').count(), 50);
}

#[tokio::test]
async fn categories_asks_for_the_region() {
    let (server, client) = serve(200, fixture!("categories.json"), "application/json").await;
    let categories = client
        .categories("FR", Some("fr"))
        .await
        .result
        .expect("categories");
    assert_eq!(categories.len(), 32);
    let request = only_request(&server).await;
    assert_eq!(request.url.path(), "/youtube/v3/videoCategories");
    assert_eq!(
        query_pairs(&request),
        pairs(&[("part", "snippet"), ("regionCode", "FR"), ("hl", "fr")])
    );
}

#[tokio::test]
async fn key_goes_only_in_the_header() {
    let server = MockServer::start().await;
    Mock::given(path("/youtube/v3/videos"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture!("videos_page1.json").to_vec(), "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(path("/youtube/v3/search"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture!("search.json").to_vec(), "application/json"),
        )
        .mount(&server)
        .await;
    Mock::given(path("/youtube/v3/videoCategories"))
        .respond_with(ResponseTemplate::new(400).set_body_raw(
            fixture!("error_key_invalid.json").to_vec(),
            "application/json",
        ))
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_secs(5));
    assert!(!format!("{client:?}").contains(KEY));

    client
        .trending_page("US", Some("en"), Some("CDIQAA"))
        .await
        .result
        .expect("videos");
    client
        .search_page(&SearchRequest {
            region: "US",
            q: "lighthouse",
            order: SearchOrder::Date,
            published_after: None,
        })
        .await
        .result
        .expect("search");
    client
        .videos_by_id(&strings(&["Zq3vT8mKpLw"]), None)
        .await
        .result
        .expect("by id");
    let error = client
        .categories("US", None)
        .await
        .result
        .expect_err("key refused");
    assert!(!error.to_string().contains(KEY));
    assert!(!format!("{error:?}").contains(KEY));

    let requests = server.received_requests().await.expect("recording");
    assert_eq!(requests.len(), 4);
    for request in &requests {
        let header = request
            .headers
            .get("x-goog-api-key")
            .expect("key header on every request");
        assert_eq!(header.to_str().expect("ascii"), KEY);
        assert!(!request.url.as_str().contains(KEY), "{}", request.url);
        assert!(
            request.url.query_pairs().all(|(name, _)| name != "key"),
            "{}",
            request.url
        );
    }
}

// ---------------------------------------------------------------------------------
// Classification: every row of docs/upstream.md, against a server.

struct Row {
    status: u16,
    body: &'static [u8],
    class: ErrorClass,
    reason: Option<&'static str>,
    /// Text the Display must contain besides method, region and status.
    says: &'static [&'static str],
}

#[tokio::test]
async fn every_row_of_the_classification_table() {
    use ErrorClass::*;
    let rows = [
        Row {
            status: 403,
            body: fixture!("error_quota_exceeded.json"),
            class: QuotaExhausted,
            reason: Some("quotaExceeded"),
            says: &["exceeded your quota.", "America/Los_Angeles"],
        },
        Row {
            status: 403,
            body: fixture!("error_daily_limit_exceeded.json"),
            class: QuotaExhausted,
            reason: Some("dailyLimitExceeded"),
            says: &["Daily Limit Exceeded"],
        },
        Row {
            status: 403,
            body: fixture!("error_rate_limit_exceeded.json"),
            class: Transient,
            reason: Some("rateLimitExceeded"),
            says: &["Rate Limit Exceeded"],
        },
        Row {
            status: 403,
            body: fixture!("error_user_rate_limit_exceeded.json"),
            class: Transient,
            reason: Some("userRateLimitExceeded"),
            says: &["User Rate Limit Exceeded"],
        },
        Row {
            status: 429,
            body: b"",
            class: Transient,
            reason: None,
            says: &["empty body"],
        },
        Row {
            status: 500,
            body: fixture!("error_backend.json"),
            class: Transient,
            reason: Some("backendError"),
            says: &["Backend Error"],
        },
        Row {
            status: 502,
            body: fixture!("error_bad_gateway.html"),
            class: Transient,
            reason: None,
            says: &["Error 502 (Server Error)"],
        },
        Row {
            status: 503,
            body: b"Service Unavailable",
            class: Transient,
            reason: None,
            says: &["Service Unavailable"],
        },
        Row {
            status: 504,
            body: b"",
            class: Transient,
            reason: None,
            says: &[],
        },
        Row {
            status: 400,
            body: fixture!("error_key_invalid.json"),
            class: Fatal,
            reason: Some("badRequest"),
            says: &[
                "API key not valid",
                "API_KEY_INVALID",
                "YOUTUBE_API_KEY / --api-key-file",
            ],
        },
        Row {
            status: 403,
            body: fixture!("error_access_not_configured.json"),
            class: Fatal,
            reason: Some("accessNotConfigured"),
            says: &["has not been used in project", "enable the YouTube Data API v3"],
        },
        Row {
            status: 403,
            body: fixture!("error_forbidden.json"),
            class: Fatal,
            reason: Some("forbidden"),
            says: &["are blocked", "API restrictions"],
        },
        Row {
            status: 404,
            body: fixture!("error_video_chart_not_found.json"),
            class: RegionFailed,
            reason: Some("videoChartNotFound"),
            says: &["video chart is not supported"],
        },
        Row {
            status: 400,
            body: fixture!("error_video_chart_not_found.json"),
            class: RegionFailed,
            reason: Some("videoChartNotFound"),
            says: &[],
        },
        Row {
            status: 404,
            body: b"Not Found",
            class: RegionFailed,
            reason: None,
            says: &["Not Found"],
        },
        Row {
            status: 401,
            body: b"",
            class: RegionFailed,
            reason: None,
            says: &[],
        },
        Row {
            status: 418,
            body: b"{\"error\":{\"code\":418,\"message\":\"teapot\",\"errors\":[{\"reason\":\"teapot\"}]}}",
            class: RegionFailed,
            reason: Some("teapot"),
            says: &["teapot"],
        },
    ];
    for row in rows {
        let (server, client) = serve(row.status, row.body, "application/json").await;
        let error = client
            .trending_page("BR", None, Some("CDIQAA"))
            .await
            .result
            .expect_err("an error status");
        let context = format!("HTTP {} {:?}: {error}", row.status, row.reason);
        assert_eq!(error.class(), row.class, "{context}");
        assert_eq!(error.status(), Some(row.status), "{context}");
        assert_eq!(error.reason(), row.reason, "{context}");
        assert_eq!(error.call().method(), VIDEOS_LIST);
        let text = error.to_string();
        for part in [
            "videos.list",
            "region BR",
            "CDIQAA",
            &format!("HTTP {}", row.status),
        ] {
            assert!(text.contains(part), "{context}: missing {part:?}");
        }
        if let Some(reason) = row.reason {
            assert!(text.contains(reason), "{context}: missing the reason");
        }
        for part in row.says {
            assert!(text.contains(part), "{context}: missing {part:?}");
        }
        assert!(!text.contains(KEY));
        // One attempt only, whatever the class.
        only_request(&server).await;
    }
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let server = MockServer::start().await;
    Mock::given(path("/youtube/v3/videos"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", "/elsewhere/videos"))
        .mount(&server)
        .await;
    Mock::given(path("/elsewhere/videos"))
        .respond_with(ResponseTemplate::new(200))
        .expect(0)
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_secs(5));
    let error = client
        .trending_page("US", None, None)
        .await
        .result
        .expect_err("a redirect is not an answer");
    assert_eq!(error.class(), ErrorClass::RegionFailed);
    assert_eq!(error.status(), Some(302));
    let message = error.to_string();
    assert!(
        message.contains(&format!("a redirect to {}/elsewhere/videos", server.uri()))
            && message.contains("check --api-base"),
        "{message}"
    );
    only_request(&server).await;
}

#[tokio::test]
async fn malformed_success_bodies_fail_the_region() {
    let bodies: [&[u8]; 5] = [
        b"{",
        b"<html>not json</html>",
        b"{\"items\":[{\"id\":1}]}",
        b"[]",
        b"{\"items\":[{\"id\":\"abcdefghijk\",\"snippet\":{\"publishedAt\":\"2024-01-01T00:00:00Z\",\"channelId\":\"c\",\"title\":\"t\"},\"statistics\":{\"viewCount\":\"lots\"}}]}",
    ];
    for body in bodies {
        let (_server, client) = serve(200, body, "application/json").await;
        let error = client
            .trending_page("IN", None, None)
            .await
            .result
            .expect_err("malformed");
        assert_eq!(error.class(), ErrorClass::RegionFailed, "{error}");
        assert_eq!(error.status(), Some(200));
        assert!(matches!(error, CallError::Malformed { .. }), "{error:?}");
        assert!(error.to_string().contains("region IN"), "{error}");
    }
}

#[tokio::test]
async fn deeply_nested_bodies_are_refused() {
    let depth = 10_000;
    let nested = format!(
        r#"{{"kind":"youtube#videoListResponse","items":[],"junk":{}1{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let (_server, client) = serve(200, nested.as_bytes(), "application/json").await;
    let error = client
        .trending_page("AU", None, None)
        .await
        .result
        .expect_err("too deep");
    assert_eq!(error.class(), ErrorClass::RegionFailed);
    assert!(
        matches!(
            &error,
            CallError::Malformed {
                problem: MalformedResponse::TooDeep { .. },
                ..
            }
        ),
        "{error:?}"
    );

    // Just inside the limit is fine: the limit is about depth, not about nesting at all.
    let shallow = format!(
        r#"{{"items":[],"junk":{}1{}}}"#,
        "[".repeat(MAX_JSON_DEPTH - 1),
        "]".repeat(MAX_JSON_DEPTH - 1)
    );
    let (_server, client) = serve(200, shallow.as_bytes(), "application/json").await;
    let page = client
        .trending_page("AU", None, None)
        .await
        .result
        .expect("within limit");
    assert!(page.items.is_empty());
}

// ---------------------------------------------------------------------------------
// Body size.

#[tokio::test]
async fn oversized_body_with_content_length_is_refused() {
    let mut body = fixture!("videos_last_page.json").to_vec();
    body.resize(DEFAULT_BODY_LIMIT + 1, b' ');
    let (_server, client) = serve(200, &body, "application/json").await;
    let error = client
        .trending_page("CA", None, None)
        .await
        .result
        .expect_err("over the default limit");
    assert!(
        matches!(error, CallError::BodyTooLarge { limit, .. } if limit == DEFAULT_BODY_LIMIT),
        "{error:?}"
    );
    assert_eq!(error.class(), ErrorClass::RegionFailed);
}

#[tokio::test]
async fn body_exactly_at_the_limit_is_accepted() {
    let body = fixture!("videos_last_page.json");
    let (_server, client) = serve(200, body, "application/json").await;
    let page = client
        .with_body_limit(body.len())
        .trending_page("CA", None, None)
        .await
        .result
        .expect("at the limit");
    assert_eq!(page.items.len(), 3);

    let (_server, client) = serve(200, body, "application/json").await;
    let error = client
        .with_body_limit(body.len() - 1)
        .trending_page("CA", None, None)
        .await
        .result
        .expect_err("one byte over");
    assert_eq!(error.class(), ErrorClass::RegionFailed);
}

/// A one-shot HTTP server on a raw socket, for answers wiremock will not give:
/// chunked bodies without a length, stalls mid-body, dropped connections.
fn raw_server(respond: impl FnOnce(std::net::TcpStream) + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let address = listener.local_addr().expect("local address");
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut seen = Vec::new();
            let mut buffer = [0u8; 4096];
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => seen.extend_from_slice(&buffer[..n]),
                }
            }
            respond(stream);
        }
    });
    format!("http://{address}")
}

#[tokio::test]
async fn oversized_chunked_body_is_refused_while_streaming() {
    let base = raw_server(|mut stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        let chunk = vec![b' '; 16 * 1024];
        // 4 MiB in all, far past the limit; the client hangs up long before.
        for _ in 0..256 {
            let head = format!("{:x}\r\n", chunk.len());
            if stream.write_all(head.as_bytes()).is_err()
                || stream.write_all(&chunk).is_err()
                || stream.write_all(b"\r\n").is_err()
            {
                return;
            }
        }
        let _ = stream.write_all(b"0\r\n\r\n");
    });
    let client = client_for(&base, Duration::from_secs(5)).with_body_limit(64 * 1024);
    let error = client
        .trending_page("GB", None, None)
        .await
        .result
        .expect_err("over the limit");
    assert!(
        matches!(error, CallError::BodyTooLarge { limit: 65_536, .. }),
        "{error:?}"
    );
    assert_eq!(error.class(), ErrorClass::RegionFailed);
}

// ---------------------------------------------------------------------------------
// Transport failures.

#[tokio::test]
async fn slow_answer_times_out_as_transient() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture!("videos_page1.json").to_vec(), "application/json")
                .set_delay(Duration::from_secs(5)),
        )
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_millis(300));
    let started = Instant::now();
    let error = client
        .trending_page("FR", None, None)
        .await
        .result
        .expect_err("too slow");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(error, CallError::Timeout { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Transient);
    assert_eq!(error.status(), None);
    let text = error.to_string();
    assert!(text.contains("videos.list for region FR"), "{text}");
    assert!(text.contains("within 300ms"), "{text}");
}

#[tokio::test]
async fn stall_mid_body_times_out_as_transient() {
    let base = raw_server(|mut stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"items\":",
        );
        std::thread::sleep(Duration::from_secs(3));
    });
    let client = client_for(&base, Duration::from_millis(300));
    let error = client
        .trending_page("FR", None, None)
        .await
        .result
        .expect_err("stalled");
    assert!(matches!(error, CallError::Timeout { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Transient);
}

#[tokio::test]
async fn connection_refused_is_transient() {
    let address = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        listener.local_addr().expect("local address")
    };
    let client = client_for(&format!("http://{address}"), Duration::from_secs(5));
    let error = client
        .categories("US", None)
        .await
        .result
        .expect_err("nobody listening");
    assert!(matches!(error, CallError::Connection { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Transient);
    assert_eq!(error.status(), None);
    let text = error.to_string();
    assert!(
        text.contains("videoCategories.list for region US"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("refused"), "{text}");
}

#[tokio::test]
async fn connection_closed_before_answer_is_transient() {
    let base = raw_server(drop);
    let client = client_for(&base, Duration::from_secs(5));
    let error = client
        .trending_page("US", None, None)
        .await
        .result
        .expect_err("closed");
    assert!(matches!(error, CallError::Connection { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Transient);
}

#[tokio::test]
async fn body_cut_short_is_transient() {
    let base = raw_server(|mut stream| {
        let _ = stream.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"items\":",
        );
    });
    let client = client_for(&base, Duration::from_secs(5));
    let error = client
        .trending_page("US", None, None)
        .await
        .result
        .expect_err("cut short");
    assert!(matches!(error, CallError::Connection { .. }), "{error:?}");
    assert_eq!(error.class(), ErrorClass::Transient);
}

// ---------------------------------------------------------------------------------
// Construction.

#[test]
fn client_new_refuses_unusable_configuration() {
    let key = || ApiKey::new(KEY.to_owned());
    let timeout = Duration::from_secs(1);
    for base in [
        "not a url",
        "ftp://example.com/youtube/v3",
        "mailto:someone@example.com",
        "https://example.com/youtube/v3?key=x",
        "https://user:pass@example.com/youtube/v3",
    ] {
        let error = Client::new(base, key(), timeout).expect_err(base);
        assert!(
            matches!(error, ClientError::BaseUrl { .. }),
            "{base}: {error}"
        );
    }
    assert!(matches!(
        Client::new("https://example.com", ApiKey::new(" \n".into()), timeout),
        Err(ClientError::EmptyKey)
    ));
    let error = Client::new(
        "https://example.com",
        ApiKey::new("a\u{7}b".into()),
        timeout,
    )
    .expect_err("control character");
    assert!(matches!(error, ClientError::KeyNotHeaderSafe));
    assert!(error.to_string().contains("--api-key-file"));
}

#[tokio::test]
async fn base_with_trailing_slash_gives_the_same_paths() {
    let server = MockServer::start().await;
    Mock::given(path("/youtube/v3/videoCategories"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture!("categories.json").to_vec(), "application/json"),
        )
        .expect(1)
        .mount(&server)
        .await;
    let client = Client::new(
        &format!("{}/youtube/v3/", server.uri()),
        ApiKey::new(KEY.to_owned()),
        Duration::from_secs(5),
    )
    .expect("client");
    client
        .categories("US", None)
        .await
        .result
        .expect("categories");
}

#[test]
fn search_order_round_trips_its_upstream_names() {
    for order in [
        SearchOrder::Date,
        SearchOrder::Rating,
        SearchOrder::Relevance,
        SearchOrder::Title,
        SearchOrder::VideoCount,
        SearchOrder::ViewCount,
    ] {
        assert_eq!(order.as_str().parse::<SearchOrder>(), Ok(order));
    }
    assert!("views".parse::<SearchOrder>().is_err());
    assert!("ViewCount".parse::<SearchOrder>().is_err());
}

/// A gzip member holding `data` in one stored (uncompressed) deflate block: enough to
/// prove the client decodes gzip, without a compression crate in the tests.
fn gzip_stored(data: &[u8]) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &byte in data {
            crc ^= u32::from(byte);
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }
    let length = u16::try_from(data.len()).expect("one stored block holds at most 64 KiB");
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    out.push(1); // final block, stored
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&(!length).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

#[tokio::test]
async fn gzip_is_asked_for_and_decoded() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("Content-Encoding", "gzip")
                .set_body_raw(gzip_stored(fixture!("categories.json")), "application/json"),
        )
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_secs(5));
    let categories = client
        .categories("US", None)
        .await
        .result
        .expect("gzip body decoded");
    assert_eq!(categories.len(), 32);
    let request = only_request(&server).await;
    let accept = request
        .headers
        .get("accept-encoding")
        .expect("accept-encoding sent")
        .to_str()
        .expect("ascii");
    assert!(accept.contains("gzip"), "{accept}");
}

/// The three forms RFC 9110 says a recipient reads, each naming the same second
/// (its example, and one of this century for the two-digit year).
#[test]
fn http_dates_read_to_the_second_in_all_three_forms() {
    for (form, text, second) in [
        ("IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777),
        ("RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
        ("asctime", "Sun Nov  6 08:49:37 1994", 784_111_777),
        (
            "IMF-fixdate",
            "Wed, 25 Nov 2026 17:24:44 GMT",
            1_795_627_484,
        ),
        (
            "RFC 850",
            "Wednesday, 25-Nov-26 17:24:44 GMT",
            1_795_627_484,
        ),
        ("asctime", "Wed Nov 25 17:24:44 2026", 1_795_627_484),
        (
            "asctime, trimmed",
            " Sun Nov  6 08:49:37 1994 ",
            784_111_777,
        ),
    ] {
        assert_eq!(
            parse_http_date(text),
            Some(Secs::new(second)),
            "{form}: {text:?}"
        );
    }
}

/// What names no second reads as none, so it can confirm no clock.
#[test]
fn an_unreadable_http_date_is_none() {
    for text in [
        "",
        "   ",
        "yesterday",
        "Sun, 06 Nov 1994",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-94 08:49:37",
        "Sun Nov  6 08:49:37",
        "Sun Nov 31 08:49:37 1994",
        "1994-11-06T08:49:37Z",
        "784111777",
    ] {
        assert_eq!(parse_http_date(text), None, "{text:?}");
    }
}

/// Every answer says when the upstream made it, a refusal's too; the reply carries
/// the second to the caller.
#[tokio::test]
async fn an_answers_date_is_part_of_the_reply() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/youtube/v3/videoCategories"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(fixture!("categories.json").to_vec(), "application/json")
                .insert_header("Date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/youtube/v3/videos"))
        .respond_with(
            ResponseTemplate::new(503).insert_header("Date", "Mon, 07 Nov 1994 08:49:37 GMT"),
        )
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_secs(5));
    let got = client.categories("US", None).await;
    assert!(got.result.is_ok(), "{got:?}");
    assert_eq!(got.date, Some(Secs::new(784_111_777)));
    let got = client.trending_page("US", None, None).await;
    assert!(got.result.is_err());
    assert_eq!(got.date, Some(Secs::new(784_111_777 + 86_400)));
    // No request, no answer to date.
    let got = client.videos_by_id(&[], None).await;
    assert!(got.result.is_ok(), "{got:?}");
    assert_eq!(got.date, None);
}

/// The request without a key carries it nowhere (neither header nor parameter): the
/// upstream refuses it before any project is known, as its 403 says, and its `Date`
/// still reaches the caller.
#[tokio::test]
async fn a_request_without_the_key_carries_it_nowhere_and_is_dated() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(403)
                .set_body_raw(
                    fixture!("error_unregistered_caller.json").to_vec(),
                    "application/json",
                )
                .insert_header("Date", "Sun, 06 Nov 1994 08:49:37 GMT"),
        )
        .mount(&server)
        .await;
    let client = client_for(&server.uri(), Duration::from_secs(5));
    let got = client.status_without_key().await;
    assert_eq!(got.result.ok(), Some(403));
    assert_eq!(got.date, Some(Secs::new(784_111_777)));
    let request = only_request(&server).await;
    assert_eq!(request.url.path(), "/youtube/v3/videoCategories");
    assert!(!request.headers.contains_key("x-goog-api-key"));
    assert!(query_pairs(&request).iter().all(|(k, _)| k != "key"));
    assert!(!format!("{request:?}").contains(KEY), "{request:?}");
}

// ---------------------------------------------------------------------------------
// When the upstream's daily quota resets.

fn at(s: &str) -> crate::clock::Micros {
    crate::clock::Micros::new(
        s.parse::<jiff::Timestamp>()
            .map(|t| t.as_microsecond())
            .unwrap_or_default(),
    )
}

#[test]
fn the_quota_resets_at_the_next_pacific_midnight() {
    // 2026-07-01 10:00 UTC is 03:00 PDT (UTC-7): reset at 07:00 UTC on July 2.
    assert_eq!(
        quota_reset_after(at("2026-07-01T10:00:00Z")),
        at("2026-07-02T07:00:00Z")
    );
    // In winter (PST, UTC-8).
    assert_eq!(
        quota_reset_after(at("2026-01-15T07:59:59Z")),
        at("2026-01-15T08:00:00Z")
    );
    // Across the spring-forward day the reset is still a local midnight.
    assert_eq!(
        quota_reset_after(at("2026-03-08T12:00:00Z")),
        at("2026-03-09T07:00:00Z")
    );
}
