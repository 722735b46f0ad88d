//! A baseline as compact bytes, the form the state database keeps.
//!
//! Layout (little-endian): the version byte [`VERSION`]; four rings
//! (`log_requests`, `cached_share`, `tiny_call_price`,
//! `cheapest_call_price`), each its capacity and length as `u32` and its
//! values as `f32`, oldest first; then the
//! number of models as `u32` and, per model in name order, the name's
//! length as `u32`, its UTF-8 bytes and its decayed weight as `f64`.
//! Every value is kept bit for bit, so a baseline read back is equal to the
//! one written. Version 1, written before `cheapest_call_price` existed,
//! lacks that ring: it is read back empty.

use super::{GroupBaseline, Ring};
use std::collections::{BTreeMap, VecDeque};

/// The layout's version, the first byte.
pub const VERSION: u8 = 2;
/// The layout without `cheapest_call_price`, still read.
const VERSION_1: u8 = 1;

impl GroupBaseline {
    /// The baseline as compact bytes (see the module's layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let rings = [
            &self.log_requests,
            &self.cached_share,
            &self.tiny_call_price,
            &self.cheapest_call_price,
        ];
        let values: usize = rings.iter().map(|r| r.values.len()).sum();
        let names: usize = self.model_calls.keys().map(|m| m.len() + 12).sum();
        let mut out = Vec::with_capacity(1 + 32 + 4 * values + 4 + names);
        out.push(VERSION);
        for r in rings {
            put_u32(&mut out, r.cap);
            put_u32(&mut out, r.values.len());
            // Sized once and filled four bytes at a time: a push per value
            // checked the capacity every time.
            let (front, back) = r.values.as_slices();
            for part in [front, back] {
                let start = out.len();
                out.resize(start + 4 * part.len(), 0);
                for (dst, v) in out[start..].chunks_exact_mut(4).zip(part) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        put_u32(&mut out, self.model_calls.len());
        for (model, weight) in &self.model_calls {
            put_u32(&mut out, model.len());
            out.extend_from_slice(model.as_bytes());
            out.extend_from_slice(&weight.to_le_bytes());
        }
        out
    }

    /// Reads bytes written by [`GroupBaseline::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<GroupBaseline, String> {
        let mut r = Reader { bytes, at: 0 };
        let version = r.take(1)?[0];
        if version != VERSION && version != VERSION_1 {
            return Err(format!("unknown baseline layout {version}"));
        }
        let log_requests = r.ring()?;
        let cached_share = r.ring()?;
        let tiny_call_price = r.ring()?;
        let cheapest_call_price = if version == VERSION_1 {
            Ring::new(super::CHEAPEST_KEPT)
        } else {
            r.ring()?
        };
        let models = r.u32()?;
        let mut model_calls = BTreeMap::new();
        for _ in 0..models {
            let len = r.u32()?;
            let name = std::str::from_utf8(r.take(len)?)
                .map_err(|e| format!("model name: {e}"))?
                .to_owned();
            let weight = f64::from_le_bytes(r.array()?);
            model_calls.insert(name, weight);
        }
        if r.at != bytes.len() {
            return Err(format!("{} bytes after the baseline", bytes.len() - r.at));
        }
        Ok(GroupBaseline {
            log_requests,
            cached_share,
            tiny_call_price,
            cheapest_call_price,
            model_calls,
        })
    }
}

fn put_u32(out: &mut Vec<u8>, v: usize) {
    out.extend_from_slice(&u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or_else(|| format!("baseline cut short at byte {}", self.at))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn u32(&mut self) -> Result<usize, String> {
        Ok(u32::from_le_bytes(self.array()?) as usize)
    }

    fn ring(&mut self) -> Result<Ring, String> {
        let cap = self.u32()?;
        let len = self.u32()?;
        let raw = self.take(len.checked_mul(4).ok_or("ring too long")?)?;
        let values: VecDeque<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Ring::holding(cap, values))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn sample() -> GroupBaseline {
        let mut b = GroupBaseline::new(4);
        for v in [0.1, 1.0 / 3.0, 2.5, 7.0, 1e-7] {
            b.log_requests.push(v);
        }
        b.cached_share.push(0.0);
        b.cached_share.push(0.93);
        b.cheapest_call_price.push(0.175);
        b.cheapest_call_price.push(4.375);
        b.model_calls
            .insert("gpt-6.1-luna".into(), 12.345_678_901_234);
        b.model_calls.insert("claude-é".into(), 0.5);
        b
    }

    #[test]
    fn a_baseline_reads_back_equal_to_the_one_written() {
        let b = sample();
        let bytes = b.to_bytes();
        assert_eq!(GroupBaseline::from_bytes(&bytes).unwrap(), b);
        assert_eq!(bytes[0], VERSION);
        // 1 + 4 rings (8 + 4 per value: 4, 2, 0, 2 values) + 4 + two models.
        assert_eq!(
            bytes.len(),
            1 + 4 * 8 + 4 * 8 + 4 + (4 + 12 + 8) + (4 + 9 + 8)
        );
        let empty = GroupBaseline::new(512);
        assert_eq!(GroupBaseline::from_bytes(&empty.to_bytes()).unwrap(), empty);
    }

    #[test]
    fn a_version_1_baseline_reads_back_without_the_cheapest_prices() {
        let b = sample();
        let v2 = b.to_bytes();
        // Version 1 is version 2 without the fourth ring (capacity 64, two
        // values): its bytes sit after the three rings of 4, 2 and 0 values.
        let fourth = 1 + 3 * 8 + 4 * 6;
        let mut v1 = v2[..fourth].to_vec();
        v1.extend_from_slice(&v2[fourth + 8 + 4 * 2..]);
        v1[0] = 1;
        let read = GroupBaseline::from_bytes(&v1).unwrap();
        assert!(read.cheapest_call_price.is_empty());
        assert_eq!(
            GroupBaseline {
                cheapest_call_price: Ring::new(super::super::CHEAPEST_KEPT),
                ..b
            },
            read
        );
    }

    #[test]
    fn cut_or_unknown_bytes_are_refused() {
        let bytes = sample().to_bytes();
        for n in [0, 1, 10, bytes.len() - 1] {
            assert!(GroupBaseline::from_bytes(&bytes[..n]).is_err(), "{n}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(GroupBaseline::from_bytes(&longer).is_err());
        let mut other = bytes;
        other[0] = 9;
        assert!(
            GroupBaseline::from_bytes(&other)
                .unwrap_err()
                .contains("layout 9")
        );
    }
}
