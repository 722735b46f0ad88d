//! Lists for people and for programs: an aligned table that fits the
//! terminal, one JSON array, or CSV with a header (RFC 4180).
//!
//! Every cell of a table or a CSV file is printed through [`printable`], so
//! text that came from the gateway (session ids, labels, model names in
//! explanations) cannot move the cursor or forge a line. JSON keeps such
//! text as it is, but written with `\u` escapes ([`json_text`]), so the
//! bytes on the terminal carry no control or bidi character either.

use clap::ValueEnum;
use costwatch::printable::{is_unsafe, printable};
use serde::Serialize;
use std::io::Write;

/// How a list is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Aligned columns that fit the terminal.
    Table,
    /// One JSON array.
    Json,
    /// CSV with a header row (RFC 4180 quoting).
    Csv,
}

/// How one record is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// Text for people.
    Text,
    /// One JSON object.
    Json,
}

/// A column: its header, whether it is a number (right-aligned), and how
/// willing it is to be cut when the terminal is too narrow (0: never).
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// The header.
    pub header: &'static str,
    /// Right-aligned.
    pub number: bool,
    /// Cut order: higher is cut first; 0 is never cut.
    pub shrink: u8,
}

impl Column {
    /// A text column that is never cut.
    pub const fn fixed(header: &'static str) -> Column {
        Column {
            header,
            number: false,
            shrink: 0,
        }
    }

    /// A number column.
    pub const fn number(header: &'static str) -> Column {
        Column {
            header,
            number: true,
            shrink: 0,
        }
    }

    /// A text column cut (with `…`) when the terminal is too narrow;
    /// columns with a higher `order` are cut first.
    pub const fn cut(header: &'static str, order: u8) -> Column {
        Column {
            header,
            number: false,
            shrink: order,
        }
    }
}

/// Rows of cells under columns.
#[derive(Debug, Clone)]
pub struct Table {
    columns: Vec<Column>,
    rows: Vec<Vec<String>>,
}

/// Narrowest a cut column gets.
const MIN_CUT_WIDTH: usize = 12;
/// Spaces between columns.
const GAP: usize = 2;

