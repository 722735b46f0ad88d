//! A tiny, dependency-free pseudo-random generator for the simulator.
//!
//! # Why this exists
//!
//! The simulator ships inside a binary that should not pull in `rand`, yet
//! every scenario it generated before (with `rand::rngs::SmallRng` seeded via
//! `SeedableRng::seed_from_u64`) must stay **bit-for-bit identical**: the same
//! seed has to give the same events, amounts and timestamps. [`SimRng`]
//! re-implements exactly the parts of `rand` 0.9.5 (64-bit targets, default
//! features, i.e. without the `unbiased` feature) that the simulator calls:
//!
//! * the generator: `SmallRng` is xoshiro256++ on 64-bit targets, and
//!   [`SimRng::seed_from_u64`] expands the seed with SplitMix64 exactly like
//!   `Xoshiro256PlusPlus::seed_from_u64`; `next_u32` is the upper half of
//!   `next_u64`;
//! * `Rng::random_range` for `Range` / `RangeInclusive` of `i64`, `u64`,
//!   `i32`, `u32`, `usize` and `f64` (`i32` through the `u32` algorithm, as
//!   `rand` does):
//!   * `i64` / `u64` / `u32`: `UniformInt::sample_single_inclusive` (one
//!     widening multiply, plus at most one extra draw to correct the
//!     low-order bits); a half-open range is sampled as `low..=high - 1`; a
//!     range covering the whole type returns one raw draw;
//!   * `usize`: `UniformUsize`, which samples through the `u32` algorithm
//!     (one `next_u32`) when the upper bound fits in `u32`, and through the
//!     `u64` algorithm otherwise;
//!   * `f64`: `UniformFloat::sample_single_inclusive` (used for half-open
//!     ranges too): one `next_u64`, 52 bits turned into a value in `[1, 2)`,
//!     then `(v - 1) * (high - low) + low`; no rejection loop in 0.9.5, so a
//!     half-open float range can, through rounding, return `high`, exactly
//!     like `rand`;
//! * `Rng::random_bool(p)`: `Bernoulli`, i.e. `next_u64() < (p * 2^64) as u64`,
//!   with `p == 1.0` always `true` without consuming a draw;
//! * `rng.random::<f64>()`: `StandardUniform`, i.e. the top 53 bits of
//!   `next_u64` times `2^-53`.
//!
//! Each call returns the same value **and consumes the same number of
//! generator outputs** as its `rand` counterpart, so interleaved call
//! sequences stay in lockstep. This equivalence is proven by the tests at the
//! bottom of this file, which compare against `rand` 0.9.5's `SmallRng`
//! (a dev-dependency only) over many seeds, edge-case ranges, and 10,000
//! interleaved mixed calls.
//!
//! # Differences from `rand` on invalid input (never exercised by callers)
//!
//! `rand` panics on these; [`SimRng`] never panics:
//!
//! * an empty range (`start >= end` for `a..b`, `start > end` for `a..=b`,
//!   or a float bound that is NaN) returns the range's start and consumes no
//!   draw;
//! * a float range whose width is not finite is sampled with the same
//!   formula (the result may be infinite or NaN);
//! * `random_bool` with `p > 1.0` behaves like `p == 1.0`; `p < 0.0` or NaN
//!   behaves like `p == 0.0` (one draw, always `false`).

use core::ops::{Range, RangeInclusive};

/// xoshiro256++ generator, bit-compatible with `rand` 0.9.5's `SmallRng` on
/// 64-bit targets. See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRng {
    s: [u64; 4],
}

impl SimRng {
    /// Same state as `SmallRng::seed_from_u64(seed)`: four SplitMix64 outputs.
    pub fn seed_from_u64(seed: u64) -> SimRng {
        const PHI: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut state = seed;
        let mut s = [0u64; 4];
        for word in s.iter_mut() {
            state = state.wrapping_add(PHI);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            *word = z ^ (z >> 31);
        }
        SimRng { s }
    }

