//! The status page as one HTML document: no script, no external asset,
//! inline CSS, readable from a phone's width up (tables turn into one card
//! per row below 40rem).
//!
//! Pure: a [`Status`] in, the document out. Every string from the state
//! goes through [`text`]; what this file formats itself (numbers, times,
//! money) goes through it too, so nothing reaches the page unescaped.

use super::data::{
    BudgetView, Capped, FindingsView, IncidentView, JobView, Section, SilenceView, SourceView,
    Status,
};
use super::escape::text;
use super::overview;
use chrono::{DateTime, Duration as ChronoDuration, Utc};
use std::fmt::{self, Write as _};

const STYLE: &str = include_str!("style.css");

/// The page for `s`.
pub fn render(s: &Status) -> String {
    let mut out = String::with_capacity(32 * 1024);
    // Writing into a String cannot fail.
    let _ = page(&mut out, s);
    out
}

fn page(out: &mut String, s: &Status) -> fmt::Result {
    let now = s.generated_at;
    writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<header>\n\
         <h1>costwatch status</h1>\n<p class=\"meta\">At {}, from replica <code>{}</code>.</p>",
        text(&title(s)),
        text(&when_exact(now)),
        text(&s.replica.name),
    )?;
    summary(out, s)?;
    out.push_str(
        "<nav><a href=\"#impact\">Impact</a> <a href=\"#groups\">Groups</a> \
         <a href=\"#last-incidents\">Last incidents</a> \
         <a href=\"#incidents\">Open incidents</a> <a href=\"#findings\">Findings</a> \
         <a href=\"#silences\">Silences</a> <a href=\"#windows\">Windows</a> \
         <a href=\"#source\">Source</a> <a href=\"#budget\">Budget</a></nav>\n</header>\n<main>\n",
    );
    overview::impact(out, &s.impact)?;
    overview::top_groups(out, &s.top_groups)?;
    overview::last_incidents(out, &s.last_incidents)?;
    incidents(out, &s.incidents)?;
    findings(out, &s.findings)?;
    silences(out, &s.silences, now)?;
    jobs(out, &s.jobs, now)?;
    source(out, s)?;
    budget(out, &s.budget)?;
    out.push_str(
        "</main>\n<footer><p class=\"meta\">Data times are window bounds; the other times are \
         wall time. The same as JSON: <a href=\"/?format=json\">/?format=json</a> · \
         <a href=\"/metrics\">/metrics</a> · <a href=\"/healthz\">/healthz</a></p></footer>\n\
         </body>\n</html>\n",
    );
    Ok(())
}

/// The document's title: the open incidents, for a browser tab.
fn title(s: &Status) -> String {
    match &s.incidents {
        Section::Read(list) if list.items.is_empty() => "costwatch: no open incident".to_owned(),
        Section::Read(list) if list.items.len() == 1 && !list.more => {
            "costwatch: 1 open incident".to_owned()
        }
        Section::Read(list) => format!(
            "costwatch: {}{} open incidents",
            list.items.len(),
            if list.more { "+" } else { "" }
        ),
        Section::Failed { .. } => "costwatch status".to_owned(),
    }
}

