//! Unit prices learned from the costs a source reports, for models no
//! catalogue prices: the last of the price sources (`super::table`), and
//! the same rule for every source that reports a cost per call (Langfuse's
//! `costDetails`, the LiteLLM proxy's `spend`).
//!
//! The estimate is ordinary least squares over the calls read for a
//! window: each call with a positive cost is one equation,
//! `cost = uncached × p_in + cached × p_read + written × p_write + output ×
//! p_out`, and the four prices are what fits every call best. Data that
//! follows a price list exactly gives that list back (to a billionth of a
//! dollar per million tokens). Where the calls cannot tell the parts apart
//! (one call, or prompts and completions always in the same proportion, or
//! a fitted price below zero), fewer prices are fitted, in this order:
//! cache writes at the input price (as [`ModelPrice::cost`] bills them
//! without a write price), then cache reads too, then one price for every
//! token. A part no call had stays unknown: no cache-read tokens, no
//! cache-read price (and the model is taken not to cache); no completion
//! tokens, the output at the input price.
//!
//! A call that cost nothing (a refused call, a cached response, a row the
//! system did not price) says nothing about prices and is left out, as is
//! a call without tokens.

use super::ModelPrice;
use super::table::Billed;
use std::collections::HashMap;

/// Most models learned from in one read; the calls of more are not
/// learned from.
pub const MAX_MODELS: usize = 4096;

/// The parts of a call, in the order of the sums.
const PARTS: usize = 4;
const UNCACHED: usize = 0;
const CACHED: usize = 1;
const WRITE: usize = 2;
const OUTPUT: usize = 3;

/// The groupings tried in turn: which fitted price each part is billed
/// at. Each merges what the one before kept apart.
const GROUPINGS: [[usize; PARTS]; 4] = [
    [0, 1, 2, 3],
    // Cache writes at the input price.
    [0, 1, 0, 3],
    // Cache reads too.
    [0, 0, 0, 3],
    // One price for every token.
    [0, 0, 0, 0],
];

/// A pivot smaller than this, on the normalised equations, means the parts
/// cannot be told apart.
const SINGULAR: f64 = 1e-9;

/// The sums of one model's calls that least squares needs, in millions of
/// tokens and dollars.
#[derive(Debug, Clone, Default, PartialEq)]
struct Sums {
    /// `Σ x xᵀ`.
    xx: [[f64; PARTS]; PARTS],
    /// `Σ x · cost`.
    xy: [f64; PARTS],
}

/// What a read's calls with a reported cost teach about each model's
/// prices.
#[derive(Debug, Clone, Default)]
pub struct Learner {
    models: HashMap<String, Sums>,
}

impl Learner {
    /// Takes one call to `model` that the source says cost `cost_usd`.
    pub fn observe(&mut self, model: &str, billed: &Billed, cost_usd: f64) {
        if !(cost_usd.is_finite() && cost_usd > 0.0) {
            return;
        }
        let x =
            [billed.uncached, billed.cached, billed.write, billed.output].map(|t| t as f64 / 1e6);
        if x.iter().all(|&t| t == 0.0) {
            return;
        }
        if !self.models.contains_key(model) {
            if self.models.len() >= MAX_MODELS {
                return;
            }
            self.models.insert(model.to_owned(), Sums::default());
        }
        let Some(sums) = self.models.get_mut(model) else {
            return;
        };
        for i in 0..PARTS {
            for j in 0..PARTS {
                sums.xx[i][j] += x[i] * x[j];
            }
            sums.xy[i] += x[i] * cost_usd;
        }
    }

    /// The prices `model`'s calls teach, under its id; `None` without a
    /// call to learn from or when no fit prices the uncached prompt.
    pub fn price(&self, model: &str) -> Option<ModelPrice> {
        let prices = fit(self.models.get(model)?)?;
        let input = prices[UNCACHED]?;
        Some(ModelPrice {
            id: model.to_owned(),
            input_usd_per_mtok: input,
            cached_input_usd_per_mtok: prices[CACHED],
            cache_write_usd_per_mtok: prices[WRITE],
            output_usd_per_mtok: prices[OUTPUT].unwrap_or(input),
            supports_prompt_cache: prices[CACHED].is_some(),
            min_cacheable_prompt_tokens: None,
            cache_lifetime_seconds: None,
        })
    }
}

/// Each part's price per million tokens, from the first grouping that
/// fits with no price below zero; `None` for a part no call had.
fn fit(s: &Sums) -> Option<[Option<f64>; PARTS]> {
    GROUPINGS.iter().find_map(|g| fit_grouped(s, g))
}

fn fit_grouped(s: &Sums, grouping: &[usize; PARTS]) -> Option<[Option<f64>; PARTS]> {
    // The equations of the grouped unknowns, without those no call had.
    let mut xx = [[0.0; PARTS]; PARTS];
    let mut xy = [0.0; PARTS];
    for p in 0..PARTS {
        xy[grouping[p]] += s.xy[p];
        for q in 0..PARTS {
            xx[grouping[p]][grouping[q]] += s.xx[p][q];
        }
    }
    let present: Vec<usize> = (0..PARTS).filter(|&g| xx[g][g] > 0.0).collect();
    let n = present.len();
    if n == 0 {
        return None;
    }
    // Normalised to a unit diagonal, so that the pivot test compares
    // directions, not sizes.
    let scale: Vec<f64> = present.iter().map(|&g| xx[g][g].sqrt()).collect();
    let mut a = vec![vec![0.0; n + 1]; n];
    for (i, &gi) in present.iter().enumerate() {
        for (j, &gj) in present.iter().enumerate() {
            a[i][j] = xx[gi][gj] / (scale[i] * scale[j]);
        }
        a[i][n] = xy[gi] / scale[i];
    }
    let z = solve(a)?;
    let mut group_price = [None; PARTS];
    for (i, &g) in present.iter().enumerate() {
        let p = z[i] / scale[i];
        // A price below zero is noise fitted, not a price.
        if !p.is_finite() || p < -1e-9 {
            return None;
        }
        group_price[g] = Some(round_price(p.max(0.0)));
    }
    let mut prices = [None; PARTS];
    for p in 0..PARTS {
        // A part with tokens is billed at its group's price; a part
        // without any stays unknown.
        if s.xx[p][p] > 0.0 {
            prices[p] = group_price[grouping[p]];
        }
    }
    Some(prices)
}