    /// Next 64-bit output of xoshiro256++.
    pub fn next_u64(&mut self) -> u64 {
        let res = self.s[0]
            .wrapping_add(self.s[3])
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        res
    }

    /// Upper 32 bits of the next 64-bit output (as `SmallRng::next_u32`).
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform sample from `range`, identical to `rand::Rng::random_range`.
    ///
    /// Empty ranges return their start without consuming a draw (`rand`
    /// panics instead).
    pub fn random_range<T, R: SimRange<T>>(&mut self, range: R) -> T {
        range.sample_from(self)
    }

    /// `true` with probability `p`, identical to `rand::Rng::random_bool`.
    ///
    /// Out-of-range `p` is clamped instead of panicking: `p > 1.0` is always
    /// `true` (no draw); `p < 0.0` or NaN is always `false` (one draw).
    pub fn random_bool(&mut self, p: f64) -> bool {
        // 2^64 as f64, as in rand's Bernoulli.
        const SCALE: f64 = 2.0 * (1u64 << 63) as f64;
        if p >= 1.0 {
            return true;
        }
        // `as` saturates: negative and NaN give 0, i.e. always false.
        let p_int = (p * SCALE) as u64;
        self.next_u64() < p_int
    }

    /// Uniform `f64` in `[0, 1)`, identical to `rng.random::<f64>()`.
    pub fn random_f64(&mut self) -> f64 {
        const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
        SCALE * (self.next_u64() >> 11) as f64
    }
}

/// A range [`SimRng::random_range`] can sample a `T` from.
///
/// Implemented for exactly the range types the simulator uses.
pub trait SimRange<T> {
    /// Draws one value, exactly as `rand` 0.9.5 would for this range.
    fn sample_from(self, rng: &mut SimRng) -> T;
}

/// High half and low half of the 64-bit product (rand's `wmul` for `u32`).
fn wmul32(a: u32, b: u32) -> (u32, u32) {
    let t = u64::from(a) * u64::from(b);
    ((t >> 32) as u32, t as u32)
}

/// High half and low half of the 128-bit product (rand's `wmul` for `u64`).
fn wmul64(a: u64, b: u64) -> (u64, u64) {
    let t = u128::from(a) * u128::from(b);
    ((t >> 64) as u64, t as u64)
}

/// `UniformInt::<u32>::sample_single_inclusive` (non-`unbiased` variant).
/// Requires `low <= high`.
fn u32_inclusive(rng: &mut SimRng, low: u32, high: u32) -> u32 {
    let range = high.wrapping_sub(low).wrapping_add(1);
    if range == 0 {
        return rng.next_u32();
    }
    let (mut result, lo_order) = wmul32(rng.next_u32(), range);
    if lo_order > range.wrapping_neg() {
        let (new_hi_order, _) = wmul32(rng.next_u32(), range);
        let is_overflow = lo_order.checked_add(new_hi_order).is_none();
        result = result.wrapping_add(u32::from(is_overflow));
    }
    low.wrapping_add(result)
}

/// `UniformInt::<u64>::sample_single_inclusive` (non-`unbiased` variant).
/// Requires `low <= high`. Also serves `i64` (same bits, two's complement).
fn u64_inclusive(rng: &mut SimRng, low: u64, high: u64) -> u64 {
    let range = high.wrapping_sub(low).wrapping_add(1);
    if range == 0 {
        return rng.next_u64();
    }
    let (mut result, lo_order) = wmul64(rng.next_u64(), range);
    if lo_order > range.wrapping_neg() {
        let (new_hi_order, _) = wmul64(rng.next_u64(), range);
        let is_overflow = lo_order.checked_add(new_hi_order).is_none();
        result = result.wrapping_add(u64::from(is_overflow));
    }
    low.wrapping_add(result)
}