/// One line per section: what needs a look first.
fn summary(out: &mut String, s: &Status) -> fmt::Result {
    out.push_str("<ul class=\"summary\">\n");
    match &s.incidents {
        Section::Read(list) => {
            let n = list.items.len();
            let more = if list.more { "+" } else { "" };
            let class = if n == 0 { "ok" } else { "bad" };
            let noun = if n == 1 { "incident" } else { "incidents" };
            writeln!(
                out,
                "<li class=\"{class}\">{}{} open {noun}</li>",
                n,
                text(more)
            )?;
        }
        Section::Failed { .. } => out.push_str("<li class=\"bad\">incidents unknown</li>\n"),
    }
    match &s.source {
        Section::Read(src) if src.healthy => {
            out.push_str("<li class=\"ok\">gateway healthy</li>\n")
        }
        Section::Read(_) => out.push_str("<li class=\"bad\">gateway unhealthy</li>\n"),
        Section::Failed { .. } => out.push_str("<li class=\"bad\">gateway unknown</li>\n"),
    }
    if let Section::Read(jobs) = &s.jobs
        && let Some(main) = jobs.items.iter().find(|j| j.windows_due.is_some())
    {
        writeln!(
            out,
            "<li>data up to {} ({} behind)</li>",
            text(&when(main.watermark)),
            text(&span(ChronoDuration::seconds(main.lag_seconds)))
        )?;
    }
    if let Section::Read(list) = &s.silences {
        let n = list.items.len();
        let noun = if n == 1 { "silence" } else { "silences" };
        writeln!(out, "<li>{n} {noun} active</li>")?;
    }
    if let Section::Read(b) = &s.budget {
        writeln!(
            out,
            "<li>{} of {} investigation budget spent today</li>",
            text(&usd(b.spent_usd)),
            text(&usd(b.cap_usd))
        )?;
    }
    out.push_str("</ul>\n");
    Ok(())
}

/// The section's heading, then its error if it could not be read.
pub(super) fn heading<'a, T>(
    out: &mut String,
    id: &str,
    title: &str,
    section: &'a Section<T>,
) -> Result<Option<&'a T>, fmt::Error> {
    writeln!(
        out,
        "<section id=\"{}\">\n<h2>{}</h2>",
        text(id),
        text(title)
    )?;
    match section {
        Section::Read(v) => Ok(Some(v)),
        Section::Failed { error } => {
            writeln!(
                out,
                "<p class=\"error\">Could not be read: {}</p>\n</section>",
                text(error)
            )?;
            Ok(None)
        }
    }
}

pub(super) fn none(out: &mut String, what: &str) -> fmt::Result {
    writeln!(out, "<p class=\"none\">{}</p>\n</section>", text(what))
}

pub(super) fn more_note<T>(out: &mut String, list: &Capped<T>, command: &str) -> fmt::Result {
    if list.more {
        writeln!(
            out,
            "<p class=\"note\">Only the first {}; <code>{}</code> lists them all.</p>",
            list.items.len(),
            text(command)
        )?;
    }
    Ok(())
}

/// `<td data-label="label" class="class">value</td>`, escaped.
pub(super) fn cell(out: &mut String, label: &str, class: &str, value: &str) -> fmt::Result {
    write!(
        out,
        "<td data-label=\"{}\" class=\"{}\">{}</td>",
        text(label),
        text(class),
        text(value)
    )
}

