//! The top of the status page, the first question a person has: how much
//! is wasted, where, and is it getting worse. The impact per day by kind
//! over the last 30 days of data (the chart of `impact_svg.rs`, its legend
//! and a sentence saying the same for screen readers), the groups with the
//! most impact over those days, and the incidents last active, open or
//! resolved.
//!
//! Pure, like `html.rs`, whose helpers it writes with: every value goes
//! through [`text`].

use super::data::{Capped, GroupView, IMPACT_DAYS, ImpactView, IncidentView, Section, WEEK_DAYS};
use super::escape::text;
use super::html::{cell, heading, more_note, none, short, table_end, table_head, usd, when};
use super::impact_svg::{colour, day_label, svg};
use crate::domain::Kind;
use std::fmt::{self, Write as _};

/// The impact section: the chart, its legend and what it says in words.
pub(super) fn impact(out: &mut String, section: &Section<ImpactView>) -> fmt::Result {
    let title = format!("Impact, last {IMPACT_DAYS} days");
    let Some(view) = heading(out, "impact", &title, section)? else {
        return Ok(());
    };
    let (Some(first), Some(last)) = (view.days.first(), view.days.last()) else {
        return none(out, "No days to show.");
    };
    let label = format!(
        "Impact per day by kind, {} to {} (UTC days of data)",
        day_label(first.day),
        day_label(last.day)
    );
    let said = in_words(view);
    svg(out, view, &label, &said)?;
    out.push_str("<ul class=\"legend\">");
    for kind in Kind::ALL {
        write!(out, "<li>")?;
        swatch(out, kind)?;
        write!(
            out,
            " {} <span class=\"num\">{}</span></li>",
            text(kind.as_str()),
            text(&usd(view.kind_usd(kind)))
        )?;
    }
    out.push_str("</ul>\n");
    writeln!(out, "<p class=\"trend\">{}</p>", text(&said))?;
    out.push_str("</section>\n");
    Ok(())
}

/// A small square of `kind`'s colour, beside its name.
fn swatch(out: &mut String, kind: Kind) -> fmt::Result {
    write!(
        out,
        "<svg class=\"swatch\" viewBox=\"0 0 10 10\" aria-hidden=\"true\">\
         <rect width=\"10\" height=\"10\" fill=\"{}\"/></svg>",
        colour(kind)
    )
}

/// What the chart shows, in a sentence or two: the total and each kind's
/// part, then the last week against the week before.
pub fn in_words(view: &ImpactView) -> String {
    let Some(last) = view.days.last() else {
        return String::new();
    };
    let span = format!(
        "the {} days to {} (UTC)",
        view.days.len(),
        day_label(last.day)
    );
    if view.total_usd <= 0.0 {
        return format!("No waste found in {span}.");
    }
    let parts: Vec<String> = Kind::ALL
        .iter()
        .map(|kind| format!("{kind} {}", usd(view.kind_usd(*kind))))
        .collect();
    let (now, before) = (view.last_week_usd, view.week_before_usd);
    let week = format!("The last {WEEK_DAYS} days: {}", usd(now));
    let trend = if before <= 0.0 && now <= 0.0 {
        format!("The last {WEEK_DAYS} days: nothing, nor the {WEEK_DAYS} days before.")
    } else if before <= 0.0 {
        format!("{week}, against nothing the {WEEK_DAYS} days before.")
    } else {
        let change = (100.0 * (now - before) / before).round();
        let how = if change >= 1.0 {
            format!("up {change:.0}% on")
        } else if change <= -1.0 {
            format!("down {:.0}% on", -change)
        } else {
            "about the same as".to_owned()
        };
        format!(
            "{week}, {how} the {WEEK_DAYS} days before ({}).",
            usd(before)
        )
    };
    format!(
        "{} over {span}: {}. {trend}",
        usd(view.total_usd),
        parts.join(", ")
    )
}

/// The groups with the most impact over the chart's days.
pub(super) fn top_groups(out: &mut String, section: &Section<Capped<GroupView>>) -> fmt::Result {
    let Some(list) = heading(out, "groups", "Groups with the most impact", section)? else {
        return Ok(());
    };
    if list.items.is_empty() {
        return none(out, "No findings in these days.");
    }
    writeln!(
        out,
        "<p class=\"note\">Over the same {IMPACT_DAYS} days, each group and kind, most impact \
         first.</p>"
    )?;
    table_head(out, &["Group", "Kind", "Sessions", "Impact"]);
    for g in &list.items {
        out.push_str("<tr>");
        cell(out, "Group", "", &g.group)?;
        out.push_str("<td data-label=\"Kind\">");
        swatch(out, g.kind)?;
        write!(out, " {}</td>", text(g.kind.as_str()))?;
        cell(out, "Sessions", "num", &g.sessions.to_string())?;
        cell(out, "Impact", "num", &format!("+{}", usd(g.impact_usd)))?;
        out.push_str("</tr>\n");
    }
    table_end(out);
    if list.more {
        writeln!(
            out,
            "<p class=\"note\">Only the first {}; <code>costwatch findings --group GROUP</code> \
             lists a group's findings.</p>",
            list.items.len()
        )?;
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The incidents last active, open or resolved.
pub(super) fn last_incidents(
    out: &mut String,
    section: &Section<Capped<IncidentView>>,
) -> fmt::Result {
    let Some(list) = heading(out, "last-incidents", "Last incidents", section)? else {
        return Ok(());
    };
    if list.items.is_empty() {
        return none(out, "No incidents yet.");
    }
    writeln!(
        out,
        "<p class=\"note\">Open or resolved, the most recently active first.</p>"
    )?;
    table_head(
        out,
        &[
            "Kind", "Group", "Opened", "State", "Sessions", "Impact", "Incident",
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
        cell(out, "Group", "", &i.group)?;
        write!(
            out,
            "<td data-label=\"Opened\"><span class=\"t\">{}</span></td>",
            text(&when(i.since))
        )?;
        let (class, state) = if i.open {
            ("bad", "open")
        } else {
            ("ok", "resolved")
        };
        write!(
            out,
            "<td data-label=\"State\"><span class=\"{}\">{}</span><br>\
             <small>last finding <span class=\"t\">{}</span></small></td>",
            text(class),
            text(state),
            text(&when(i.last_finding))
        )?;
        cell(out, "Sessions", "num", &i.sessions.to_string())?;
        cell(out, "Impact", "num", &format!("+{}", usd(i.impact_usd)))?;
        writeln!(
            out,
            "<td data-label=\"Incident\"><code class=\"id\">{}</code></td></tr>",
            text(short(&i.fingerprint))
        )?;
    }
    table_end(out);
    more_note(out, list, "costwatch incidents")?;
    out.push_str("</section>\n");
    Ok(())
}
