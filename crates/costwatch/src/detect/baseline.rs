//! Robust per-group baselines kept across windows and restarts.
//!
//! A group's baseline is a bounded ring of recent sessions' figures, so its
//! size is fixed however much traffic flows, and the median/MAD computed from
//! it are not moved by the few outliers they are meant to expose.

mod packed;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

/// The newest `cap` values, oldest first.
///
/// A ring asked to [`keep_sorted`](Ring::keep_sorted) sorts a copy of its
/// values once and keeps it in order as values come and go (a binary
/// search and a move of at most `cap` values each): a baseline carried
/// from window to window then answers its median in constant time and its
/// MAD in half a pass, where selecting them costs several passes every
/// window. A ring read afresh each window (the daemon's) selects, which is
/// cheaper than sorting once. The copy doubles the ring's memory while it
/// is kept, and is not part of the ring's value: it is neither compared
/// nor stored.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Ring {
    cap: usize,
    values: VecDeque<f32>,
    #[serde(skip)]
    sorted: Option<Vec<f32>>,
    /// Values pushed since the ring was made or read back (neither
    /// compared nor stored): where a value held apart would have stood
    /// ([`Ring::merge_in_order`]).
    #[serde(skip)]
    pushed: u64,
}

impl std::fmt::Debug for Ring {
    /// The ring's value (what is stored), as for [`PartialEq`].
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("cap", &self.cap)
            .field("values", &self.values)
            .finish_non_exhaustive()
    }
}

impl PartialEq for Ring {
    fn eq(&self, other: &Ring) -> bool {
        self.cap == other.cap && self.values == other.values
    }
}

impl Ring {
    /// An empty ring that keeps `cap` values.
    pub fn new(cap: usize) -> Self {
        Ring::holding(cap.max(1), VecDeque::new())
    }

    /// A ring of `values` (oldest first) that keeps `cap`, as read back.
    fn holding(cap: usize, values: VecDeque<f32>) -> Self {
        Ring {
            cap,
            values,
            sorted: None,
            pushed: 0,
        }
    }

    /// Adds a value, dropping the oldest when full.
    pub fn push(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        self.keep(self.cap.saturating_sub(1));
        let v = v as f32;
        self.values.push_back(v);
        self.pushed += 1;
        if let Some(sorted) = &mut self.sorted {
            let at = sorted.partition_point(|x| x.total_cmp(&v).is_lt());
            sorted.insert(at, v);
        }
    }

    /// Drops the oldest values until at most `n` are left.
    fn keep(&mut self, n: usize) {
        while self.values.len() > n {
            let Some(old) = self.values.pop_front() else {
                return;
            };
            if let Some(sorted) = &mut self.sorted {
                match sorted.binary_search_by(|x| x.total_cmp(&old)) {
                    Ok(at) => {
                        sorted.remove(at);
                    }
                    // Cannot happen while the copy is kept in step; if it
                    // did, the medians select until it is kept again.
                    Err(_) => self.sorted = None,
                }
            }
        }
    }

    /// Values pushed so far: a value held apart now, and let in later by
    /// [`Ring::merge_in_order`], takes this place among them.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Pushes `fresh`'s values (oldest first) with `late` ones let in
    /// where they arrived: each `(at, value)` was held apart when `fresh`
    /// had had `at` values pushed ([`Ring::pushed`]), and `late` is in the
    /// order it arrived. What is kept is what pushing every value in
    /// arrival order would have kept: held apart, a window's sessions of
    /// one kind would otherwise all come last and, in a window of more
    /// sessions than the ring holds, push out every other.
    pub fn merge_in_order(&mut self, fresh: &Ring, late: impl IntoIterator<Item = (u64, f64)>) {
        // A late value older than the oldest kept fresh one was followed
        // by a whole ring of fresh values: it would be gone.
        let first = fresh.pushed.saturating_sub(fresh.values.len() as u64);
        let mut late = late.into_iter().filter(|(at, _)| *at >= first).peekable();
        for (at, v) in (first..).zip(fresh.values()) {
            while let Some((_, l)) = late.next_if(|(held_at, _)| *held_at <= at) {
                self.push(l);
            }
            self.push(v);
        }
        for (_, l) in late {
            self.push(l);
        }
    }

    /// Keeps a sorted copy of the values from now on (sorting them now,
    /// unless it is already kept), for a ring whose medians will be asked
    /// again after more values come.
    pub fn keep_sorted(&mut self) {
        if self.sorted.is_none() {
            let mut v: Vec<f32> = self.values.iter().copied().collect();
            v.sort_unstable_by(f32::total_cmp);
            self.sorted = Some(v);
        }
    }