/// `UniformUsize::sample_single_inclusive`: the `u32` algorithm when `high`
/// fits in `u32`, else the `u64` one. Requires `low <= high`.
fn usize_inclusive(rng: &mut SimRng, low: usize, high: usize) -> usize {
    match (u32::try_from(low), u32::try_from(high)) {
        (Ok(lo), Ok(hi)) => u32_inclusive(rng, lo, hi) as usize,
        _ => u64_inclusive(rng, low as u64, high as u64) as usize,
    }
}

/// `UniformFloat::<f64>::sample_single_inclusive`. Requires `low <= high`.
fn f64_inclusive(rng: &mut SimRng, low: f64, high: f64) -> f64 {
    const ONE_EXPONENT: u64 = 1023 << 52;
    let scale = high - low;
    let value1_2 = f64::from_bits((rng.next_u64() >> 12) | ONE_EXPONENT);
    (value1_2 - 1.0) * scale + low
}

impl SimRange<u32> for RangeInclusive<u32> {
    fn sample_from(self, rng: &mut SimRng) -> u32 {
        let (low, high) = self.into_inner();
        if low > high {
            return low;
        }
        u32_inclusive(rng, low, high)
    }
}

impl SimRange<u32> for Range<u32> {
    fn sample_from(self, rng: &mut SimRng) -> u32 {
        if self.start >= self.end {
            return self.start;
        }
        u32_inclusive(rng, self.start, self.end - 1)
    }
}

impl SimRange<i32> for RangeInclusive<i32> {
    fn sample_from(self, rng: &mut SimRng) -> i32 {
        let (low, high) = self.into_inner();
        if low > high {
            return low;
        }
        // rand samples `i32` through its unsigned twin (same bits).
        u32_inclusive(rng, low as u32, high as u32) as i32
    }
}

impl SimRange<i32> for Range<i32> {
    fn sample_from(self, rng: &mut SimRng) -> i32 {
        if self.start >= self.end {
            return self.start;
        }
        u32_inclusive(rng, self.start as u32, (self.end - 1) as u32) as i32
    }
}

impl SimRange<u64> for RangeInclusive<u64> {
    fn sample_from(self, rng: &mut SimRng) -> u64 {
        let (low, high) = self.into_inner();
        if low > high {
            return low;
        }
        u64_inclusive(rng, low, high)
    }
}

impl SimRange<u64> for Range<u64> {
    fn sample_from(self, rng: &mut SimRng) -> u64 {
        if self.start >= self.end {
            return self.start;
        }
        u64_inclusive(rng, self.start, self.end - 1)
    }
}

impl SimRange<i64> for RangeInclusive<i64> {
    fn sample_from(self, rng: &mut SimRng) -> i64 {
        let (low, high) = self.into_inner();
        if low > high {
            return low;
        }
        u64_inclusive(rng, low as u64, high as u64) as i64
    }
}

impl SimRange<i64> for Range<i64> {
    fn sample_from(self, rng: &mut SimRng) -> i64 {
        if self.start >= self.end {
            return self.start;
        }
        u64_inclusive(rng, self.start as u64, (self.end - 1) as u64) as i64
    }
}

impl SimRange<usize> for RangeInclusive<usize> {
    fn sample_from(self, rng: &mut SimRng) -> usize {
        let (low, high) = self.into_inner();
        if low > high {
            return low;
        }
        usize_inclusive(rng, low, high)
    }
}

impl SimRange<usize> for Range<usize> {
    fn sample_from(self, rng: &mut SimRng) -> usize {
        if self.start >= self.end {
            return self.start;
        }
        // rand picks the u32 path by the *exclusive* bound (`end <= u32::MAX`),
        // then samples `start..=end - 1`; for `end == u32::MAX + 1` it takes
        // the u64 path although `end - 1` fits in u32. The two paths draw
        // different outputs (`next_u32` vs `next_u64`), so mirror the choice.
        match (u32::try_from(self.start), u32::try_from(self.end)) {
            (Ok(lo), Ok(hi)) => u32_inclusive(rng, lo, hi - 1) as usize,
            _ => u64_inclusive(rng, self.start as u64, (self.end - 1) as u64) as usize,
        }
    }
}

