//! Draws a [`ChartSpec`] into a small PNG: the group's histogram in grey,
//! its spread band in pale blue behind it, the median as a blue line, the
//! flagged sessions as red markers on the axis with red stems up to their
//! labels (short session id and value). Pure and deterministic: the same
//! spec gives the same bytes.

use super::font::{draw_text, drawable, font, width};
use super::{BINS, ChartMetric, ChartSpec};
use ab_glyph::FontRef;
use plotters::prelude::*;

/// Width of the chart in pixels.
pub const CHART_WIDTH: u32 = 600;
/// Height of the chart in pixels.
pub const CHART_HEIGHT: u32 = 260;

/// The flagged sessions' colour.
pub const FLAGGED: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// The median line's colour.
pub const MEDIAN: RGBColor = RGBColor(0x1f, 0x5f, 0xa0);
/// The spread band's colour.
pub const BAND: RGBColor = RGBColor(0xd9, 0xe8, 0xf6);
/// The group's bars' colour.
pub const BARS: RGBColor = RGBColor(0xa3, 0xad, 0xb8);
const INK: RGBColor = RGBColor(0x22, 0x2a, 0x33);
const MUTED: RGBColor = RGBColor(0x5b, 0x66, 0x70);

/// The plot's box, in pixels: left, right, top of the bars, axis line.
pub(crate) const PLOT_LEFT: i32 = 46;
pub(crate) const PLOT_RIGHT: i32 = 584;
const LABELS_TOP: i32 = 50;
const BARS_TOP: i32 = 112;
pub(crate) const AXIS_Y: i32 = 214;
/// Rows of flagged labels above the bars.
const LABEL_ROWS: usize = 4;
const LABEL_ROW_HEIGHT: i32 = 15;

/// Why a chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    /// The embedded font could not be loaded.
    #[error("chart: the embedded font could not be loaded")]
    Font,
    /// Drawing failed.
    #[error("chart: drawing failed: {0}")]
    Draw(String),
    /// Encoding the PNG failed.
    #[error("chart: png encoding failed: {0}")]
    Encode(String),
}

/// The chart as a PNG of [`CHART_WIDTH`] × [`CHART_HEIGHT`] pixels, indexed
/// colour (a few KB). Takes a few milliseconds.
pub fn render_png(spec: &ChartSpec) -> Result<Vec<u8>, ChartError> {
    let font = font().ok_or(ChartError::Font)?;
    let mut rgb = vec![0u8; (CHART_WIDTH * CHART_HEIGHT * 3) as usize];
    let mut texts = Texts {
        font,
        labels: Vec::new(),
    };
    {
        let backend = BitMapBackend::with_buffer(&mut rgb, (CHART_WIDTH, CHART_HEIGHT));
        let root = backend.into_drawing_area();
        draw(&root, &mut texts, spec).map_err(|e| ChartError::Draw(e.to_string()))?;
        root.present()
            .map_err(|e| ChartError::Draw(e.to_string()))?;
    }
    // Text goes on top of the shapes.
    for l in &texts.labels {
        draw_text(
            font,
            &mut rgb,
            (CHART_WIDTH, CHART_HEIGHT),
            &l.text,
            (l.x, l.y),
            l.size,
            [l.color.0, l.color.1, l.color.2],
        );
    }
    super::encode::indexed_png(&rgb, CHART_WIDTH, CHART_HEIGHT)
}

/// A piece of text to draw once the shapes are drawn.
struct Label {
    text: String,
    x: f32,
    y: f32,
    size: f32,
    color: RGBColor,
}

/// The chart's text, laid out while the shapes are drawn.
struct Texts<'f> {
    font: &'f FontRef<'static>,
    labels: Vec<Label>,
}

impl Texts<'_> {
    /// Places `s` with its top at `y`; `align` 0 puts its left end at `x`,
    /// 0.5 its middle, 1 its right end.
    fn put(&mut self, s: &str, (x, y): (i32, i32), size: f32, color: RGBColor, align: f32) {
        let text = drawable(s);
        let w = width(self.font, &text, size);
        self.labels.push(Label {
            text,
            x: (x as f32 - w * align).round(),
            y: y as f32,
            size,
            color,
        });
    }

    fn width(&self, s: &str, size: f32) -> i32 {
        width(self.font, &drawable(s), size).ceil() as i32
    }
}