    /// Number of values held.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the ring holds nothing.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
        self.keep(self.cap);
    }

    /// The values, oldest first.
    pub fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.values.iter().map(|v| f64::from(*v))
    }

    /// Median of the values; `None` when empty.
    pub fn median(&self) -> Option<f64> {
        if self.values.is_empty() {
            return None;
        }
        let Some(sorted) = &self.sorted else {
            let mut values: Vec<f32> = self.values.iter().copied().collect();
            return Some(median_in_place(&mut values, f32::total_cmp));
        };
        let n = sorted.len();
        let lower = (n / 2).checked_sub(1).map_or(0.0, |i| f64::from(sorted[i]));
        Some(middle(n, lower, f64::from(sorted[n / 2])))
    }

    /// Median and the scaled median absolute deviation (a robust standard
    /// deviation: 1.4826 x MAD); `None` when empty.
    pub fn median_mad(&self) -> Option<(f64, f64)> {
        let median = self.median()?;
        let finite = |v: Option<&f32>| v.is_some_and(|v| v.is_finite());
        let sorted = match &self.sorted {
            // Values only damaged bytes can hold (NaN, infinity) are left
            // to the selection, which orders them as the walk cannot.
            Some(sorted) if finite(sorted.first()) && finite(sorted.last()) => sorted,
            _ => {
                let mut deviations: Vec<f64> = self
                    .values
                    .iter()
                    .map(|v| (f64::from(*v) - median).abs())
                    .collect();
                let mad = median_in_place(&mut deviations, f64::total_cmp);
                return Some((median, 1.4826 * mad));
            }
        };
        // The deviations, smallest first, are those of the values walking
        // out from the median on either side: the middle one or two of
        // them are the MAD.
        let dev = |v: f32| (f64::from(v) - median).abs();
        let n = sorted.len();
        let (mut below, mut above) = {
            let split = sorted.partition_point(|v| f64::from(*v) < median);
            (split, split)
        };
        let (mut lower, mut upper) = (0.0, 0.0);
        for _ in 0..=n / 2 {
            let next_below = below.checked_sub(1).map(|i| dev(sorted[i]));
            let next_above = sorted.get(above).map(|v| dev(*v));
            let d = match (next_below, next_above) {
                (Some(b), Some(a)) if b < a => {
                    below -= 1;
                    b
                }
                (_, Some(a)) => {
                    above += 1;
                    a
                }
                (Some(b), None) => {
                    below -= 1;
                    b
                }
                (None, None) => break,
            };
            (lower, upper) = (upper, d);
        }
        Some((median, 1.4826 * middle(n, lower, upper)))
    }

    /// Share of the values at or above `t` (0 when empty), with a tolerance
    /// for the f32 rounding of stored prices.
    pub fn share_at_least(&self, t: f64) -> f64 {
        if self.values.is_empty() {
            return 0.0;
        }
        let hits = self
            .values
            .iter()
            .filter(|v| f64::from(**v) >= t * (1.0 - 1e-6))
            .count();
        hits as f64 / self.values.len() as f64
    }
}

/// The median of `values` (the mean of the two middle ones when they are
/// even in number) in the total order `cmp`, reordering them: for a ring
/// that keeps no sorted copy. The same value, bit for bit, as statrs'
/// `OrderStatistics::median` on the values as `f64` (a test checks it):
/// one selection puts the upper middle value in place and every value
/// below it to its left, so the lower middle one is the largest of those,
/// where statrs selects a second time.
fn median_in_place<T, F>(values: &mut [T], cmp: F) -> f64
where
    T: Copy + Into<f64>,
    F: Fn(&T, &T) -> Ordering,
{
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    let (below, upper, _) = values.select_nth_unstable_by(n / 2, &cmp);
    let upper: f64 = (*upper).into();
    if n % 2 == 1 {
        return upper;
    }
    let lower = below
        .iter()
        .max_by(|a, b| cmp(a, b))
        .map_or(upper, |v| (*v).into());
    middle(n, lower, upper)
}

/// The median of `n` ordered values from their two middle ones (`lower`
/// is ignored when `n` is odd): statrs' formula, so the bits are the same.
fn middle(n: usize, lower: f64, upper: f64) -> f64 {
    if n % 2 == 1 {
        upper
    } else {
        (lower + upper) / 2.0
    }
}

