//! A string that never shows itself in `Debug`, `Display` or logs.

use sha2::{Digest, Sha256};
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

/// The bearer token an endpoint requires (the OTLP receiver's, the MCP
/// server's), kept as its SHA-256 digest: a request's token is compared
/// digest to digest, so the comparison's time says nothing about the token.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken([u8; 32]);

impl BearerToken {
    /// The token `secret` holds.
    pub fn new(secret: &Secret) -> BearerToken {
        BearerToken(Sha256::digest(secret.expose().as_bytes()).into())
    }

    /// Whether an `Authorization` header value carries this token (the
    /// scheme is case-insensitive, RFC 9110 section 11.1).
    pub fn admits(&self, authorization: Option<&[u8]>) -> bool {
        let Some(token) = authorization
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| {
                let (scheme, token) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then_some(token)
            })
        else {
            return false;
        };
        let given: [u8; 32] = Sha256::digest(token.trim().as_bytes()).into();
        given == self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken([redacted])")
    }
}