/// The x pixel of a value.
pub(crate) fn x_of(spec: &ChartSpec, v: f64) -> i32 {
    let span = f64::from(PLOT_RIGHT - PLOT_LEFT);
    PLOT_LEFT + (spec.position(v) * span).round() as i32
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;
type DrawResult<'a> =
    Result<(), DrawingAreaErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>>;

fn draw<'a>(root: &Area<'a>, texts: &mut Texts<'_>, spec: &ChartSpec) -> DrawResult<'a> {
    root.fill(&WHITE)?;
    let title = format!("{} in {}", capitalised(spec.metric.describe()), spec.group);
    texts.put(&shorten(&title, 78), (12, 8), 14.0, INK, 0.0);
    let legend = format!(
        "grey: {} peer sessions,  blue line: median {},  pale band: ±1 robust σ,  red: flagged",
        spec.peers,
        spec.metric.format(spec.median)
    );
    texts.put(&shorten(&legend, 100), (12, 28), 11.0, MUTED, 0.0);

    // The band behind everything, from the labels down to the axis.
    let (b0, b1) = (x_of(spec, spec.band[0]), x_of(spec, spec.band[1]));
    root.draw(&Rectangle::new(
        [(b0, LABELS_TOP), (b1.max(b0 + 1), AXIS_Y)],
        BAND.filled(),
    ))?;

    // The group's histogram.
    let most = spec.bins.iter().copied().max().unwrap_or(0).max(1);
    let span = f64::from(PLOT_RIGHT - PLOT_LEFT);
    let bar_h = f64::from(AXIS_Y - BARS_TOP);
    for (i, n) in spec.bins.iter().enumerate().filter(|(_, n)| **n > 0) {
        let x0 = PLOT_LEFT + (span * i as f64 / BINS as f64).round() as i32;
        let x1 = PLOT_LEFT + (span * (i + 1) as f64 / BINS as f64).round() as i32 - 2;
        let h = ((f64::from(*n) / f64::from(most)) * bar_h).round().max(1.0) as i32;
        root.draw(&Rectangle::new(
            [(x0 + 1, AXIS_Y - h), (x1.max(x0 + 1), AXIS_Y)],
            BARS.filled(),
        ))?;
    }
    texts.put(
        &most.to_string(),
        (PLOT_LEFT - 10, BARS_TOP - 6),
        10.0,
        MUTED,
        1.0,
    );
    root.draw(&PathElement::new(
        vec![(PLOT_LEFT - 3, BARS_TOP), (PLOT_LEFT, BARS_TOP)],
        MUTED,
    ))?;
    texts.put("0", (PLOT_LEFT - 10, AXIS_Y - 6), 10.0, MUTED, 1.0);

    // The median.
    let xm = x_of(spec, spec.median);
    root.draw(&Rectangle::new(
        [(xm - 1, LABELS_TOP), (xm + 1, AXIS_Y)],
        MEDIAN.filled(),
    ))?;

    // The axis and its ticks.
    root.draw(&PathElement::new(
        vec![(PLOT_LEFT, AXIS_Y), (PLOT_RIGHT, AXIS_Y)],
        INK,
    ))?;
    for v in ticks(spec) {
        let x = x_of(spec, v);
        root.draw(&PathElement::new(vec![(x, AXIS_Y), (x, AXIS_Y + 4)], INK))?;
        texts.put(&tick_label(spec.metric, v), (x, AXIS_Y + 7), 11.0, INK, 0.5);
    }
    texts.put(
        spec.metric.describe(),
        ((PLOT_LEFT + PLOT_RIGHT) / 2, AXIS_Y + 26),
        11.0,
        MUTED,
        0.5,
    );

    flagged(root, texts, spec)
}

/// The flagged sessions: a marker on the axis, a stem up to a label row
/// where the label does not overlap another.
fn flagged<'a>(root: &Area<'a>, texts: &mut Texts<'_>, spec: &ChartSpec) -> DrawResult<'a> {
    let mut rows: Vec<Vec<(i32, i32)>> = vec![Vec::new(); LABEL_ROWS];
    // Left to right, so labels fill the rows in reading order.
    let mut points: Vec<&super::ChartPoint> = spec.flagged.iter().collect();
    points.sort_by(|a, b| a.value.total_cmp(&b.value));
    for p in points {
        let x = x_of(spec, p.value);
        let label = format!(
            "{} {}",
            short_id(&p.session_id),
            spec.metric.format(p.value)
        );
        let w = texts.width(&label, 11.0);
        // Labels sit right of the stem, or left of it near the right edge.
        let left = if x + 4 + w > PLOT_RIGHT + 12 {
            x - 4 - w
        } else {
            x + 4
        };
        let extent = (left - 3, left + w + 3);
        let row = rows
            .iter()
            .position(|r| r.iter().all(|(a, b)| extent.1 < *a || extent.0 > *b))
            .unwrap_or(LABEL_ROWS - 1);
        rows[row].push(extent);
        let y = LABELS_TOP + row as i32 * LABEL_ROW_HEIGHT;
        root.draw(&PathElement::new(
            vec![(x, y + 6), (x, AXIS_Y)],
            FLAGGED.stroke_width(1),
        ))?;
        root.draw(&Circle::new((x, AXIS_Y), 5, FLAGGED.filled()))?;
        texts.put(&label, (left, y), 11.0, FLAGGED, 0.0);
    }
    Ok(())
}

/// Where the axis gets labelled ticks.
fn ticks(spec: &ChartSpec) -> Vec<f64> {
    match spec.metric {
        ChartMetric::CachedShare => vec![0.0, 0.25, 0.5, 0.75, 1.0],
        ChartMetric::CallsPerSession => {
            let mut out = Vec::new();
            let mut v = spec.lo.max(1.0);
            while v <= spec.hi * 1.0001 {
                out.push(v);
                v *= 10.0;
            }
            out
        }
        ChartMetric::TinyCallPrice => {
            // A round step giving at most six intervals.
            let raw = spec.hi / 6.0;
            let base = 10f64.powf(raw.max(1e-9).log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .into_iter()
                .map(|m| m * base)
                .find(|s| *s >= raw)
                .unwrap_or(10.0 * base);
            (0..=6)
                .map(|i| step * f64::from(i))
                .take_while(|v| *v <= spec.hi * 1.0001)
                .collect()
        }
    }
}

/// A tick's label: whole dollars without cents.
fn tick_label(metric: ChartMetric, v: f64) -> String {
    if metric == ChartMetric::TinyCallPrice && v.fract() == 0.0 {
        format!("${v:.0}")
    } else {
        metric.format(v)
    }
}

/// A session id cut to 14 characters.
fn short_id(id: &str) -> String {
    shorten(id, 14)
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
