//! Unit tests of `cmd/video.rs`.

use super::*;

#[test]
fn an_id_or_any_url_search_prints_names_the_video() {
    for arg in [
        "dQw4w9WgXcQ",
        " dQw4w9WgXcQ ",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://www.youtube.com/watch?v=dQw4w9WgXcQ&t=42s",
        "https://www.youtube.com/watch?feature=share&v=dQw4w9WgXcQ",
        "www.youtube.com/watch?v=dQw4w9WgXcQ",
        "http://m.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://music.youtube.com/watch?v=dQw4w9WgXcQ",
        "https://youtu.be/dQw4w9WgXcQ",
        "youtu.be/dQw4w9WgXcQ?si=abc",
        "https://www.youtube.com/shorts/dQw4w9WgXcQ",
        "https://YouTube.com/embed/dQw4w9WgXcQ",
        "https://www.youtube.com/live/dQw4w9WgXcQ?feature=share",
    ] {
        assert_eq!(
            video_id(arg).map_err(|e| e.0).as_deref(),
            Ok("dQw4w9WgXcQ"),
            "{arg}"
        );
    }
}

#[test]
fn a_url_that_names_no_video_is_a_usage_error() {
    for arg in [
        "https://example.com/watch?v=dQw4w9WgXcQ",
        "https://www.youtube.com/",
        "https://www.youtube.com/watch?list=PL123",
        "https://www.youtube.com/channel/UC123",
        "https://youtu.be/",
        "https://www.youtube.com/shorts/",
    ] {
        let err = video_id(arg).expect_err(arg);
        assert!(err.0.contains("names no YouTube video"), "{arg}: {}", err.0);
    }
}
