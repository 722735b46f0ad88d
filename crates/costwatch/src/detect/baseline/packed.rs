//! A baseline as compact bytes, the form the state database keeps.
//!
//! Layout (little-endian): the version byte [`VERSION`]; three rings
//! (`log_requests`, `cached_share`, `tiny_call_price`), each its capacity
//! and length as `u32` and its values as `f32`, oldest first; then
//! `premium_since` as an `i64` of Unix seconds ([`NONE`] when unset); then
//! the number of models as `u32` and, per model in name order, the name's
//! length as `u32`, its UTF-8 bytes and its decayed weight as `f64`.
//! Every value is kept bit for bit, so a baseline read back is equal to the
//! one written.
//!
//! Older layouts are still read: version 2 had a fourth ring after the
//! three (the prices of the newest sessions' cheapest models), skipped;
//! version 1 had neither it nor `premium_since`, read back unset.

use super::{GroupBaseline, Ring};
use chrono::DateTime;
use std::collections::{BTreeMap, VecDeque};

/// The layout's version, the first byte.
pub const VERSION: u8 = 3;
/// The layout with a fourth ring and no `premium_since`, still read.
const VERSION_2: u8 = 2;
/// The layout with neither, still read.
const VERSION_1: u8 = 1;
/// `premium_since` unset.
const NONE: i64 = i64::MIN;

impl GroupBaseline {
    /// The baseline as compact bytes (see the module's layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let rings = [
            &self.log_requests,
            &self.cached_share,
            &self.tiny_call_price,
        ];
        let values: usize = rings.iter().map(|r| r.values.len()).sum();
        let names: usize = self.model_calls.keys().map(|m| m.len() + 12).sum();
        let mut out = Vec::with_capacity(1 + 24 + 4 * values + 8 + 4 + names);
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
        let since = self.premium_since.map_or(NONE, |t| t.timestamp());
        out.extend_from_slice(&since.to_le_bytes());
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
        if !(VERSION_1..=VERSION).contains(&version) {
            return Err(format!("unknown baseline layout {version}"));
        }
        let log_requests = r.ring()?;
        let cached_share = r.ring()?;
        let tiny_call_price = r.ring()?;
        if version == VERSION_2 {
            r.ring()?;
        }
        let premium_since = if version == VERSION {
            match i64::from_le_bytes(r.array()?) {
                NONE => None,
                secs => Some(
                    DateTime::from_timestamp(secs, 0)
                        .ok_or_else(|| format!("premium_since {secs} out of range"))?,
                ),
            }
        } else {
            None
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
            premium_since,
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
        b.premium_since = DateTime::from_timestamp(1_790_000_000, 0);
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
        // 1 + 3 rings (8 + 4 per value: 4, 2, 0 values) + 8 + 4 + two models.
        assert_eq!(
            bytes.len(),
            1 + 3 * 8 + 4 * 6 + 8 + 4 + (4 + 12 + 8) + (4 + 9 + 8)
        );
        let empty = GroupBaseline::new(512);
        assert_eq!(GroupBaseline::from_bytes(&empty.to_bytes()).unwrap(), empty);
    }

    /// The bytes of `b` in version 2 or 1: a fourth ring (capacity 64, two
    /// values) after the three, and no `premium_since`.
    fn older(b: &GroupBaseline, version: u8) -> Vec<u8> {
        let v3 = b.to_bytes();
        let rings = 1 + 3 * 8 + 4 * 6;
        let mut out = v3[..rings].to_vec();
        if version == 2 {
            out.extend_from_slice(&64u32.to_le_bytes());
            out.extend_from_slice(&2u32.to_le_bytes());
            out.extend_from_slice(&0.175f32.to_le_bytes());
            out.extend_from_slice(&4.375f32.to_le_bytes());
        }
        out.extend_from_slice(&v3[rings + 8..]);
        out[0] = version;
        out
    }

    #[test]
    fn older_baselines_read_back_without_a_premium_episode() {
        let b = sample();
        let want = GroupBaseline {
            premium_since: None,
            ..b.clone()
        };
        for version in [1, 2] {
            let read = GroupBaseline::from_bytes(&older(&b, version)).unwrap();
            assert_eq!(read, want, "version {version}");
        }
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
