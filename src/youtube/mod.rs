//! The YouTube Data API v3 client: requests, response types, error classification.
