//! RGB pixels to a small indexed-colour PNG. A chart has a handful of
//! flat colours plus the anti-aliased edges of its text; the 256 most used
//! colours make the palette and any other pixel takes the nearest of them,
//! so the file is a few KB and the same pixels always give the same bytes.

use super::ChartError;
use std::collections::BTreeMap;

type Rgb = [u8; 3];

/// Encodes `rgb` (3 bytes a pixel, rows top to bottom) as an 8-bit
/// indexed PNG.
pub fn indexed_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, ChartError> {
    let mut counts: BTreeMap<Rgb, u32> = BTreeMap::new();
    for px in rgb.chunks_exact(3) {
        *counts.entry([px[0], px[1], px[2]]).or_insert(0) += 1;
    }
    let mut by_use: Vec<(Rgb, u32)> = counts.into_iter().collect();
    // Most used first; ties in colour order, so the palette is stable.
    by_use.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let palette: Vec<Rgb> = by_use.iter().take(256).map(|(c, _)| *c).collect();
    let mut index: BTreeMap<Rgb, u8> = BTreeMap::new();
    for (i, c) in palette.iter().enumerate() {
        index.insert(*c, i as u8);
    }
    let mut pixels = Vec::with_capacity(rgb.len() / 3);
    for px in rgb.chunks_exact(3) {
        let c = [px[0], px[1], px[2]];
        let i = match index.get(&c) {
            Some(i) => *i,
            None => {
                let i = nearest(&palette, c);
                index.insert(c, i);
                i
            }
        };
        pixels.push(i);
    }

    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, width, height);
        encoder.set_color(png::ColorType::Indexed);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_palette(palette.concat());
        encoder.set_compression(png::Compression::High);
        let mut writer = encoder
            .write_header()
            .map_err(|e| ChartError::Encode(e.to_string()))?;
        writer
            .write_image_data(&pixels)
            .map_err(|e| ChartError::Encode(e.to_string()))?;
        writer
            .finish()
            .map_err(|e| ChartError::Encode(e.to_string()))?;
    }
    Ok(out)
}

/// The palette entry closest to `c` (squared distance; the first on ties).
fn nearest(palette: &[Rgb], c: Rgb) -> u8 {
    let d = |p: &Rgb| -> u32 {
        p.iter()
            .zip(c.iter())
            .map(|(a, b)| {
                let x = u32::from(a.abs_diff(*b));
                x * x
            })
            .sum()
    };
    let mut best = 0usize;
    for (i, p) in palette.iter().enumerate() {
        if d(p) < d(&palette[best]) {
            best = i;
        }
    }
    best as u8
}