/// What is remembered about one peer group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupBaseline {
    /// `ln(requests)` of recent sessions.
    pub log_requests: Ring,
    /// Cached share of the prompt, of recent sessions that could have cached.
    pub cached_share: Ring,
    /// Per recent session, the price level of its tiny calls: the blended
    /// price of the cheapest model among those whose tiny calls make most of
    /// its cost (0 when tiny calls are not most of its cost). Kept as a price,
    /// not a yes/no, so "premium" can be decided later against the models in
    /// use then.
    pub tiny_call_price: Ring,
    /// When the group's tiny calls began going to a premium model its
    /// history did not explain, in the stretch of windows still going (each
    /// window of its sessions had some): while it is younger than the
    /// rule's `accept_after`, those sessions are kept out of
    /// `tiny_call_price` and `model_calls`, so the move stays an incident
    /// (see `detect::window`). `None`: no such stretch is going on.
    #[serde(default)]
    pub premium_since: Option<DateTime<Utc>>,
    /// Recent calls per model, decayed, to name the group's usual model.
    pub model_calls: BTreeMap<String, f64>,
}

/// How fast old calls fade from `model_calls` (per window).
const MODEL_DECAY: f64 = 0.98;
/// Models below this decayed weight are forgotten.
const MODEL_FORGET: f64 = 0.5;

impl GroupBaseline {
    /// An empty baseline keeping `cap` sessions.
    pub fn new(cap: usize) -> Self {
        GroupBaseline {
            log_requests: Ring::new(cap),
            cached_share: Ring::new(cap),
            tiny_call_price: Ring::new(cap),
            premium_since: None,
            model_calls: BTreeMap::new(),
        }
    }

    /// Applies a new capacity (after a config change).
    pub fn resize(&mut self, cap: usize) {
        self.log_requests.set_cap(cap);
        self.cached_share.set_cap(cap);
        self.tiny_call_price.set_cap(cap);
    }

    /// Keeps sorted copies of the rings whose medians are asked (calls per
    /// session and cached share; see [`Ring::keep_sorted`]): for a baseline
    /// carried to the next windows.
    pub fn keep_sorted(&mut self) {
        self.log_requests.keep_sorted();
        self.cached_share.keep_sorted();
    }

    /// Fades model weights once per window.
    pub fn decay_models(&mut self) {
        self.model_calls.retain(|_, w| {
            *w *= MODEL_DECAY;
            *w >= MODEL_FORGET
        });
    }

    /// Share of recent sessions whose tiny calls were mostly on models priced
    /// at `floor` or more.
    pub fn premium_tiny_share(&self, floor: f64) -> f64 {
        self.tiny_call_price.share_at_least(floor)
    }

    /// The statistics the checks compare against.
    pub fn stats(&self) -> GroupStats {
        let (log_req_median, log_req_sigma) = self.log_requests.median_mad().unwrap_or((0.0, 0.0));
        GroupStats {
            peers: self.log_requests.len(),
            log_req_median,
            log_req_sigma,
            cache_peers: self.cached_share.len(),
            cache_median: self.cached_share.median(),
            premium_peers: self.tiny_call_price.len(),
            premium_tiny_share: 0.0,
            premium_accepted: false,
            premium_since: self.premium_since,
            usual_model: self.usual_model().map(str::to_owned),
        }
    }

    /// The model the group calls most.
    pub fn usual_model(&self) -> Option<&str> {
        self.model_calls
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(m, _)| m.as_str())
    }
}

/// A group's baseline summarised for the checks.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupStats {
    /// Sessions in the request-count baseline.
    pub peers: usize,
    /// Median of `ln(requests)`.
    pub log_req_median: f64,
    /// Robust standard deviation of `ln(requests)`.
    pub log_req_sigma: f64,
    /// Sessions in the cached-share baseline.
    pub cache_peers: usize,
    /// Median cached share of those sessions.
    pub cache_median: Option<f64>,
    /// Sessions in the premium-use baseline.
    pub premium_peers: usize,
    /// Share of those that made mostly tiny premium calls; filled in per
    /// rule by [`GroupBaseline::premium_tiny_share`].
    pub premium_tiny_share: f64,
    /// Whether the group's tiny calls have gone to a premium model without
    /// a pause for the rule's `accept_after`: its history now takes that as
    /// its normal. Filled in per rule.
    pub premium_accepted: bool,
    /// Since when its tiny calls have gone to premium models its history
    /// did not explain, without a pause ([`GroupBaseline::premium_since`]).
    pub premium_since: Option<DateTime<Utc>>,
    /// The model the group calls most.
    pub usual_model: Option<String>,
}

