//! The upstream's JSON, parsed strictly enough to notice when it is not what we asked for
//! and leniently enough to survive the fields YouTube adds over time (unknown fields are
//! ignored; `kind`, `etag`, `pageInfo`, `localized` and friends may or may not be there).

use serde::Deserialize;

use super::duration::parse_duration_secs;
use super::types::{Category, SearchPage, VideoCounts, VideoPage, VideoRecord};

/// Deeper than any real response (those stop at about six levels); a body nested past
/// this is refused before serde sees it, so that the limit holds also for values serde
/// would skip without recursing.
pub(crate) const MAX_JSON_DEPTH: usize = 32;

/// Why a 2xx body could not be turned into records.
#[derive(Debug, thiserror::Error)]
pub enum MalformedResponse {
    #[error("JSON nested deeper than {limit} levels")]
    TooDeep { limit: usize },
    /// Said in its own words, not as `source`: `CallError::Malformed` quotes it whole.
    #[error("not the expected JSON: {0}")]
    Json(serde_json::Error),
    #[error("video {video_id:?}: {field} {value:?} is not {expected}")]
    BadField {
        video_id: String,
        field: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("search result {index}: a youtube#video without a videoId")]
    SearchResultWithoutId { index: usize },
    #[error("{got} items on a page asked for at most {max}")]
    TooManyItems { got: usize, max: usize },
    #[error("item {index}: {id:?} is not a video id")]
    BadVideoId { index: usize, id: String },
    #[error("video {id:?} appears twice on one page (items {first} and {again})")]
    DuplicateId {
        id: String,
        first: usize,
        again: usize,
    },
}

/// The most items a page may hold: `maxResults`, which trendsync always sets to this.
const MAX_ITEMS: usize = super::MAX_RESULTS;

/// Video ids are 11 characters of the URL-safe base64 alphabet today; only the alphabet
/// is checked, so that a longer id format would still pass. Anything else would corrupt
/// the comma-separated id list of the next call, or a stored row.
pub(crate) fn is_plausible_video_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A page breaks the protocol when it holds more than was asked for, an id that is not
/// a video id, or one id twice: each would end up as chart positions or search ranks
/// that never existed (docs/upstream.md).
fn check_ids<'a>(ids: impl ExactSizeIterator<Item = &'a str>) -> Result<(), MalformedResponse> {
    if ids.len() > MAX_ITEMS {
        return Err(MalformedResponse::TooManyItems {
            got: ids.len(),
            max: MAX_ITEMS,
        });
    }
    let mut seen = std::collections::HashMap::new();
    for (index, id) in ids.enumerate() {
        if !is_plausible_video_id(id) {
            return Err(MalformedResponse::BadVideoId {
                index,
                id: excerpt(id),
            });
        }
        if let Some(first) = seen.insert(id, index) {
            return Err(MalformedResponse::DuplicateId {
                id: id.to_owned(),
                first,
                again: index,
            });
        }
    }
    Ok(())
}