impl Table {
    /// An empty table.
    pub fn new(columns: &[Column]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one cell per column).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// The aligned table, cut to `width` characters a line when given.
    pub fn render(&self, width: Option<usize>) -> String {
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| r.iter().map(|c| printable(c).to_string()).collect())
            .collect();
        let mut widths: Vec<usize> = self
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                rows.iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .chain([c.header.chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        if let Some(limit) = width {
            fit(&self.columns, &mut widths, limit);
        }
        let mut out = String::new();
        let headers: Vec<String> = self.columns.iter().map(|c| c.header.to_owned()).collect();
        for row in std::iter::once(&headers).chain(rows.iter()) {
            let mut line = String::new();
            for (i, (c, w)) in self.columns.iter().zip(&widths).enumerate() {
                let cell = cut(row.get(i).map_or("", String::as_str), *w);
                let last = i + 1 == self.columns.len();
                let pad = w.saturating_sub(cell.chars().count());
                if c.number {
                    line.push_str(&" ".repeat(pad));
                    line.push_str(&cell);
                } else {
                    line.push_str(&cell);
                    if !last {
                        line.push_str(&" ".repeat(pad));
                    }
                }
                if !last {
                    line.push_str(&" ".repeat(GAP));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// CSV: a header row, then one row per record, CRLF line ends.
    pub fn csv(&self) -> String {
        let mut out = String::new();
        let headers: Vec<String> = self
            .columns
            .iter()
            .map(|c| c.header.to_lowercase().replace(' ', "_"))
            .collect();
        for row in std::iter::once(&headers).chain(self.rows.iter()) {
            let cells: Vec<String> = row
                .iter()
                .map(|c| csv_field(&printable(c).to_string()))
                .collect();
            out.push_str(&cells.join(","));
            out.push_str("\r\n");
        }
        out
    }
}

/// Shrinks the cut columns, highest order first, until the line fits
/// `limit` or none can shrink further: first down to [`MIN_CUT_WIDTH`]
/// each, then, if that is not enough, down to their headers.
fn fit(columns: &[Column], widths: &mut [usize], limit: usize) {
    let total = |w: &[usize]| w.iter().sum::<usize>() + GAP * w.len().saturating_sub(1);
    let mut order: Vec<usize> = (0..columns.len())
        .filter(|&i| columns[i].shrink > 0)
        .collect();
    order.sort_by_key(|&i| std::cmp::Reverse(columns[i].shrink));
    for least in [MIN_CUT_WIDTH, 0] {
        for &i in &order {
            let over = total(widths).saturating_sub(limit);
            if over == 0 {
                return;
            }
            let floor = least.max(columns[i].header.chars().count());
            widths[i] = widths[i].saturating_sub(over).max(floor.min(widths[i]));
        }
    }
}

/// `text` cut to `width` characters, ending in `…` when cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break
/// (quotes doubled), as RFC 4180 says.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// `value` as pretty JSON with every control, bidi or other unsafe
/// character written as a `\u` escape: the same JSON to a parser, nothing
/// raw on a terminal.
pub fn json_text(value: &impl Serialize) -> anyhow::Result<String> {
    let text = serde_json::to_string_pretty(value)?;
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        // Outside strings JSON is plain ASCII, so an unsafe character is
        // always inside a string, where `\uXXXX` means the same.
        if is_unsafe(c) && c != '\n' {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// The width tables are cut to: `COLUMNS` when set, else the terminal's
/// when stdout is one; `None` (no cutting) for a pipe or a file.
pub fn terminal_width() -> Option<usize> {
    if let Some(n) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        return Some(n);
    }
    let stdout = std::io::stdout();
    rustix::termios::tcgetwinsize(&stdout)
        .ok()
        .map(|w| usize::from(w.ws_col))
        .filter(|n| *n > 0)
}

/// Writes `text` to stdout; a reader that stopped early (`| head`) is fine.
pub fn print(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&[
            Column::fixed("KIND"),
            Column::number("IMPACT"),
            Column::cut("EXPLANATION", 1),
        ]);
        t.push(vec!["no_cache".into(), "$1.50".into(), "a".repeat(60)]);
        t.push(vec!["retry_loop".into(), "$12.00".into(), "short".into()]);
        t
    }

    #[test]
    fn columns_align_and_numbers_sit_right() {
        let text = table().render(None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "KIND        IMPACT  EXPLANATION");
        assert!(lines[1].starts_with("no_cache     $1.50  aaaa"), "{text}");
        assert_eq!(lines[2], "retry_loop  $12.00  short");
    }

    #[test]
    fn a_narrow_terminal_cuts_the_cut_columns_only() {
        let text = table().render(Some(40));
        for line in text.lines() {
            assert!(line.chars().count() <= 40, "{line}");
        }
        assert!(text.lines().nth(1).unwrap().ends_with('…'), "{text}");
        assert!(text.contains("retry_loop  $12.00"));
    }

    #[test]
    fn csv_quotes_as_rfc_4180_and_escapes_controls() {
        let mut t = Table::new(&[Column::fixed("SESSION ID"), Column::fixed("NOTE")]);
        t.push(vec!["a,b".into(), "say \"hi\"\u{1b}[2J".into()]);
        assert_eq!(
            t.csv(),
            "session_id,note\r\n\"a,b\",\"say \"\"hi\"\"\\x1b[2J\"\r\n"
        );
    }

    #[test]
    fn json_keeps_the_text_but_prints_no_raw_control_or_bidi() {
        let value = serde_json::json!({"id": "s\u{1b}[2J\u{202e}\u{9b}x\u{1F600}"});
        let text = json_text(&value).unwrap();
        assert!(!text.chars().any(|c| is_unsafe(c) && c != '\n'), "{text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }
}