/// Gaussian elimination with partial pivoting on an augmented `n × (n+1)`
/// system; `None` when it is singular.
fn solve(mut a: Vec<Vec<f64>>) -> Option<Vec<f64>> {
    let n = a.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < SINGULAR {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *x -= f * p;
                }
            }
        }
    }
    Some((0..n).map(|i| a[i][n] / a[i][i]).collect())
}

/// To a billionth of a dollar per million tokens, as prices are read.
fn round_price(p: f64) -> f64 {
    (p * 1e9).round() / 1e9
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// Calls of varied shape billed at `p` (input, read, write, output per
    /// million tokens).
    fn billed_at(p: [f64; 4], calls: usize) -> Vec<(Billed, f64)> {
        (0..calls as u64)
            .map(|i| {
                let b = Billed {
                    uncached: 1_000 + 137 * i,
                    cached: (i % 3) * 2_048 + 11 * i,
                    write: (i % 4) * 1_024,
                    output: 200 + 53 * (i % 7) + 5 * i,
                };
                let cost = (b.uncached as f64 * p[0]
                    + b.cached as f64 * p[1]
                    + b.write as f64 * p[2]
                    + b.output as f64 * p[3])
                    / 1e6;
                (b, cost)
            })
            .collect()
    }

    fn learn(calls: &[(Billed, f64)]) -> Option<ModelPrice> {
        let mut l = Learner::default();
        for (b, c) in calls {
            l.observe("m", b, *c);
        }
        l.price("m")
    }

    #[test]
    fn a_price_list_followed_exactly_is_learned_exactly() {
        let got = learn(&billed_at([3.0, 0.3, 3.75, 15.0], 12)).unwrap();
        assert_eq!(got.id, "m");
        assert_eq!(got.input_usd_per_mtok, 3.0);
        assert_eq!(got.cached_input_usd_per_mtok, Some(0.3));
        assert_eq!(got.cache_write_usd_per_mtok, Some(3.75));
        assert_eq!(got.output_usd_per_mtok, 15.0);
        assert!(got.supports_prompt_cache);
    }

    #[test]
    fn a_call_that_cost_nothing_changes_nothing() {
        let mut calls = billed_at([2.5, 0.25, 3.125, 10.0], 9);
        let want = learn(&calls).unwrap();
        // A refused call: its prompt counted, nothing billed.
        calls.push((Billed::of(90_000, 0, 0, 0), 0.0));
        calls.push((Billed::of(0, 0, 0, 0), 0.0));
        assert_eq!(learn(&calls).unwrap(), want);
        assert_eq!(want.input_usd_per_mtok, 2.5);
    }

    #[test]
    fn parts_no_call_had_stay_unknown() {
        let calls: Vec<(Billed, f64)> = billed_at([0.2, 0.0, 0.0, 0.8], 6)
            .into_iter()
            .map(|(b, _)| {
                let b = Billed {
                    cached: 0,
                    write: 0,
                    ..b
                };
                (b, (b.uncached as f64 * 0.2 + b.output as f64 * 0.8) / 1e6)
            })
            .collect();
        let got = learn(&calls).unwrap();
        assert_eq!(
            (got.input_usd_per_mtok, got.output_usd_per_mtok),
            (0.2, 0.8)
        );
        assert_eq!(got.cached_input_usd_per_mtok, None);
        assert_eq!(got.cache_write_usd_per_mtok, None);
        assert!(!got.supports_prompt_cache);
    }

    #[test]
    fn calls_that_cannot_tell_the_parts_apart_get_one_price() {
        // One call: input and output cannot be told apart, so every token
        // is priced at what a token of the call cost.
        let one = [(Billed::of(3_000, 0, 0, 1_000), 0.004)];
        let got = learn(&one).unwrap();
        assert_eq!(got.input_usd_per_mtok, 1.0);
        assert_eq!(got.output_usd_per_mtok, 1.0);
        // Writes always a fixed share of the uncached prompt: billed at the
        // input price.
        let calls: Vec<(Billed, f64)> = (1..6u64)
            .map(|i| {
                let b = Billed {
                    uncached: 1_000 * i,
                    cached: 0,
                    write: 500 * i,
                    output: 100 + 7 * i * i,
                };
                let cost =
                    (b.uncached as f64 * 2.0 + b.write as f64 * 2.5 + b.output as f64 * 8.0) / 1e6;
                (b, cost)
            })
            .collect();
        let got = learn(&calls).unwrap();
        assert_eq!(got.cache_write_usd_per_mtok, Some(got.input_usd_per_mtok));
        assert!((got.input_usd_per_mtok - 2.1666666).abs() < 1e-6, "{got:?}");
        assert_eq!(got.output_usd_per_mtok, 8.0);
    }

    #[test]
    fn a_model_without_calls_with_a_cost_is_not_priced() {
        let mut l = Learner::default();
        l.observe("m", &Billed::of(1_000, 0, 0, 10), 0.0);
        l.observe("m", &Billed::of(1_000, 0, 0, 10), f64::NAN);
        assert_eq!(l.price("m"), None);
        assert_eq!(l.price("other"), None);
    }
}
