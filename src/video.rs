//! The one record of a video that the upstream client produces and the store keeps.

/// One video as the store keeps it.
///
/// Every `Option` is `None` exactly when the upstream left the field out, so that the
/// store can write NULL: a hidden like count is not zero likes, and a video without tags
/// is not a video with an empty tag list.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoRecord {
    pub id: String,
    pub title: String,
    pub description: String,
    pub channel_id: String,
    pub channel_title: String,
    /// RFC 3339, as the upstream sent it (checked to be a valid timestamp).
    pub published_at: String,
    pub category_id: Option<String>,
    /// As sent; absent stays `None`.
    pub tags: Option<Vec<String>>,
    pub default_language: Option<String>,
    pub default_audio_language: Option<String>,
    /// Seconds; `Some(0)` for a live broadcast (`P0D`).
    pub duration_s: Option<i64>,
    pub live_broadcast_content: Option<String>,
    /// The largest thumbnail the upstream offered (maxres, standard, high, medium, default).
    pub thumbnail_url: Option<String>,
    /// The `regionRestriction` object as compact JSON text, e.g. `{"blocked":["DE"]}`.
    pub region_restriction: Option<String>,
    pub view_count: Option<i64>,
    pub like_count: Option<i64>,
    pub comment_count: Option<i64>,
}

#[cfg(test)]
impl VideoRecord {
    /// A video with only what the upstream always sends: every optional field left
    /// out. Tests start their own records from it.
    pub(crate) fn bare(id: &str) -> VideoRecord {
        VideoRecord {
            id: id.to_owned(),
            title: format!("title of {id}"),
            description: String::new(),
            channel_id: format!("UC{id}"),
            channel_title: "Some Channel".to_owned(),
            published_at: "2024-05-01T12:00:00Z".to_owned(),
            category_id: None,
            tags: None,
            default_language: None,
            default_audio_language: None,
            duration_s: None,
            live_broadcast_content: None,
            thumbnail_url: None,
            region_restriction: None,
            view_count: None,
            like_count: None,
            comment_count: None,
        }
    }
}