impl SimRange<f64> for RangeInclusive<f64> {
    fn sample_from(self, rng: &mut SimRng) -> f64 {
        let (low, high) = self.into_inner();
        // NaN bounds count as empty, as in rand's `!(low <= high)`.
        if low.is_nan() || high.is_nan() || low > high {
            return low;
        }
        f64_inclusive(rng, low, high)
    }
}

impl SimRange<f64> for Range<f64> {
    fn sample_from(self, rng: &mut SimRng) -> f64 {
        // NaN bounds count as empty, as in rand's `!(start < end)`.
        if self.start.is_nan() || self.end.is_nan() || self.start >= self.end {
            return self.start;
        }
        f64_inclusive(rng, self.start, self.end)
    }
}

#[cfg(test)]
mod tests {
    use super::SimRng;
    use rand::rngs::SmallRng;
    use rand::{Rng, RngCore, SeedableRng};

    /// Seeds 0..200 plus some large / bit-pattern seeds.
    fn seeds() -> Vec<u64> {
        let mut v: Vec<u64> = (0..200).collect();
        v.extend([
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            (1 << 63) - 1,
            0x9e37_79b9_7f4a_7c15,
            0xdead_beef_cafe_babe,
            0x0123_4567_89ab_cdef,
            u64::from(u32::MAX),
            1_700_000_000_000,
            42_424_242_424_242,
        ]);
        v
    }

    fn pair(seed: u64) -> (SimRng, SmallRng) {
        (SimRng::seed_from_u64(seed), SmallRng::seed_from_u64(seed))
    }

    /// Same call on both generators; values must be equal.
    macro_rules! same {
        ($a:expr, $b:expr, $method:ident ( $($arg:expr),* )) => {{
            let x = $a.$method($($arg),*);
            let y = $b.$method($($arg),*);
            assert_eq!(x, y, "{}({})", stringify!($method), stringify!($($arg),*));
            x
        }};
    }

    /// Same call on both generators; floats must be equal bit for bit.
    macro_rules! same_f {
        ($a:expr, $b:expr, $method:ident ( $($arg:expr),* )) => {{
            let x: f64 = $a.$method($($arg),*);
            let y: f64 = $b.$method($($arg),*);
            assert_eq!(
                x.to_bits(),
                y.to_bits(),
                "{}({}): {x} vs {y}",
                stringify!($method),
                stringify!($($arg),*)
            );
            x
        }};
    }

