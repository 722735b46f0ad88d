//! Text made safe for an HTML page.
//!
//! Every value the status page shows goes through [`text`]: control and
//! bidi characters become visible escapes ([`crate::printable`]), so a
//! session id cannot reorder or hide what surrounds it, and then `&`, `<`,
//! `>`, `"` and `'` become character references, so it cannot open a tag
//! or leave an attribute. The result is safe in element content and in a
//! quoted attribute value.

use crate::printable::printable;
use std::fmt;

/// Untrusted text, written for HTML.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Text<'a>(&'a str);

/// `s` for HTML element content or a quoted attribute value.
pub fn text(s: &str) -> Text<'_> {
    Text(s)
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = printable(self.0).to_string();
        let mut rest = shown.as_str();
        while let Some(at) = rest.find(['&', '<', '>', '"', '\'']) {
            f.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            f.write_str(match c {
                '&' => "&amp;",
                '<' => "&lt;",
                '>' => "&gt;",
                '"' => "&quot;",
                _ => "&#39;",
            })?;
            rest = &rest[at + c.len_utf8()..];
        }
        f.write_str(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_become_character_references() {
        let cases = [
            ("plain-id_42", "plain-id_42"),
            (
                "<script>alert(1)</script>",
                "&lt;script&gt;alert(1)&lt;/script&gt;",
            ),
            ("a & b", "a &amp; b"),
            ("\" onmouseover='x'", "&quot; onmouseover=&#39;x&#39;"),
            ("&amp;", "&amp;amp;"),
            ("café ☕ 日本", "café ☕ 日本"),
        ];
        for (raw, want) in cases {
            assert_eq!(text(raw).to_string(), want, "{raw:?}");
        }
    }

    #[test]
    fn control_and_bidi_characters_are_shown_as_escapes() {
        let shown = text("id\u{1b}[2J\r\n\u{202e}<b>").to_string();
        assert_eq!(shown, "id\\x1b[2J\\r\\n\\u{202e}&lt;b&gt;");
    }

    #[test]
    fn escaped_text_holds_no_markup_and_no_unsafe_character() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let shown = text(&all).to_string();
        assert!(!shown.contains(['<', '>', '"', '\'']), "{shown:?}");
        assert!(!shown.contains(crate::printable::is_unsafe));
        // Every `&` starts one of the five references.
        for (at, _) in shown.match_indices('&') {
            let tail = &shown[at..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&#39;"]
                    .iter()
                    .any(|r| tail.starts_with(r)),
                "{}",
                &tail[..tail.len().min(8)]
            );
        }
    }
}