/// Refuses JSON nested deeper than `limit`, counting `[` and `{` outside strings.
///
/// Only nesting is checked; everything else is left to serde_json, which will reject
/// the same text for any other fault.
pub(crate) fn check_depth(body: &[u8], limit: usize) -> Result<(), MalformedResponse> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &byte in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(MalformedResponse::TooDeep { limit });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, MalformedResponse> {
    check_depth(body, MAX_JSON_DEPTH)?;
    serde_json::from_slice(body).map_err(MalformedResponse::Json)
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VideoListResponse {
    #[serde(default)]
    pub items: Vec<Video>,
    pub next_page_token: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Video {
    pub id: String,
    pub snippet: VideoSnippet,
    pub content_details: Option<ContentDetails>,
    pub statistics: Option<Statistics>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct VideoSnippet {
    pub published_at: String,
    pub channel_id: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub thumbnails: Thumbnails,
    #[serde(default)]
    pub channel_title: String,
    pub tags: Option<Vec<String>>,
    pub category_id: Option<String>,
    pub live_broadcast_content: Option<String>,
    pub default_language: Option<String>,
    pub default_audio_language: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Thumbnails {
    pub default: Option<Thumbnail>,
    pub medium: Option<Thumbnail>,
    pub high: Option<Thumbnail>,
    pub standard: Option<Thumbnail>,
    pub maxres: Option<Thumbnail>,
}

impl Thumbnails {
    fn best_url(self) -> Option<String> {
        [
            self.maxres,
            self.standard,
            self.high,
            self.medium,
            self.default,
        ]
        .into_iter()
        .flatten()
        .map(|thumbnail| thumbnail.url)
        .next()
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct Thumbnail {
    pub url: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContentDetails {
    pub duration: Option<String>,
    pub region_restriction: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Counts arrive as JSON strings ("1234"); a number where a string belongs is a change
/// of contract and is refused like any other shape error.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Statistics {
    pub view_count: Option<String>,
    pub like_count: Option<String>,
    pub comment_count: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchListResponse {
    #[serde(default)]
    pub items: Vec<SearchResult>,
    pub next_page_token: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SearchResult {
    pub id: SearchResultId,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchResultId {
    pub kind: String,
    pub video_id: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CategoryListResponse {
    #[serde(default)]
    pub items: Vec<RawCategory>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct RawCategory {
    pub id: String,
    pub snippet: CategorySnippet,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CategorySnippet {
    pub title: String,
}

pub(crate) fn video_page(body: &[u8]) -> Result<VideoPage, MalformedResponse> {
    let raw: VideoListResponse = parse(body)?;
    check_ids(raw.items.iter().map(|v| v.id.as_str()))?;
    let items = raw
        .items
        .into_iter()
        .map(Video::into_record)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(VideoPage {
        items,
        next_page_token: raw.next_page_token,
    })
}

pub(crate) fn search_page(body: &[u8]) -> Result<SearchPage, MalformedResponse> {
    let raw: SearchListResponse = parse(body)?;
    let mut video_ids = Vec::with_capacity(raw.items.len());
    for (index, item) in raw.items.into_iter().enumerate() {
        // type=video should leave only videos; a channel or playlist slipping through
        // is not a video to fetch, but it is not a broken response either.
        if item.id.kind != "youtube#video" {
            continue;
        }
        match item.id.video_id {
            Some(id) => video_ids.push(id),
            None => return Err(MalformedResponse::SearchResultWithoutId { index }),
        }
    }
    check_ids(video_ids.iter().map(String::as_str))?;
    Ok(SearchPage {
        video_ids,
        next_page_token: raw.next_page_token,
    })
}

pub(crate) fn categories(body: &[u8]) -> Result<Vec<Category>, MalformedResponse> {
    let raw: CategoryListResponse = parse(body)?;
    Ok(raw
        .items
        .into_iter()
        .map(|item| Category {
            id: item.id,
            title: item.snippet.title,
        })
        .collect())
}

/// What a count must look like, for the error that says it did not.
const COUNT_EXPECTED: &str = "a non-negative integer in a string";

/// A count as the upstream sends it ("1234"), absent as `None`; the text back when it
/// is not a count.
fn parse_count(value: Option<String>) -> Result<Option<i64>, String> {
    match value {
        None => Ok(None),
        // u64's parser takes a leading '+'; the upstream never sends one.
        Some(text) => Some(&text)
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|t| t.parse::<u64>().ok())
            .and_then(|n| i64::try_from(n).ok())
            .map(Some)
            .ok_or(text),
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct BatchGetStatsResponse {
    #[serde(default)]
    pub items: Vec<VideoStat>,
}

/// One `youtube#videoStats` item; only its id and statistics are asked for.
#[derive(Debug, Deserialize)]
pub(crate) struct VideoStat {
    pub id: String,
    pub statistics: Option<Statistics>,
}

/// `videos.batchGetStats`' answer: each video's counts, in the upstream's order. The
/// same checks as a page of videos (at most 50, real ids, none twice): a video left
/// out is one the upstream no longer shows, so one invented would hide that.
pub(crate) fn video_counts(body: &[u8]) -> Result<Vec<VideoCounts>, MalformedResponse> {
    let raw: BatchGetStatsResponse = parse(body)?;
    check_ids(raw.items.iter().map(|v| v.id.as_str()))?;
    raw.items
        .into_iter()
        .map(|item| {
            let stats = item.statistics.unwrap_or(Statistics {
                view_count: None,
                like_count: None,
                comment_count: None,
            });
            let count = |field: &'static str, value: Option<String>| {
                parse_count(value).map_err(|text| MalformedResponse::BadField {
                    video_id: item.id.clone(),
                    field,
                    value: excerpt(&text),
                    expected: COUNT_EXPECTED,
                })
            };
            Ok(VideoCounts {
                view_count: count("statistics.viewCount", stats.view_count)?,
                like_count: count("statistics.likeCount", stats.like_count)?,
                comment_count: count("statistics.commentCount", stats.comment_count)?,
                id: item.id.clone(),
            })
        })
        .collect()
}

/// Bad values are echoed in errors; this keeps an absurd one from flooding a log line.
fn excerpt(value: &str) -> String {
    const MAX_CHARS: usize = 64;
    if value.chars().count() <= MAX_CHARS {
        value.to_owned()
    } else {
        let mut short: String = value.chars().take(MAX_CHARS).collect();
        short.push('…');
        short
    }
}

impl Video {
    fn into_record(self) -> Result<VideoRecord, MalformedResponse> {
        let id = self.id;
        let bad = |field: &'static str, value: &str, expected: &'static str| {
            MalformedResponse::BadField {
                video_id: id.clone(),
                field,
                value: excerpt(value),
                expected,
            }
        };

        let snippet = self.snippet;
        if snippet.published_at.parse::<jiff::Timestamp>().is_err() {
            return Err(bad(
                "snippet.publishedAt",
                &snippet.published_at,
                "an RFC 3339 timestamp",
            ));
        }

        let (duration_s, region_restriction) = match self.content_details {
            Some(details) => {
                let duration_s = match details.duration {
                    Some(text) => Some(parse_duration_secs(&text).ok_or_else(|| {
                        bad(
                            "contentDetails.duration",
                            &text,
                            "an ISO 8601 duration in days, hours, minutes and seconds",
                        )
                    })?),
                    None => None,
                };
                let restriction = details
                    .region_restriction
                    .map(|object| serde_json::Value::Object(object).to_string());
                (duration_s, restriction)
            }
            None => (None, None),
        };

        let count = |field: &'static str, value: Option<String>| {
            parse_count(value).map_err(|text| bad(field, &text, COUNT_EXPECTED))
        };
        let (view_count, like_count, comment_count) = match self.statistics {
            Some(stats) => (
                count("statistics.viewCount", stats.view_count)?,
                count("statistics.likeCount", stats.like_count)?,
                count("statistics.commentCount", stats.comment_count)?,
            ),
            None => (None, None, None),
        };

        Ok(VideoRecord {
            title: snippet.title,
            description: snippet.description,
            channel_id: snippet.channel_id,
            channel_title: snippet.channel_title,
            published_at: snippet.published_at,
            category_id: snippet.category_id,
            tags: snippet.tags,
            default_language: snippet.default_language,
            default_audio_language: snippet.default_audio_language,
            duration_s,
            live_broadcast_content: snippet.live_broadcast_content,
            thumbnail_url: snippet.thumbnails.best_url(),
            region_restriction,
            view_count,
            like_count,
            comment_count,
            id,
        })
    }
}