    /// Both generators must still produce the same stream (same draw count).
    fn assert_in_step(a: &mut SimRng, b: &mut SmallRng) {
        for _ in 0..4 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn raw_stream_matches() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for i in 0..200 {
                if i % 3 == 0 {
                    assert_eq!(a.next_u32(), b.next_u32(), "seed {seed}");
                } else {
                    assert_eq!(a.next_u64(), b.next_u64(), "seed {seed}");
                }
            }
        }
    }

    #[test]
    fn i64_ranges_match() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for _ in 0..20 {
                same!(a, b, random_range(0i64..60));
                same!(a, b, random_range(0i64..3_600_000));
                same!(a, b, random_range(0i64..1));
                same!(a, b, random_range(-5i64..5));
                same!(a, b, random_range(1i64..=15));
                same!(a, b, random_range(7i64..=7));
                same!(
                    a,
                    b,
                    random_range(-1_000_000_000_000i64..=1_000_000_000_000)
                );
                same!(a, b, random_range(i64::MIN..i64::MAX));
                same!(a, b, random_range(i64::MIN..=i64::MAX));
                same!(a, b, random_range(i64::MIN..=i64::MIN + 1));
                same!(a, b, random_range(i64::MAX - 1..i64::MAX));
                same!(a, b, random_range(i64::MIN..0));
                same!(a, b, random_range(-1i64..=i64::MAX));
                same!(a, b, random_range(0i64..(1 << 62) + 12_345));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn u64_ranges_match() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for _ in 0..20 {
                same!(a, b, random_range(0u64..2));
                same!(a, b, random_range(50u64..=400));
                same!(a, b, random_range(3_000u64..=8_000));
                same!(a, b, random_range(9u64..=9));
                same!(a, b, random_range(0u64..=u64::MAX));
                same!(a, b, random_range(0u64..u64::MAX));
                same!(a, b, random_range(1u64..=u64::MAX));
                same!(a, b, random_range(u64::MAX - 1..=u64::MAX));
                same!(a, b, random_range(0u64..(1 << 63) + 1));
                same!(a, b, random_range(0u64..=u64::from(u32::MAX)));
                same!(a, b, random_range(0u64..u64::from(u32::MAX) + 1));
                same!(a, b, random_range(0u64..6_148_914_691_236_517_206));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn u32_ranges_match() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for _ in 0..20 {
                same!(a, b, random_range(2u32..=12));
                same!(a, b, random_range(25u32..=45));
                same!(a, b, random_range(0u32..10));
                same!(a, b, random_range(4u32..=4));
                same!(a, b, random_range(0u32..1));
                same!(a, b, random_range(0u32..=u32::MAX));
                same!(a, b, random_range(0u32..u32::MAX));
                same!(a, b, random_range(1u32..=u32::MAX));
                same!(a, b, random_range(u32::MAX - 1..=u32::MAX));
                same!(a, b, random_range(0u32..(1 << 31) + 1));
                same!(a, b, random_range(0u32..2_863_311_531));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn i32_ranges_match() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for _ in 0..20 {
                same!(a, b, random_range(2i32..=5));
                same!(a, b, random_range(1i32..=2));
                same!(a, b, random_range(-7i32..3));
                same!(a, b, random_range(i32::MIN..=i32::MAX));
                same!(a, b, random_range(i32::MIN..i32::MAX));
                same!(a, b, random_range(0i32..(1 << 30) + 7));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn usize_ranges_match() {
        const U32_MAX: usize = u32::MAX as usize;
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for _ in 0..20 {
                same!(a, b, random_range(0usize..1));
                same!(a, b, random_range(0usize..7));
                same!(a, b, random_range(8usize..=15));
                same!(a, b, random_range(3usize..=3));
                same!(a, b, random_range(0usize..U32_MAX));
                same!(a, b, random_range(0usize..=U32_MAX));
                same!(a, b, random_range(0usize..U32_MAX + 1));
                same!(a, b, random_range(0usize..=U32_MAX + 1));
                same!(a, b, random_range(U32_MAX..U32_MAX + 1));
                same!(a, b, random_range(U32_MAX - 5..=U32_MAX));
                same!(a, b, random_range(1usize << 40..1usize << 41));
                same!(a, b, random_range(0usize..=usize::MAX));
                same!(a, b, random_range(0usize..usize::MAX));
                same!(a, b, random_range(usize::MAX - 3..=usize::MAX));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn f64_ranges_match() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for i in 0..20 {
                let total = 0.5 + f64::from(i) * 1234.567;
                same_f!(a, b, random_range(0.0..total));
                same_f!(a, b, random_range(0.9..=1.1));
                same_f!(a, b, random_range(1.0 - 0.15..=1.0 + 0.15));
                same_f!(a, b, random_range(0.6..=1.0));
                same_f!(a, b, random_range(0.0..1.0));
                same_f!(a, b, random_range(0.0..=1.0));
                same_f!(a, b, random_range(2.5..=2.5));
                same_f!(a, b, random_range(-1e9..1e9));
                same_f!(a, b, random_range(-3.0..=-2.0));
                same_f!(a, b, random_range(1e-300..2e-300));
                same_f!(a, b, random_range(0.0..f64::MIN_POSITIVE));
                same_f!(a, b, random_range(1.0..1.0 + f64::EPSILON));
                same_f!(a, b, random_range(-f64::MAX / 2.0..=f64::MAX / 2.0));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn bool_and_f64_match() {
        let ps = [
            0.0,
            1.0,
            0.5,
            0.3,
            0.6,
            0.7,
            0.15,
            0.02,
            1e-12,
            f64::MIN_POSITIVE,
            0.999_999_999,
            1.0 - f64::EPSILON / 2.0,
        ];
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for _ in 0..20 {
                for &p in &ps {
                    same!(a, b, random_bool(p));
                }
                let x = a.random_f64();
                let y: f64 = b.random();
                assert_eq!(x.to_bits(), y.to_bits());
                assert!((0.0..1.0).contains(&x));
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn interleaved_mixed_calls_match() {
        for seed in seeds() {
            let (mut a, mut b) = pair(seed);
            for round in 0..10u32 {
                let n: u32 = same!(a, b, random_range(3..=8));
                let len: usize = same!(a, b, random_range(1usize..=40));
                same!(a, b, random_range(0..len));
                for _ in 0..n {
                    same!(a, b, random_range(0i64..3_600_000));
                    same!(a, b, random_bool(0.5));
                    same!(a, b, random_range(300u64..=800));
                    same_f!(a, b, random_range(0.9..=1.1));
                    same!(a, b, random_range(round..=round + 5));
                }
                let total = f64::from(n) * 17.25;
                same_f!(a, b, random_range(0.0..total));
                same!(a, b, random_range(0u32..=u32::MAX));
                same!(a, b, random_range(i64::MIN..i64::MAX));
                let x = a.random_f64();
                let y: f64 = b.random();
                assert_eq!(x.to_bits(), y.to_bits());
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    /// Picks bounds `lo <= hi` spanning tiny to full-width ranges.
    fn bounds_u64(pick: &mut SmallRng) -> (u64, u64) {
        let lo = match pick.random_range(0..4u32) {
            0 => pick.random_range(0u64..100),
            1 => pick.random_range(0u64..=u64::from(u32::MAX)),
            2 => u64::MAX - pick.random_range(0u64..100),
            _ => pick.next_u64(),
        };
        let span = match pick.random_range(0..5u32) {
            0 => 0,
            1 => pick.random_range(0u64..20),
            2 => pick.random_range(0u64..1 << 20),
            3 => pick.random_range(0u64..1 << 40),
            _ => pick.next_u64(),
        };
        (lo, lo.saturating_add(span))
    }

    #[test]
    fn ten_thousand_mixed_calls_stay_in_lockstep() {
        let mut pick = SmallRng::seed_from_u64(0x005e_ed0f_c0ff_ee00);
        for seed in [0u64, 1, 7, 20_240_601, u64::MAX] {
            let (mut a, mut b) = pair(seed);
            for _ in 0..10_000 {
                let (lo, hi) = bounds_u64(&mut pick);
                let inclusive = pick.random_bool(0.5);
                let kind = pick.random_range(0..8u32);
                match (kind, inclusive) {
                    (0, true) => {
                        same!(a, b, random_range(lo..=hi));
                    }
                    (0, false) => {
                        let hi = hi.max(lo.saturating_add(1)).max(1);
                        let lo = lo.min(hi - 1);
                        same!(a, b, random_range(lo..hi));
                    }
                    (1, true) => {
                        let (l, h) = (lo as i64, hi as i64);
                        same!(a, b, random_range(l.min(h)..=l.max(h)));
                    }
                    (1, false) => {
                        let (l, h) = (lo as i64, hi as i64);
                        let (l, h) = (l.min(h), l.max(h));
                        let h = h.max(l.saturating_add(1));
                        let l = l.min(h - 1);
                        same!(a, b, random_range(l..h));
                    }
                    (2, true) => {
                        let (l, h) = (lo as u32, hi as u32);
                        same!(a, b, random_range(l.min(h)..=l.max(h)));
                    }
                    (2, false) => {
                        let (l, h) = (lo as u32, hi as u32);
                        let (l, h) = (l.min(h), l.max(h).max(1));
                        let l = l.min(h - 1);
                        same!(a, b, random_range(l..h));
                    }
                    (3, true) => {
                        same!(a, b, random_range(lo as usize..=hi as usize));
                    }
                    (3, false) => {
                        let hi = hi.max(lo.saturating_add(1)).max(1);
                        let lo = lo.min(hi - 1);
                        same!(a, b, random_range(lo as usize..hi as usize));
                    }
                    (4, incl) => {
                        let l = pick.random_range(-1e6..1e6);
                        let w = pick.random::<f64>() * 10f64.powi(pick.random_range(-6..7));
                        if incl {
                            same_f!(a, b, random_range(l..=l + w));
                        } else if w > 0.0 {
                            same_f!(a, b, random_range(l..l + w));
                        }
                    }
                    (5, _) => {
                        let p = match pick.random_range(0..4u32) {
                            0 => 0.0,
                            1 => 1.0,
                            _ => pick.random::<f64>(),
                        };
                        same!(a, b, random_bool(p));
                    }
                    (6, _) => {
                        let x = a.random_f64();
                        let y: f64 = b.random();
                        assert_eq!(x.to_bits(), y.to_bits());
                    }
                    _ => {
                        if inclusive {
                            assert_eq!(a.next_u32(), b.next_u32());
                        } else {
                            assert_eq!(a.next_u64(), b.next_u64());
                        }
                    }
                }
            }
            assert_in_step(&mut a, &mut b);
        }
    }

    #[test]
    fn results_stay_within_bounds() {
        let mut a = SimRng::seed_from_u64(99);
        for _ in 0..10_000 {
            let v: u32 = a.random_range(5..=10);
            assert!((5..=10).contains(&v));
            let v: i64 = a.random_range(-3..3);
            assert!((-3..3).contains(&v));
            let v: usize = a.random_range(0..4);
            assert!(v < 4);
            let v: f64 = a.random_range(0.9..=1.1);
            assert!((0.9..=1.1).contains(&v));
        }
    }

    #[test]
    #[allow(clippy::reversed_empty_ranges)]
    fn empty_ranges_return_start_without_drawing() {
        let mut a = SimRng::seed_from_u64(5);
        let before = a.clone();
        assert_eq!(a.random_range(10i64..10), 10);
        assert_eq!(a.random_range(10i64..=9), 10);
        assert_eq!(a.random_range(3u32..3), 3);
        assert_eq!(a.random_range(3u32..=2), 3);
        assert_eq!(a.random_range(8u64..1), 8);
        assert_eq!(a.random_range(8u64..=1), 8);
        assert_eq!(a.random_range(4usize..4), 4);
        assert_eq!(a.random_range(4usize..=0), 4);
        assert_eq!(a.random_range(1.5..1.5), 1.5);
        assert_eq!(a.random_range(1.5..=1.0), 1.5);
        assert!(a.random_range(f64::NAN..1.0).is_nan());
        assert_eq!(a.random_range(0.0..=f64::NAN), 0.0);
        assert_eq!(a, before);
        // Out-of-range probabilities are clamped rather than panicking.
        assert!(a.random_bool(2.0));
        assert_eq!(a, before);
        assert!(!a.random_bool(-1.0));
        assert!(!a.random_bool(f64::NAN));
    }

    #[test]
    fn literal_ranges_infer_like_rand() {
        let mut a = SimRng::seed_from_u64(1);
        let mut b = SmallRng::seed_from_u64(1);
        let x: u32 = a.random_range(0..10);
        let y: u32 = b.random_range(0..10);
        assert_eq!(x, y);
        let x: usize = a.random_range(0..10);
        let y: usize = b.random_range(0..10);
        assert_eq!(x, y);
        let x: i64 = a.random_range(0..10);
        let y: i64 = b.random_range(0..10);
        assert_eq!(x, y);
    }
}
