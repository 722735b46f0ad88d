//! How findings and progress are printed: an aligned table for people, or
//! one JSON object per line. Text that came from the gateway (session ids,
//! labels, model names in explanations) is printed through
//! [`printable`], so it cannot move the cursor or forge a line.

use super::Format;
use costwatch::backtest::Replay;
use costwatch::detect::Finding;
use costwatch::pipeline::WindowReport;
use costwatch::printable::printable;
use costwatch::source::links::SessionLinks;
use std::fmt::Write as _;
use std::io::Write as _;

/// One finding as a JSON line with the documented fields.
pub fn jsonl_row(f: &Finding) -> serde_json::Value {
    linked_row(f, None)
}

/// [`jsonl_row`] with the session's `link` in the team's own tool, when
/// there is one.
pub fn linked_row(f: &Finding, links: Option<&SessionLinks>) -> serde_json::Value {
    let mut row = serde_json::json!({
        "kind": f.kind,
        "session_id": f.session_id,
        "window_start": f.window.start.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "window_end": f.window.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "severity": f.severity,
        "rule": f.rule,
        "group": f.group,
        "labels": f.labels,
        "cost_usd": f.cost_usd,
        "impact_usd": f.impact_usd,
        "evidence": f.evidence,
        "explanation": f.explanation,
        "what_to_do": costwatch::detect::remedy::what_to_do(f.kind, &f.evidence),
    });
    if let (Some(link), Some(map)) = (
        links.and_then(|l| l.session(&f.session_id)),
        row.as_object_mut(),
    ) {
        map.insert("link".into(), serde_json::Value::String(link));
    }
    row
}

/// One finding as a table row.
pub fn table_row(f: &Finding) -> String {
    format!(
        "{}  {:<15} {:<8} {:<34} {:<26} +${:<9.5} {}",
        f.window.start.format("%Y-%m-%d %H:%M"),
        f.kind.as_str(),
        f.severity.as_str(),
        printable(&f.session_id),
        printable(&f.group),
        f.impact_usd,
        printable(&f.explanation)
    )
}

/// `text` with every line indented by three spaces.
pub fn indent(text: &str) -> String {
    text.lines().map(|l| format!("   {l}\n")).collect()
}

/// Prints findings as windows complete, and progress on stderr.
pub struct Progress {
    format: Format,
    windows: usize,
    findings: usize,
}

impl Progress {
    pub fn new(format: Format) -> Self {
        Progress {
            format,
            windows: 0,
            findings: 0,
        }
    }

    pub fn window(&mut self, r: &WindowReport) {
        self.windows += 1;
        self.findings += r.new_findings.len();
        // The window's rows are formatted first and written at once:
        // formatting straight into the locked stdout makes a write call per
        // token.
        let mut text = String::new();
        for f in &r.new_findings {
            let _ = match self.format {
                Format::Jsonl => writeln!(text, "{}", jsonl_row(f)),
                Format::Table => writeln!(text, "{}", table_row(f)),
            };
        }
        if !text.is_empty() {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
        if self.windows.is_multiple_of(96) {
            eprintln!(
                "backtest: {} windows up to {}, {} findings",
                self.windows, r.window.end, self.findings
            );
        }
    }

    pub fn done(&self, r: &Replay) {
        eprintln!(
            "backtest: {} windows, {} session rows, {} drill-downs, {} findings",
            r.windows,
            r.sessions,
            r.drilldowns,
            r.findings.len()
        );
        if !r.retried.is_empty() {
            eprintln!(
                "backtest: read again after a failed read: {}",
                r.retried.len()
            );
        }
        for retried in &r.retried {
            let what = retried
                .window
                .map_or_else(|| "model catalogue".to_owned(), |w| format!("window {w}"));
            eprintln!(
                "  {what}: {} reads; last failure: {}",
                retried.reads, retried.last_error
            );
        }
    }
}
