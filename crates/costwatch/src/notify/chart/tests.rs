//! The chart's spec and its picture.

use super::draw::{AXIS_Y, FLAGGED, MEDIAN, x_of};
use super::*;
use crate::notify::AlertSession;
use serde_json::json;

fn session(id: &str, evidence: serde_json::Value) -> AlertSession {
    AlertSession {
        session_id: id.to_owned(),
        cost_usd: 1.0,
        impact_usd: 0.5,
        explanation: String::new(),
        evidence,
        link: None,
        what_to_do: String::new(),
    }
}

/// A group whose cache-read shares sit around 0.7, and two sessions that
/// read nothing from the cache.
pub(crate) fn no_cache_spec() -> ChartSpec {
    let mut b = GroupBaseline::new(512);
    for i in 0..300 {
        b.cached_share.push(0.55 + 0.3 * f64::from(i % 31) / 30.0);
    }
    for _ in 0..20 {
        b.cached_share.push(0.02);
    }
    let sessions = [
        session("conv-7f3a9c21-long-id", json!({"cached_share": 0.0})),
        session("conv-19b2", json!({"cached_share": 0.031})),
    ];
    ChartSpec::capture(Kind::NoCache, "feature=support-agent", &b, &sessions).unwrap()
}

fn retry_spec() -> ChartSpec {
    let mut b = GroupBaseline::new(512);
    for i in 0..400 {
        b.log_requests.push(f64::from(3 + i % 9).ln());
    }
    let sessions = [
        session("agent-run-1", json!({"requests": 412})),
        session("agent-run-2", json!({"requests": 97})),
        session("agent-run-3", json!({"requests": 88})),
    ];
    ChartSpec::capture(Kind::RetryLoop, "feature=batch,team=ml", &b, &sessions).unwrap()
}

fn oversized_spec() -> ChartSpec {
    let mut b = GroupBaseline::new(512);
    for i in 0..250 {
        b.tiny_call_price.push(if i % 25 == 0 { 0.45 } else { 0.0 });
    }
    let sessions = [session(
        "s-4411",
        json!({"tiny_call_price": 22.5, "premium_calls": []}),
    )];
    ChartSpec::capture(Kind::OversizedModel, "feature=classifier", &b, &sessions).unwrap()
}

#[test]
fn the_spec_holds_the_group_its_median_band_and_the_flagged_sessions() {
    let spec = no_cache_spec();
    assert_eq!(spec.metric, ChartMetric::CachedShare);
    assert_eq!((spec.lo, spec.hi), (0.0, 1.0));
    assert_eq!(spec.peers, 320);
    assert_eq!(spec.bins.len(), BINS);
    assert_eq!(spec.bins.iter().map(|n| u64::from(*n)).sum::<u64>(), 320);
    // The twenty sessions at 0.02 are in the first bin, none between.
    assert_eq!(spec.bins[0], 20);
    assert!(spec.bins[1..20].iter().all(|n| *n == 0), "{:?}", spec.bins);
    // The median and band are the ring's, as the detector computes them.
    assert!((spec.median - 0.7).abs() < 0.02, "{}", spec.median);
    assert!(spec.band[0] < spec.median && spec.median < spec.band[1]);
    assert!(spec.band[1] <= 1.0);
    let ids: Vec<&str> = spec.flagged.iter().map(|p| p.session_id.as_str()).collect();
    assert_eq!(ids, ["conv-7f3a9c21-long-id", "conv-19b2"]);
    assert_eq!(spec.flagged[1].value, 0.031);
}

#[test]
fn calls_per_session_are_read_back_from_logarithms_on_a_log_axis() {
    let spec = retry_spec();
    assert!(spec.metric.log_scale());
    assert_eq!(spec.lo, 1.0);
    assert_eq!(spec.hi, 1000.0);
    // ln(7) stored, 7 shown: the median of 3..=11 calls.
    assert!((spec.median - 7.0).abs() < 0.01, "{}", spec.median);
    assert!(spec.band[0] > 3.0 && spec.band[1] < 12.0, "{:?}", spec.band);
    assert_eq!(spec.flagged[0].value, 412.0);
    // 412 calls sit near the axis' right end on a log scale.
    assert!((spec.position(412.0) - 412f64.log10() / 3.0).abs() < 1e-9);
}

