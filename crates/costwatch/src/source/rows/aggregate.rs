//! Grouping call rows into sessions.