impl GroupStats {
    /// The group's median number of calls per session.
    pub fn median_requests(&self) -> f64 {
        if self.peers == 0 {
            1.0
        } else {
            self.log_req_median.exp()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The median and MAD as they were computed with statrs: the ring's
    /// values as `f64`, each median selected by `OrderStatistics`.
    fn statrs_median_mad(r: &Ring) -> (f64, f64) {
        use statrs::statistics::{Data, OrderStatistics};
        let median = Data::new(r.values().collect::<Vec<f64>>()).median();
        let deviations: Vec<f64> = r.values().map(|v| (v - median).abs()).collect();
        (median, 1.4826 * Data::new(deviations).median())
    }

    /// Asserts that `r`'s median and MAD are statrs', bit for bit.
    fn assert_statrs_bits(r: &Ring, at: &str) {
        let (median, mad) = r.median_mad().unwrap();
        let (want_median, want_mad) = statrs_median_mad(r);
        assert_eq!(median.to_bits(), want_median.to_bits(), "median {at}");
        assert_eq!(mad.to_bits(), want_mad.to_bits(), "MAD {at}");
        assert_eq!(r.median().unwrap().to_bits(), want_median.to_bits(), "{at}");
    }

    #[test]
    fn median_and_mad_are_statrs_bit_for_bit() {
        // Lengths odd and even, 1 and 2, a full default ring; values with
        // ties, signed zeros and the f32 rounding of log call counts.
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for len in [1usize, 2, 3, 4, 5, 16, 17, 100, 511, 512] {
            for round in 0..20 {
                let mut r = Ring::new(len);
                for _ in 0..len {
                    let v = match round % 4 {
                        0 => ((next() % 40 + 1) as f64).ln(),
                        1 => (next() % 7) as f64 / 3.0,
                        2 => [0.0, -0.0, 1.0][(next() % 3) as usize],
                        _ => (next() % 1_000_000) as f64 * 1e-9,
                    };
                    r.push(v);
                }
                // Selected from the values, then read from the sorted copy,
                // which the pushes after it keep in step as the oldest
                // values leave.
                assert_statrs_bits(&r, &format!("{len} {round} selected"));
                r.keep_sorted();
                for push in 0..=len.min(40) {
                    assert_statrs_bits(&r, &format!("{len} {round} {push}"));
                    r.push(((next() % 50 + 1) as f64).ln());
                }
                r.set_cap(len.div_ceil(2));
                assert_statrs_bits(&r, &format!("{len} {round} resized"));
            }
        }
        assert_eq!(Ring::new(4).median_mad(), None);
        // Values only damaged bytes can hold are still ordered as statrs
        // orders them, with or without a sorted copy.
        let mut damaged = Ring::holding(4, VecDeque::from([1.0, f32::NAN, 3.0, f32::INFINITY]));
        assert_statrs_bits(&damaged, "damaged, selected");
        damaged.keep_sorted();
        assert_statrs_bits(&damaged, "damaged, sorted");
    }

    #[test]
    fn ring_keeps_only_the_newest_values() {
        let mut r = Ring::new(3);
        for v in [1.0, 2.0, 3.0, 4.0] {
            r.push(v);
        }
        assert_eq!(r.values().collect::<Vec<_>>(), vec![2.0, 3.0, 4.0]);
        assert_eq!(r.median(), Some(3.0));
    }

    #[test]
    fn shares_count_the_values_at_or_above() {
        let mut r = Ring::new(8);
        assert_eq!(r.share_at_least(1.0), 0.0);
        for v in [0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 0.0, 2.0] {
            r.push(v);
        }
        assert_eq!(r.share_at_least(1.0), 0.375);
        // At the threshold counts, whatever f32 rounding did to it.
        assert_eq!(r.share_at_least(2.0), 0.375);
        assert_eq!(r.share_at_least(2.1), 0.0);
    }

    #[test]
    fn median_and_mad_ignore_one_outlier() {
        let mut r = Ring::new(16);
        for v in [3.0, 4.0, 3.0, 5.0, 4.0, 3.0, 4.0, 100.0] {
            r.push(v);
        }
        let (m, s) = r.median_mad().unwrap();
        assert!((m - 4.0).abs() < 1e-9, "{m}");
        assert!(s > 0.5 && s < 2.0, "{s}");
    }

    #[test]
    fn baseline_survives_a_json_round_trip() {
        let mut b = GroupBaseline::new(8);
        b.log_requests.push(1.5);
        b.model_calls.insert("m".into(), 3.0);
        let json = serde_json::to_string(&b).unwrap();
        let back: GroupBaseline = serde_json::from_str(&json).unwrap();
        assert_eq!(back, b);
        assert_eq!(back.stats().usual_model.as_deref(), Some("m"));
    }
}
