//! Untrusted text made safe to print.
//!
//! Session ids, label values, model names and error messages come from the
//! gateway. Printed raw, an ESC starts a terminal escape sequence, a CR or
//! LF forges a line of a table or a log, and a bidi override reorders what
//! a reader sees. [`Printable`] writes such characters as visible escapes
//! instead; every place that prints gateway text to a terminal, a log line
//! or an email header goes through it.
//!
//! Escaped are the C0 controls, DEL and the C1 controls (`\n`, `\r`, `\t`,
//! otherwise `\x1b` or `\u{9b}`), the Unicode bidi controls (U+061C,
//! U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), the line and paragraph
//! separators (U+2028, U+2029) and the byte order mark (U+FEFF), as
//! `\u{202e}`. Everything else, backslashes included, is written as it is,
//! so escaping twice changes nothing.

use std::fmt;

/// Whether `c` must not reach a terminal, a log line or a header as it is.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{feff}'
        )
}

/// `text` for printing: see the module documentation. Width and alignment
/// (`{:<34}`) apply to the escaped text.
pub fn printable(text: &str) -> Printable<'_> {
    Printable(text)
}

/// A `Display` of untrusted text with every unsafe character escaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Printable<'a>(pub &'a str);

impl Printable<'_> {
    fn write_to(&self, out: &mut impl fmt::Write) -> fmt::Result {
        let mut rest = self.0;
        while let Some(at) = rest.find(is_unsafe) {
            out.write_str(&rest[..at])?;
            let c = rest[at..].chars().next().unwrap_or_default();
            match c {
                '\n' => out.write_str("\\n")?,
                '\r' => out.write_str("\\r")?,
                '\t' => out.write_str("\\t")?,
                c if u32::from(c) < 0x80 => write!(out, "\\x{:02x}", u32::from(c))?,
                c => write!(out, "\\u{{{:x}}}", u32::from(c))?,
            }
            rest = &rest[at + c.len_utf8()..];
        }
        out.write_str(rest)
    }
}

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.width().is_none() && f.precision().is_none() {
            return self.write_to(f);
        }
        let mut escaped = String::with_capacity(self.0.len());
        self.write_to(&mut escaped)?;
        f.pad(&escaped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_overrides_become_visible_escapes() {
        let cases = [
            ("plain-id_42", "plain-id_42"),
            ("a\nb", "a\\nb"),
            ("a\r\nb", "a\\r\\nb"),
            ("\tx", "\\tx"),
            ("\u{1b}[2J\u{1b}]0;title\u{7}", "\\x1b[2J\\x1b]0;title\\x07"),
            ("nul\0", "nul\\x00"),
            ("del\u{7f}", "del\\x7f"),
            ("csi\u{9b}31m", "csi\\u{9b}31m"),
            ("nel\u{85}", "nel\\u{85}"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
            ("\u{200f}\u{061c}", "\\u{200f}\\u{61c}"),
            ("line\u{2028}sep", "line\\u{2028}sep"),
            ("\u{feff}bom", "\\u{feff}bom"),
            ("café ☕ 日本", "café ☕ 日本"),
            ("back\\slash", "back\\slash"),
        ];
        for (raw, want) in cases {
            assert_eq!(printable(raw).to_string(), want, "{raw:?}");
        }
    }

    #[test]
    fn printed_text_holds_no_unsafe_character_and_escaping_twice_changes_nothing() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let once = printable(&all).to_string();
        assert!(!once.contains(is_unsafe), "{once:?}");
        assert_eq!(printable(&once).to_string(), once);
    }

    #[test]
    fn width_pads_the_escaped_text() {
        assert_eq!(format!("[{:<6}]", printable("a\nb")), "[a\\nb  ]");
        assert_eq!(format!("[{:>5}]", printable("ab")), "[   ab]");
    }
}
