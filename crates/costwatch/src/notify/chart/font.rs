//! The chart's text: one font embedded in the binary, DejaVu Sans
//! (Bitstream Vera licence, beside the file in `assets/fonts/`), cut to
//! Latin-1, σ and a few punctuation marks, drawn with `ab_glyph` straight
//! into the pixels. No system font or fontconfig is read at run time.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use std::sync::OnceLock;

static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans-subset.ttf");

/// The embedded font, parsed once; `None` if it could not be (then no
/// chart is drawn).
pub(super) fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(DEJAVU_SANS).ok())
        .as_ref()
}

/// Text the font can draw: characters outside it (and control or bidi
/// characters) become `?`.
pub(super) fn drawable(text: &str) -> String {
    text.chars()
        .map(|c| {
            let known = matches!(c, ' '..='~' | '\u{a0}'..='\u{ff}' | 'σ' | '–' | '—' | '…' | '−');
            if known { c } else { '?' }
        })
        .collect()
}

/// How wide `text` is at `size` pixels, kerning included.
pub(super) fn width(font: &FontRef<'_>, text: &str, size: f32) -> f32 {
    let scaled = font.as_scaled(PxScale::from(size));
    let mut w = 0.0;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            w += scaled.kern(p, id);
        }
        w += scaled.h_advance(id);
        prev = Some(id);
    }
    w
}

/// Draws `text` with its top-left corner at (`x`, `y`) into `rgb` (3 bytes
/// a pixel, `w` × `h`), blending `color` by each pixel's coverage (in eighths).
#[allow(clippy::too_many_arguments)]
pub(super) fn draw_text(
    font: &FontRef<'_>,
    rgb: &mut [u8],
    (w, h): (u32, u32),
    text: &str,
    (x, y): (f32, f32),
    size: f32,
    color: [u8; 3],
) {
    let scaled = font.as_scaled(PxScale::from(size));
    let mut caret = point(x, y + scaled.ascent());
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            caret.x += scaled.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(PxScale::from(size), caret);
        caret.x += scaled.h_advance(id);
        let Some(outline) = font.outline_glyph(glyph) else {
            continue;
        };
        let bounds = outline.px_bounds();
        outline.draw(|gx, gy, coverage| {
            let px = bounds.min.x as i64 + i64::from(gx);
            let py = bounds.min.y as i64 + i64::from(gy);
            if px < 0 || py < 0 || px >= i64::from(w) || py >= i64::from(h) {
                return;
            }
            let i = ((py as usize) * (w as usize) + px as usize) * 3;
            // Eight levels of coverage keep the palette and the PNG small.
            let a = (coverage.clamp(0.0, 1.0) * 8.0).round() / 8.0;
            for k in 0..3 {
                let under = f32::from(rgb[i + k]);
                rgb[i + k] = (under + (f32::from(color[k]) - under) * a).round() as u8;
            }
        });
    }
}
