//! The email subject and its plain-text and HTML bodies.

use super::{Investigation, facts, is_http_url, pretty, usd};
use crate::notify::chart::{CHART_HEIGHT, CHART_WIDTH};
use crate::notify::{Alert, AlertSession};
use crate::printable::printable;
use std::fmt::Write as _;

/// The email subject: the alert's title on one line, with control and bidi
/// characters (which the group's labels may carry) as visible escapes.
pub fn email_subject(alert: &Alert) -> String {
    printable(&alert.title).to_string()
}

/// The plain-text email body.
pub fn email_text(alert: &Alert) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", printable(&alert.title));
    let _ = writeln!(out);
    if !alert.summary.is_empty() {
        let _ = writeln!(out, "{}", alert.summary);
        let _ = writeln!(out);
    }
    if let Some(line) = alert.what_to_do() {
        let _ = writeln!(out, "What to do: {line}.");
        let _ = writeln!(out);
    }
    for (name, value) in facts(alert) {
        let _ = writeln!(out, "{:<13} {}", format!("{name}:"), value);
    }
    if let Some(chart) = &alert.chart {
        let _ = writeln!(out);
        let _ = writeln!(out, "{}", printable(&chart.describe()));
    }

    if let Some(inv) = Investigation::of(alert) {
        let _ = writeln!(out);
        match inv.cost_usd {
            Some(cost) => {
                let _ = writeln!(out, "Investigation (cost {}):", usd(cost));
            }
            None => {
                let _ = writeln!(out, "Investigation:");
            }
        }
        let _ = writeln!(out, "{}", inv.summary);
    }

    if !alert.sessions.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Top sessions (largest impact first):");
        for (i, s) in alert.sessions.iter().enumerate() {
            let _ = writeln!(
                out,
                "{}. {}  cost {}  impact +{}",
                i + 1,
                printable(&s.session_id),
                usd(s.cost_usd),
                usd(s.impact_usd)
            );
            if !s.explanation.is_empty() {
                let _ = writeln!(out, "   {}", printable(&s.explanation));
            }
            if let Some(link) = &s.link {
                let _ = writeln!(out, "   {link}");
            }
        }
    }

    if let Some(top) = alert.sessions.first() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Evidence for {}:", printable(&top.session_id));
        let _ = writeln!(out, "{}", pretty(&top.evidence));
    }

    let _ = writeln!(out);
    let _ = writeln!(out, "Fingerprint:  {}", alert.fingerprint);
    let _ = writeln!(out, "Notification: {}", alert.idempotency_key());
    out
}

/// The HTML email body; every value from the alert is escaped.
pub fn email_html(alert: &Alert) -> String {
    email_html_with_chart(alert, None)
}

/// The HTML email body showing the chart from the message part whose
/// `Content-ID` is `chart_cid` (without angle brackets), when there is one;
/// the image's alt text says what it shows.
pub fn email_html_with_chart(alert: &Alert, chart_cid: Option<&str>) -> String {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">");
    let _ = write!(out, "<title>{}</title>", escape_html(&alert.title));
    out.push_str("</head>\n<body style=\"font-family: sans-serif\">\n");
    let _ = writeln!(out, "<h2>{}</h2>", escape_html(&alert.title));
    if !alert.summary.is_empty() {
        let _ = writeln!(out, "<p>{}</p>", escape_html(&alert.summary));
    }
    if let Some(line) = alert.what_to_do() {
        let _ = writeln!(out, "<p><b>What to do:</b> {}.</p>", escape_html(line));
    }

    out.push_str("<table cellpadding=\"4\">\n");
    for (name, value) in facts(alert) {
        let _ = writeln!(
            out,
            "<tr><th align=\"left\">{}</th><td>{}</td></tr>",
            escape_html(name),
            escape_html(&value)
        );
    }
    out.push_str("</table>\n");

    if let (Some(chart), Some(cid)) = (&alert.chart, chart_cid) {
        let _ = writeln!(
            out,
            "<p><img src=\"cid:{}\" width=\"{}\" height=\"{}\" alt=\"{}\" style=\"max-width: 100%; height: auto\"></p>",
            escape_html(cid),
            CHART_WIDTH,
            CHART_HEIGHT,
            escape_html(&chart.describe())
        );
    }

    if let Some(inv) = Investigation::of(alert) {
        match inv.cost_usd {
            Some(cost) => {
                let _ = writeln!(
                    out,
                    "<h3>Investigation (cost {})</h3>",
                    escape_html(&usd(cost))
                );
            }
            None => out.push_str("<h3>Investigation</h3>\n"),
        }
        let _ = writeln!(out, "<p>{}</p>", escape_html(&inv.summary));
    }

    if !alert.sessions.is_empty() {
        out.push_str("<h3>Top sessions</h3>\n<table border=\"1\" cellpadding=\"4\" style=\"border-collapse: collapse\">\n");
        out.push_str("<tr><th>Session</th><th>Cost</th><th>Impact</th><th>Explanation</th></tr>\n");
        for s in &alert.sessions {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td><td>+{}</td><td>{}</td></tr>",
                session_cell(s),
                escape_html(&usd(s.cost_usd)),
                escape_html(&usd(s.impact_usd)),
                escape_html(&s.explanation)
            );
        }
        out.push_str("</table>\n");
    }

    if let Some(top) = alert.sessions.first() {
        let _ = writeln!(
            out,
            "<h3>Evidence for {}</h3>\n<pre>{}</pre>",
            escape_html(&top.session_id),
            escape_html(&pretty(&top.evidence))
        );
    }

    let _ = writeln!(
        out,
        "<p style=\"color: #666\">Fingerprint {}<br>Notification {}</p>",
        escape_html(&alert.fingerprint),
        escape_html(&alert.idempotency_key())
    );
    out.push_str("</body></html>\n");
    out
}

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

fn session_cell(s: &AlertSession) -> String {
    match s.link.as_deref().filter(|l| is_http_url(l)) {
        Some(link) => format!(
            "<a href=\"{}\">{}</a>",
            escape_html(link),
            escape_html(&s.session_id)
        ),
        None => escape_html(&s.session_id),
    }
}
