//! A string that never shows itself in `Debug`, `Display` or logs.

use std::fmt;

/// A credential such as the gateway admin key.
///
/// `Debug` and `Display` print `[redacted]`; the value is reached only through
/// [`Secret::expose`], which makes every use easy to find.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential. Surrounding whitespace (a trailing newline in a
    /// credential file) is removed.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into().trim().to_owned())
    }

    /// Returns the credential itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the credential is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("sk-live-123\n");
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(s.expose(), "sk-live-123");
    }
}