#[test]
fn no_chart_without_peers_or_without_a_value_to_mark() {
    let empty = GroupBaseline::new(16);
    let s = [session("a", json!({"cached_share": 0.0}))];
    assert_eq!(ChartSpec::capture(Kind::NoCache, "g", &empty, &s), None);
    let mut b = GroupBaseline::new(16);
    b.cached_share.push(0.5);
    // Evidence from before the field, or of another detector.
    let old = [session("a", json!({"requests": 3}))];
    assert_eq!(ChartSpec::capture(Kind::NoCache, "g", &b, &old), None);
    assert!(ChartSpec::capture(Kind::NoCache, "g", &b, &s).is_some());
}

#[test]
fn the_spec_is_small_json_that_reads_back() {
    let spec = oversized_spec();
    assert_eq!(spec.hi, 25.0);
    let json = serde_json::to_string(&spec).unwrap();
    assert!(json.len() < 400, "{json}");
    let back: ChartSpec = serde_json::from_str(&json).unwrap();
    assert_eq!(back, spec);
}

fn decode(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes.to_vec()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    (info, buf)
}

/// The pixel at (x, y) as RGB, expanding the palette.
fn pixel(bytes: &[u8], x: i32, y: i32) -> [u8; 3] {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes.to_vec()));
    decoder.set_transformations(png::Transformations::EXPAND);
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let i = (y as usize * info.width as usize + x as usize) * 3;
    [buf[i], buf[i + 1], buf[i + 2]]
}

fn rgb(c: plotters::style::RGBColor) -> [u8; 3] {
    [c.0, c.1, c.2]
}

#[test]
fn the_png_has_the_size_the_marks_and_is_the_same_every_time() {
    for (name, spec) in [
        ("no_cache", no_cache_spec()),
        ("retry_loop", retry_spec()),
        ("oversized_model", oversized_spec()),
    ] {
        let png = render_png(&spec).unwrap();
        // Kept for people to look at.
        let _ = std::fs::write(std::env::temp_dir().join(format!("chart-{name}.png")), &png);
        let (info, _) = decode(&png);
        assert_eq!((info.width, info.height), (CHART_WIDTH, CHART_HEIGHT));
        assert_eq!(info.color_type, png::ColorType::Indexed);
        assert!(png.len() < 8 * 1024, "{name}: {} bytes", png.len());
        // Each flagged session's marker sits on the axis at its value.
        for p in &spec.flagged {
            let x = x_of(&spec, p.value);
            assert_eq!(pixel(&png, x, AXIS_Y + 2), rgb(FLAGGED), "{name} {p:?}");
        }
        // The median line, above the bars' tops and below the labels.
        let xm = x_of(&spec, spec.median);
        let seen = (AXIS_Y - 110..AXIS_Y - 70).any(|y| pixel(&png, xm, y) == rgb(MEDIAN));
        assert!(seen, "{name}: no median at x={xm}");
        assert_eq!(render_png(&spec).unwrap(), png, "{name}: not deterministic");
    }
}

#[test]
fn the_picture_changes_with_the_flagged_value() {
    let spec = no_cache_spec();
    let mut moved = spec.clone();
    moved.flagged[0].value = 0.5;
    let (a, b) = (render_png(&spec).unwrap(), render_png(&moved).unwrap());
    assert_ne!(a, b);
    assert_eq!(pixel(&b, x_of(&moved, 0.5), AXIS_Y + 2), rgb(FLAGGED));
    assert_ne!(pixel(&b, x_of(&spec, 0.0), AXIS_Y + 2), rgb(FLAGGED));
}

#[test]
fn the_text_line_names_the_metric_group_median_and_flagged_values() {
    let line = no_cache_spec().describe();
    assert!(line.starts_with("Chart: cache-read share per session in feature=support-agent: 320 peer sessions, median 68% (band 56% to 81%)"), "{line}");
    assert!(line.ends_with("flagged: 0%, 3%"), "{line}");
    assert!(!line.contains('\n'));
}
