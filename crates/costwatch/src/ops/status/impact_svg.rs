//! The impact chart at the top of the status page, drawn on the server as
//! inline SVG: one bar per day, stacked by kind, over a dollar axis with a
//! few round ticks; the last week shaded, so "is it getting worse" reads at
//! a glance. No script: each bar's `<title>` is its tooltip.
//!
//! Pure: [`layout`] places the bars (what the tests check), [`svg`] writes
//! them. A day without findings draws nothing, so gaps show as gaps.

use super::data::{ImpactView, WEEK_DAYS};
use super::escape::text;
use crate::domain::Kind;
use chrono::NaiveDate;
use std::fmt::{self, Write as _};

/// The drawing's width, in its own units (it scales to the page).
pub const WIDTH: f64 = 600.0;
/// The drawing's height.
pub const HEIGHT: f64 = 200.0;
/// Left end of the plot (the dollar labels sit left of it).
const LEFT: f64 = 52.0;
/// Right end of the plot.
const RIGHT: f64 = 580.0;
/// Top of the plot: the axis' highest tick.
const TOP: f64 = 10.0;
/// The axis line: zero dollars.
pub const AXIS: f64 = 172.0;
/// Baseline of the day labels.
const DAY_LABELS: f64 = 190.0;
/// The share of a day's slot its bar takes.
const BAR_SHARE: f64 = 0.72;
/// The lowest a bar of a kind with some impact is drawn, so it shows.
pub const MIN_HEIGHT: f64 = 1.0;

/// The colour of each kind's bars and legend (Okabe and Ito's palette,
/// told apart with every common colour-vision deficiency).
pub fn colour(kind: Kind) -> &'static str {
    match kind {
        Kind::NoCache => "#0072b2",
        Kind::OversizedModel => "#e69f00",
        Kind::RetryLoop => "#cc79a7",
    }
}

/// One kind's part of one day's bar.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// The day.
    pub day: NaiveDate,
    /// The kind.
    pub kind: Kind,
    /// Its findings that day.
    pub sessions: u64,
    /// Their impact.
    pub impact_usd: f64,
    /// Left edge.
    pub x: f64,
    /// Top edge.
    pub y: f64,
    /// Width.
    pub width: f64,
    /// Height.
    pub height: f64,
}

/// The dollar axis: its top and the step between ticks, both round.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    /// The highest tick.
    pub top: f64,
    /// Between two ticks.
    pub step: f64,
}

impl Axis {
    /// Round ticks from 0 to at least `max`, at most five steps.
    pub fn over(max: f64) -> Axis {
        if !(max.is_finite() && max > 0.0) {
            return Axis {
                top: 1.0,
                step: 0.25,
            };
        }
        let rough = max / 4.0;
        let base = 10f64.powf(rough.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .into_iter()
            .map(|m| m * base)
            .find(|s| max / s <= 5.0)
            .unwrap_or(10.0 * base);
        Axis {
            top: (max / step).ceil() * step,
            step,
        }
    }

    /// The ticks from 0 to the top.
    pub fn ticks(self) -> impl Iterator<Item = f64> {
        let n = (self.top / self.step).round() as u32;
        (0..=n).map(move |i| f64::from(i) * self.step)
    }

    /// A tick's label: whole dollars, or as many decimals as the step has.
    pub fn label(self, v: f64) -> String {
        if v == 0.0 {
            return "$0".to_owned();
        }
        let step = format!("{:.4}", self.step);
        let decimals = step
            .trim_end_matches('0')
            .split_once('.')
            .map_or(0, |(_, d)| d.len());
        format!("${v:.decimals$}")
    }
}

/// Where each day's slot begins, and its width.
fn slot(n: usize, i: usize) -> (f64, f64) {
    let width = (RIGHT - LEFT) / n.max(1) as f64;
    (LEFT + width * i as f64, width)
}

/// The axis of `view`'s days, and every kind's part of every day's bar,
/// stacked in [`Kind::ALL`]'s order from the axis up.
pub fn layout(view: &ImpactView) -> (Axis, Vec<Segment>) {
    let max = view.days.iter().map(|d| d.impact_usd()).fold(0.0, f64::max);
    let axis = Axis::over(max);
    let scale = (AXIS - TOP) / axis.top;
    let n = view.days.len();
    let mut segments = Vec::new();
    for (i, day) in view.days.iter().enumerate() {
        let (left, width) = slot(n, i);
        let bar = width * BAR_SHARE;
        let mut bottom = AXIS;
        for k in day.kinds.iter().filter(|k| k.impact_usd > 0.0) {
            let height = round1((k.impact_usd * scale).max(MIN_HEIGHT));
            bottom -= height;
            segments.push(Segment {
                day: day.day,
                kind: k.kind,
                sessions: k.sessions,
                impact_usd: k.impact_usd,
                x: round1(left + (width - bar) / 2.0),
                y: round1(bottom),
                width: round1(bar),
                height,
            });
        }
    }
    (axis, segments)
}

/// One decimal: enough for a screen, short in the page.
fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// A day as the chart labels it: `Oct 11`.
pub fn day_label(d: NaiveDate) -> String {
    d.format("%b %-d").to_string()
}

/// Writes the chart of `view`; `title` and `desc` are what a screen reader
/// says of it.
pub fn svg(out: &mut String, view: &ImpactView, title: &str, desc: &str) -> fmt::Result {
    let (axis, segments) = layout(view);
    let n = view.days.len();
    writeln!(
        out,
        "<svg class=\"impact\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         role=\"img\" aria-labelledby=\"impact-title impact-desc\">\
         <title id=\"impact-title\">{}</title><desc id=\"impact-desc\">{}</desc>",
        text(title),
        text(desc)
    )?;
    if n > WEEK_DAYS {
        let (left, _) = slot(n, n - WEEK_DAYS);
        writeln!(
            out,
            "<rect class=\"week\" x=\"{}\" y=\"{TOP}\" width=\"{}\" height=\"{}\"/>",
            round1(left),
            round1(RIGHT - left),
            AXIS - TOP
        )?;
    }
    let scale = (AXIS - TOP) / axis.top;
    out.push_str("<g class=\"grid\">");
    for v in axis.ticks() {
        let y = round1(AXIS - v * scale);
        write!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{y}\" x2=\"{RIGHT}\" y2=\"{y}\"/><text x=\"{}\" y=\"{}\" \
             text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            round1(y + 4.0),
            text(&axis.label(v))
        )?;
    }
    out.push_str("</g>\n<g class=\"bars\">");
    for s in &segments {
        write!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>",
            s.x,
            s.y,
            s.width,
            s.height,
            colour(s.kind),
            text(&format!(
                "{}: {} {}, {}",
                day_label(s.day),
                s.kind,
                crate::domain::counted(s.sessions, "session"),
                super::html::usd(s.impact_usd)
            ))
        )?;
    }
    writeln!(
        out,
        "</g>\n<line class=\"axis\" x1=\"{LEFT}\" y1=\"{AXIS}\" x2=\"{RIGHT}\" y2=\"{AXIS}\"/>"
    )?;
    // The last day, and every week back from it.
    out.push_str("<g class=\"days\">");
    for i in (0..n).rev().step_by(WEEK_DAYS) {
        let (left, width) = slot(n, i);
        write!(
            out,
            "<text x=\"{}\" y=\"{DAY_LABELS}\" text-anchor=\"middle\">{}</text>",
            round1(left + width / 2.0),
            text(&day_label(view.days[i].day))
        )?;
    }
    out.push_str("</g>\n</svg>\n");
    Ok(())
}