pub(super) fn table_head(out: &mut String, columns: &[&str]) {
    out.push_str("<div class=\"table\"><table>\n<thead><tr>");
    for c in columns {
        let _ = write!(out, "<th>{}</th>", text(c));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
}

pub(super) fn table_end(out: &mut String) {
    out.push_str("</tbody>\n</table></div>\n");
}

fn incidents(out: &mut String, section: &Section<Capped<IncidentView>>) -> fmt::Result {
    let Some(list) = heading(out, "incidents", "Open incidents", section)? else {
        return Ok(());
    };
    if list.items.is_empty() {
        return none(out, "No open incidents.");
    }
    table_head(
        out,
        &[
            "Kind", "Group", "Sessions", "Impact", "Since", "Notified", "Incident",
        ],
    );
    for i in &list.items {
        out.push_str("<tr>");
        write!(
            out,
            "<td data-label=\"Kind\"><span class=\"sev {}\">{}</span></td>",
            text(&i.severity),
            text(&i.kind)
        )?;
        write!(out, "<td data-label=\"Group\">{}", text(&i.group))?;
        if let Some(e) = &i.last_error {
            write!(out, "<br><small class=\"error\">{}</small>", text(e))?;
        }
        out.push_str("</td>");
        cell(out, "Sessions", "num", &i.sessions.to_string())?;
        cell(out, "Impact", "num", &format!("+{}", usd(i.impact_usd)))?;
        write!(
            out,
            "<td data-label=\"Since\"><span class=\"t\">{}</span><br>\
             <small>last finding <span class=\"t\">{}</span></small></td>",
            text(&when(i.since)),
            text(&when(i.last_finding))
        )?;
        let told = match (i.silenced_by, i.notified) {
            (Some(id), _) => format!("held back by silence {id}"),
            (None, true) if i.notifications == 1 => "yes (1 notification)".to_owned(),
            (None, true) => format!("yes ({} notifications)", i.notifications),
            (None, false) => "not yet".to_owned(),
        };
        cell(out, "Notified", "", &told)?;
        writeln!(
            out,
            "<td data-label=\"Incident\"><code class=\"id\">{}</code></td></tr>",
            text(short(&i.fingerprint))
        )?;
    }
    table_end(out);
    more_note(out, list, "costwatch incidents --status open")?;
    out.push_str("</section>\n");
    Ok(())
}

fn findings(out: &mut String, section: &Section<FindingsView>) -> fmt::Result {
    let Some(view) = heading(out, "findings", "Recent findings", section)? else {
        return Ok(());
    };
    writeln!(
        out,
        "<p class=\"note\">First seen in windows from {} to {} (the day of data before the \
         watermark), newest first.</p>",
        text(&when(view.since)),
        text(&when(view.until))
    )?;
    if view.list.items.is_empty() {
        return none(out, "No findings in that day.");
    }
    table_head(
        out,
        &["Window", "Kind", "Session", "Group", "Impact", "Why"],
    );
    for f in &view.list.items {
        out.push_str("<tr>");
        cell(out, "Window", "t", &when(f.window_start))?;
        write!(
            out,
            "<td data-label=\"Kind\"><span class=\"sev {}\">{}</span></td>",
            text(&f.severity),
            text(&f.kind)
        )?;
        write!(
            out,
            "<td data-label=\"Session\"><code>{}</code></td>",
            text(&f.session_id)
        )?;
        cell(out, "Group", "", &f.group)?;
        cell(out, "Impact", "num", &format!("+{}", usd(f.impact_usd)))?;
        cell(out, "Why", "why", &f.explanation)?;
        out.push_str("</tr>\n");
    }
    table_end(out);
    more_note(out, &view.list, "costwatch findings --since 24h")?;
    out.push_str("</section>\n");
    Ok(())
}

fn silences(
    out: &mut String,
    section: &Section<Capped<SilenceView>>,
    now: DateTime<Utc>,
) -> fmt::Result {
    let Some(list) = heading(out, "silences", "Active silences", section)? else {
        return Ok(());
    };
    if list.items.is_empty() {
        return none(out, "No active silences.");
    }
    table_head(
        out,
        &["Id", "Matches", "Ends", "Reason", "By", "Holds back"],
    );
    for s in &list.items {
        out.push_str("<tr>");
        cell(out, "Id", "num", &s.id.to_string())?;
        write!(
            out,
            "<td data-label=\"Matches\"><code>{}</code></td>",
            text(&s.conditions)
        )?;
        write!(
            out,
            "<td data-label=\"Ends\"><span class=\"t\">{}</span><br><small>{}</small></td>",
            text(&when(s.ends_at)),
            text(&relative(s.ends_at, now))
        )?;
        cell(out, "Reason", "why", &s.reason)?;
        cell(out, "By", "", &s.author)?;
        let holding = match s.holding {
            1 => "1 open incident".to_owned(),
            n => format!("{n} open incidents"),
        };
        cell(out, "Holds back", "", &holding)?;
        out.push_str("</tr>\n");
    }
    table_end(out);
    more_note(out, list, "costwatch silence list")?;
    out.push_str("</section>\n");
    Ok(())
}

fn jobs(out: &mut String, section: &Section<Capped<JobView>>, now: DateTime<Utc>) -> fmt::Result {
    let Some(list) = heading(out, "windows", "Windows", section)? else {
        return Ok(());
    };
    if list.items.is_empty() {
        return none(out, "No window was processed yet.");
    }
    for j in &list.items {
        write!(
            out,
            "<h3>Job <code>{}</code></h3>\n<dl class=\"facts\">",
            text(&j.job)
        )?;
        fact(
            out,
            "Data up to",
            &format!(
                "{} ({} behind now)",
                when(j.watermark),
                span(ChronoDuration::seconds(j.lag_seconds))
            ),
        )?;
        if let Some(due) = j.windows_due {
            let due = match due {
                0 => "none".to_owned(),
                1 => "1 window".to_owned(),
                n => format!("{n} windows"),
            };
            fact(out, "Due now", &due)?;
        }
        if let Some(e) = j.evaluated {
            fact(out, "Incidents evaluated up to", &when(e))?;
        }
        out.push_str("</dl>\n");
        if j.windows.items.is_empty() {
            out.push_str("<p class=\"none\">No window rows for this job.</p>\n");
            continue;
        }
        table_head(
            out,
            &[
                "Window",
                "State",
                "Attempts",
                "Sessions",
                "Findings",
                "When",
                "Last error",
            ],
        );
        for w in &j.windows.items {
            out.push_str("<tr>");
            cell(out, "Window", "", &window(w.start, w.end))?;
            let class = if w.status == "done" { "ok" } else { "bad" };
            write!(
                out,
                "<td data-label=\"State\" class=\"{}\">{}</td>",
                text(class),
                text(&w.status)
            )?;
            cell(out, "Attempts", "num", &w.attempts.to_string())?;
            cell(out, "Sessions", "num", &w.sessions.to_string())?;
            cell(out, "Findings", "num", &w.findings.to_string())?;
            cell(out, "When", "", &relative(w.updated_at, now))?;
            cell(
                out,
                "Last error",
                "why",
                w.last_error.as_deref().unwrap_or("–"),
            )?;
            out.push_str("</tr>\n");
        }
        table_end(out);
        if j.windows.more {
            out.push_str("<p class=\"note\">Older windows are not shown.</p>\n");
        }
    }
    if list.more {
        writeln!(
            out,
            "<p class=\"note\">Only the first {} jobs, by name.</p>",
            list.items.len()
        )?;
    }
    out.push_str("</section>\n");
    Ok(())
}

fn fact(out: &mut String, name: &str, value: &str) -> fmt::Result {
    write!(out, "<dt>{}</dt><dd>{}</dd>", text(name), text(value))
}

fn source(out: &mut String, s: &Status) -> fmt::Result {
    let Some(src) = heading(out, "source", "Source", &s.source)? else {
        return Ok(());
    };
    source_facts(out, src, s)?;
    if !src.caching_facts.is_empty() {
        out.push_str("<ul class=\"caching\">");
        for f in &src.caching_facts {
            write!(out, "<li>{}</li>", text(&f.line()))?;
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</section>\n");
    Ok(())
}

fn source_facts(out: &mut String, src: &SourceView, s: &Status) -> fmt::Result {
    let now = s.generated_at;
    out.push_str("<dl class=\"facts\">");
    let (class, state) = if src.healthy {
        ("ok", "healthy")
    } else {
        ("bad", "unhealthy: source_unhealthy is open")
    };
    write!(
        out,
        "<dt>Gateway</dt><dd class=\"{}\">{}</dd>",
        text(class),
        text(state)
    )?;
    let last_read = match (src.last_read, src.last_read_window) {
        (Some(at), Some((start, end))) => format!(
            "{} ({}), window {}",
            when(at),
            relative(at, now),
            window(start, end)
        ),
        _ => "never: no window was committed yet".to_owned(),
    };
    fact(out, "Last successful read", &last_read)?;
    if let Some(i) = &src.incident {
        if i.open {
            fact(
                out,
                "Failing since",
                &format!("{} ({})", when(i.since), relative(i.since, now)),
            )?;
            let told = if i.notified {
                "notified"
            } else {
                "not notified yet"
            };
            fact(out, "Incident", told)?;
        }
        fact(
            out,
            "Last failure",
            &format!(
                "{} ({})",
                when(i.last_failure),
                relative(i.last_failure, now)
            ),
        )?;
        if let Some(e) = &i.last_error {
            write!(out, "<dt>Last error</dt><dd class=\"why\">{}</dd>", text(e))?;
        }
    } else {
        fact(out, "Failures", "none recorded")?;
    }
    let r = &s.replica;
    let in_row = if r.last_tick.is_none() {
        "no tick yet".to_owned()
    } else if !r.leader {
        "another replica holds the job".to_owned()
    } else {
        r.failed_reads_in_row.to_string()
    };
    fact(out, "Failed reads in a row (this replica)", &in_row)?;
    if let Some(at) = r.last_tick {
        fact(
            out,
            "Last tick (this replica)",
            &format!("{} ({})", when(at), relative(at, now)),
        )?;
    }
    // A reason other than the gateway's last error (a stuck tick) is news.
    let gateway_error = src.incident.as_ref().and_then(|i| i.last_error.as_ref());
    if let Some(why) = r
        .unhealthy
        .as_ref()
        .filter(|why| Some(*why) != gateway_error)
    {
        write!(
            out,
            "<dt>/healthz</dt><dd class=\"bad\">unhealthy: {}</dd>",
            text(why)
        )?;
    }
    if let (Some(holder), Some(until)) = (&src.lease_holder, src.lease_expires) {
        let state = if until > now { "until" } else { "ran out" };
        fact(
            out,
            "Job held by",
            &format!("{holder} ({state} {})", when_exact(until)),
        )?;
    }
    out.push_str("</dl>\n");
    Ok(())
}

fn budget(out: &mut String, section: &Section<BudgetView>) -> fmt::Result {
    let Some(b) = heading(out, "budget", "Investigation budget", section)? else {
        return Ok(());
    };
    out.push_str("<dl class=\"facts\">");
    fact(out, "Day (UTC)", &b.day.to_string())?;
    write!(
        out,
        "<dt>Spent</dt><dd>{} of {} <meter min=\"0\" max=\"{}\" value=\"{}\">{}</meter></dd>",
        text(&usd(b.spent_usd)),
        text(&usd(b.cap_usd)),
        text(&finite(b.cap_usd).to_string()),
        text(&finite(b.spent_usd).to_string()),
        text(&percent(b.spent_usd, b.cap_usd)),
    )?;
    fact(out, "Investigations started", &b.investigations.to_string())?;
    let state = if b.enabled {
        "enabled"
    } else {
        "disabled (investigation.enabled is false)"
    };
    fact(out, "Investigations", state)?;
    out.push_str("</dl>\n</section>\n");
    Ok(())
}

fn finite(x: f64) -> f64 {
    if x.is_finite() { x.max(0.0) } else { 0.0 }
}

fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 && part.is_finite() {
        format!("{:.0}%", 100.0 * part / whole)
    } else {
        "–".to_owned()
    }
}

/// The first 12 characters of a fingerprint, as the CLI's tables show it.
pub(super) fn short(fingerprint: &str) -> &str {
    fingerprint.get(..12).unwrap_or(fingerprint)
}

/// Dollars, as every alert writes them (`notify::render::usd`).
pub fn usd(x: f64) -> String {
    crate::notify::render::usd(x)
}

/// A window: `2026-10-11 11:00 UTC – 12:00`, the end's date written
/// only when it differs from the start's.
pub fn window(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    if start.date_naive() == end.date_naive() {
        format!("{} – {}", when(start), end.format("%H:%M"))
    } else {
        format!("{} – {}", when(start), when(end))
    }
}

/// A time to the minute, in UTC.
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// A time to the second, in UTC.
pub fn when_exact(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `3h 05m ago` or `in 3h 05m`.
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    if t <= now {
        format!("{} ago", span(now - t))
    } else {
        format!("in {}", span(t - now))
    }
}

/// A duration in its two largest units: `51d 18h`, `3h 05m`, `4m 10s`, `12s`.
pub fn span(d: ChronoDuration) -> String {
    let s = d.num_seconds().max(0);
    let (days, hours, minutes, seconds) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if days > 0 {
        format!("{days}d {hours}h")
    } else if hours > 0 {
        format!("{hours}h {minutes:02}m")
    } else if minutes > 0 {
        format!("{minutes}m {seconds:02}s")
    } else {
        format!("{seconds}s")
    }
}
