//! What the estimator learned: the latest calls, as (raw counts, reported
//! count) with their kind and run, and what is derived from them. The
//! samples are what is kept in the state database (`token_calibration`);
//! everything else is derived again when they change.
//!
//! The bound measures a request two ways ([`Measure`]): in units (pieces
//! of text, see `pieces.rs`), which follow a byte-level BPE tokenizer's
//! count whatever the text is made of, and in bytes, which follow a
//! count by bytes. Each makes its own bound from the samples, and each
//! sample records what each predicted before it was reported; the bound
//! used is the one whose predictions were nearest the counts (both, the
//! larger, until each has predicted one).

use super::CallKind;
use super::pieces::RawCount;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How many reported calls the calibration remembers (and stores).
pub const CALIBRATION_WINDOW: usize = 64;
/// The bound's prior: tokens per piece before any call was reported.
pub const PRIOR_TOKENS_PER_PIECE: f64 = 2.0;
/// The least margin above a bound's estimate.
pub const CALIBRATION_MARGIN: f64 = 0.03;
/// The most margin the observed spread may add (so a calibrated estimate
/// stays within 10% of a count it predicts well).
pub const MAX_CALIBRATION_MARGIN: f64 = 0.08;
/// How many runs a run's first call is compared with (the closest in size).
const CROSS_ANCHORS: usize = 3;
/// How many of the latest predictions judge which measure is used.
const TRACK_RECORD: usize = 16;

/// A way the bound measures a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Units: pieces of text, or bytes where they are more.
    Units,
    /// Bytes of text.
    Bytes,
}

const MEASURES: [Measure; 2] = [Measure::Units, Measure::Bytes];

/// One measure of a request or a call: all of it, its tool results and
/// its tool definitions.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Size {
    total: u64,
    results: u64,
    tools: u64,
}

impl Size {
    /// Everything but the tool definitions: the messages.
    fn messages(self) -> u64 {
        self.total.saturating_sub(self.tools)
    }
}

fn size(raw: RawCount, m: Measure) -> Size {
    match m {
        Measure::Units => Size {
            total: raw.total,
            results: raw.results,
            tools: raw.tools,
        },
        Measure::Bytes => Size {
            total: raw.bytes,
            results: raw.result_bytes,
            tools: raw.tool_bytes,
        },
    }
}

/// The least growth of the messages between two calls of a run, as a
/// share of the earlier call's messages (and at least [`MIN_STEP`]), from
/// which the tokens per unit added are learned: below it, a few tokens
/// more or less would make the rate anything.
const MIN_STEP_SHARE: u64 = 32;
/// The least growth, in units (or bytes), a step is learned from.
const MIN_STEP: u64 = 16;

/// One call the estimator learned from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The run (conversation) it belonged to.
    pub run: String,
    /// Whether it could use tools.
    pub kind: CallKind,
    /// Its raw count: tokens by the tokenizer, or units for the bound.
    pub raw: u64,
    /// The units of `raw` that were tool results (the bound only).
    #[serde(default)]
    pub results: u64,
    /// Its bytes of text (the bound only).
    #[serde(default)]
    pub bytes: u64,
    /// The bytes of `bytes` that were tool results (the bound only).
    #[serde(default)]
    pub result_bytes: u64,
    /// The units of `raw` that were tool definitions (the bound only; 0
    /// in samples stored before they were told apart).
    #[serde(default)]
    pub tools: u64,
    /// The bytes of `bytes` that were tool definitions (the bound only).
    #[serde(default)]
    pub tool_bytes: u64,
    /// The prompt tokens the model reported.
    pub reported: u64,
    /// What the units' bound predicted before it, without margin (0: it
    /// could not predict yet).
    #[serde(default)]
    pub predicted: u64,
    /// What the bytes' bound predicted before it (0: it could not).
    #[serde(default)]
    pub predicted_by_bytes: u64,
    /// When it was reported, epoch milliseconds.
    pub at_ms: i64,
}

impl Sample {
    fn raw_count(&self) -> RawCount {
        RawCount {
            total: self.raw,
            results: self.results,
            bytes: self.bytes,
            result_bytes: self.result_bytes,
            tools: self.tools,
            tool_bytes: self.tool_bytes,
            fallback: false,
        }
    }

    fn size(&self, m: Measure) -> Size {
        size(self.raw_count(), m)
    }

    fn predicted(&self, m: Measure) -> u64 {
        match m {
            Measure::Units => self.predicted,
            Measure::Bytes => self.predicted_by_bytes,
        }
    }

    /// Whether `other` is the same call (merging what replicas stored).
    fn same_call(&self, other: &Sample) -> bool {
        self.run == other.run
            && self.kind == other.kind
            && self.raw == other.raw
            && self.reported == other.reported
            && self.at_ms == other.at_ms
    }
}

/// What the bound derives from the samples, in one measure.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Rates {
    /// Tokens per unit (or byte), from above: the largest ratio seen. A
    /// prompt's average, the template's fixed text included.
    hi: f64,
    /// Tokens per unit, from below (for a prompt smaller than the one
    /// compared with): half the smallest ratio seen.
    lo: f64,
    /// Tokens per unit the messages add within a run: the largest step
    /// seen between consecutive calls of a kind (the tool calls and
    /// results appended, at their own rate: nothing of the template's
    /// fixed text, which the average carries); `hi` until a run showed
    /// one.
    step: f64,
    /// Tokens per unit of tool definitions, from above: what leaving them
    /// out of an answer removed, the most per unit seen; `hi` until seen.
    tools: f64,
    /// What a run's first call of a kind adds after calls of the other
    /// kind, the largest seen, per kind of the new call (`[auto, none]`).
    gap: [Gap; 2],
    /// The margin: the largest relative undershoot of a prediction seen,
    /// plus 1%, within [`CALIBRATION_MARGIN`] and
    /// [`MAX_CALIBRATION_MARGIN`].
    margin: f64,
    /// The largest relative error of the latest predictions, either way:
    /// of runs' first calls (bounded from other runs), and of later calls.
    error: [Option<f64>; 2],
}

/// What a change of call kind within a run adds (negative: removes).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Gap {
    /// Per unit of the earlier call's tool definitions, where it had some
    /// (a server that renders the tools only for a call that may use them
    /// removes about their size).
    per_tool: Option<f64>,
    /// In tokens, whatever the tools.
    tokens: Option<f64>,
}

impl Gap {
    fn add(&mut self, g: f64, tools: u64) {
        let max = |q: Option<f64>, v: f64| Some(q.map_or(v, |q| q.max(v)));
        if tools > 0 {
            self.per_tool = max(self.per_tool, g / tools as f64);
        }
        self.tokens = max(self.tokens, g);
    }

    /// The gap after a call with `tools` units of tool definitions.
    fn after(&self, tools: u64) -> f64 {
        match self.per_tool {
            Some(p) if tools > 0 => p * tools as f64,
            _ => self.tokens.unwrap_or(0.0),
        }
    }
}

fn slot(kind: CallKind) -> usize {
    match kind {
        CallKind::Auto => 0,
        CallKind::None => 1,
    }
}

/// The latest calls of one model and counting method.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    samples: VecDeque<Sample>,
    /// Per measure (units, bytes).
    rates: [Option<Rates>; 2],
    /// Whether samples changed since they were last stored.
    dirty: bool,
}

impl Calibration {
    /// The samples, oldest first.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.iter().cloned().collect()
    }

    /// Whether anything was learned since [`Calibration::mark_stored`].
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// Notes that the samples were stored.
    pub fn mark_stored(&mut self) {
        self.dirty = false;
    }

    /// Whether any call was reported.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    fn derive(&mut self) {
        self.rates = MEASURES.map(|m| derive(&self.samples, m));
    }

    /// Adds the stored samples this calibration does not hold yet, keeping
    /// the latest [`CALIBRATION_WINDOW`] by time.
    pub fn merge(&mut self, stored: Vec<Sample>) {
        let mut added = false;
        for s in stored {
            if !self.samples.iter().any(|m| m.same_call(&s)) {
                self.samples.push_back(s);
                added = true;
            }
        }
        if added {
            let mut all: Vec<Sample> = self.samples.drain(..).collect();
            all.sort_by_key(|s| s.at_ms);
            let skip = all.len().saturating_sub(CALIBRATION_WINDOW);
            self.samples = all.into_iter().skip(skip).collect();
            self.derive();
        }
    }

    /// Learns from a reported call; `bound` says whether the bound counts
    /// (it records what each measure predicted).
    pub fn push(&mut self, mut sample: Sample, bound: bool) {
        if bound {
            let raw = sample.raw_count();
            let predict = |m| {
                self.bare_bound(m, sample.kind, raw, &sample.run)
                    .map_or(0, |b| b.ceil() as u64)
            };
            sample.predicted = predict(Measure::Units);
            sample.predicted_by_bytes = predict(Measure::Bytes);
        }
        if self.samples.len() >= CALIBRATION_WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
        self.derive();
        self.dirty = true;
    }

    /// The tokenizer's learned difference (reported - raw), the largest
    /// seen; 0 before any.
    pub fn offset(&self) -> i64 {
        self.samples
            .iter()
            .map(|c| c.reported as i64 - c.raw as i64)
            .max()
            .unwrap_or(0)
    }

    /// The estimate from counts by the model's own tokenizer (the
    /// server's, see `server.rs`) for a call of `kind` counting `raw`:
    /// the count, tool results at their learned share, plus the largest
    /// difference seen between what calls of that kind reported and their
    /// count so taken (the chat template's own text, and the tools where
    /// it leaves them out), plus [`super::TOKENIZER_MARGIN`]. Before a
    /// call of its kind was reported, the other kind's difference; before
    /// any, `prior` tokens a counted one.
    pub fn offset_bound(&self, kind: CallKind, raw: RawCount, prior: f64) -> u64 {
        let share = self.result_share();
        let counted = |total: u64, results: u64| total as f64 - (1.0 - share) * results as f64;
        let offset = |same: bool| {
            self.samples
                .iter()
                .filter(|s| (s.kind == kind) == same)
                .map(|s| s.reported as f64 - counted(s.raw, s.results))
                .reduce(f64::max)
        };
        match offset(true).or_else(|| offset(false)) {
            Some(o) => ((counted(raw.total, raw.results) + o).max(1.0)
                * (1.0 + super::TOKENIZER_MARGIN))
                .ceil() as u64,
            None => (raw.total as f64 * prior).ceil() as u64,
        }
    }

    /// The share of tool results' tokens the prompt carries (0 for a
    /// template that leaves them out): from consecutive calls of a kind
    /// within a run, what the results added beyond the rest's growth, the
    /// largest seen, within [0, 1]; 1 until a run showed it.
    fn result_share(&self) -> f64 {
        let mut share: Option<f64> = None;
        for (i, s) in self.samples.iter().enumerate() {
            let Some(e) = self
                .samples
                .iter()
                .take(i)
                .rfind(|e| e.run == s.run && e.kind == s.kind)
            else {
                continue;
            };
            let added = s.results.saturating_sub(e.results);
            if added == 0 {
                continue;
            }
            let rest =
                s.raw.saturating_sub(s.results) as f64 - e.raw.saturating_sub(e.results) as f64;
            let q = ((s.reported as f64 - e.reported as f64 - rest) / added as f64).clamp(0.0, 1.0);
            share = Some(share.map_or(q, |v: f64| v.max(q)));
        }
        share.unwrap_or(1.0)
    }

    /// The measure the bound uses now for a run's first call (`first`) or
    /// a later one: the one whose latest predictions of such calls erred
    /// least, `None` until both have predicted one.
    pub fn measure(&self, first: bool) -> Option<Measure> {
        let i = usize::from(!first);
        let [u, b] = self.rates.map(|r| r.and_then(|r| r.error[i]));
        match (u, b) {
            (Some(u), Some(b)) if b < u => Some(Measure::Bytes),
            (Some(_), Some(_)) => Some(Measure::Units),
            _ => None,
        }
    }

    /// The bound's estimate for a call of `kind` in `run` with raw count
    /// `raw`, margin included: in the measure whose predictions of such
    /// calls (a run's first, bounded from other runs whose text may
    /// tokenize at another rate; or a later one, bounded from its run)
    /// erred least, or the larger of both measures' bounds until each has
    /// predicted one.
    pub fn bound(&self, kind: CallKind, raw: RawCount, run: &str) -> u64 {
        let with_margin = |m: Measure| {
            let r = self.rates[m as usize]?;
            let b = self.bare_bound(m, kind, raw, run)?;
            Some((b * (1.0 + r.margin)).ceil() as u64)
        };
        let first = !self.samples.iter().any(|s| s.run == run);
        let chosen = match self.measure(first) {
            Some(m) => with_margin(m),
            None => MEASURES.iter().filter_map(|m| with_margin(*m)).max(),
        };
        chosen.unwrap_or_else(|| (raw.total as f64 * PRIOR_TOKENS_PER_PIECE).ceil() as u64)
    }

    /// The bound without margin in measure `m`, `None` before any report.
    ///
    /// - Within a run, whose prompt grows by appending, a call is bounded
    ///   by each earlier call of its kind: that call's count, plus the
    ///   units added since at the step rate. The least of these bounds is
    ///   taken.
    /// - A run's first call of a kind, after calls of the other kind: the
    ///   same from those calls, plus the largest gap seen between the kinds
    ///   (negative where a server leaves the tools out of an answer).
    /// - A run's first call: bounded by the calls of its kind in the runs
    ///   most like it (the same tools first), the messages added at the
    ///   average rate from above and tool definitions at theirs; the
    ///   largest of these bounds.
    fn bare_bound(&self, m: Measure, kind: CallKind, raw: RawCount, run: &str) -> Option<f64> {
        let r = self.rates[m as usize]?;
        let want = size(raw, m);
        let in_run: Vec<&Sample> = self.samples.iter().filter(|s| s.run == run).collect();
        let within = |s: &Sample| extend(&r, r.step, s.reported, s.size(m), want);
        if let Some(b) = in_run
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| within(s))
            .reduce(f64::min)
        {
            return Some(b.max(1.0));
        }
        let gap = r.gap[slot(kind)];
        if let Some(b) = in_run
            .iter()
            .map(|s| within(s) + gap.after(s.size(m).tools))
            .reduce(f64::min)
        {
            return Some(b.max(1.0));
        }
        // A run's first call: the other runs' calls of its kind most like
        // it (those with the same tools, then the nearest amount of tool
        // results; among them, no larger, so that the bound adds units at
        // the rate from above rather than removing them at the one from
        // below, and closest in size), else of the other kind with the
        // gap.
        let across = |s: &Sample| extend(&r, r.hi, s.reported, s.size(m), want);
        let mut others: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.run != run && s.kind == kind)
            .collect();
        let switched = others.is_empty();
        if switched {
            others = self.samples.iter().filter(|s| s.run != run).collect();
        }
        let key = |s: &Sample| {
            let z = s.size(m);
            (
                z.tools != want.tools,
                z.results.abs_diff(want.results),
                z.total > want.total,
                z.total.abs_diff(want.total),
            )
        };
        others.sort_by_key(|s| key(s));
        let shape = {
            let k = key(others.first()?);
            (k.0, k.1)
        };
        others
            .iter()
            .take_while(|s| {
                let k = key(s);
                (k.0, k.1) == shape
            })
            .take(CROSS_ANCHORS)
            .map(|s| {
                let g = if switched {
                    gap.after(s.size(m).tools)
                } else {
                    0.0
                };
                across(s) + g
            })
            .reduce(f64::max)
            .map(|b| b.max(1.0))
    }
}

/// The rates, gaps and margin the samples give in measure `m`; `None`
/// without samples.
fn derive(samples: &VecDeque<Sample>, m: Measure) -> Option<Rates> {
    let ratios = samples
        .iter()
        .filter(|s| s.size(m).total > 0)
        .map(|s| s.reported as f64 / s.size(m).total as f64);
    let hi = ratios.clone().reduce(f64::max)?;
    let lo = ratios.reduce(f64::min).unwrap_or(hi) / 2.0;
    let max = |q: Option<f64>, v: f64| Some(q.map_or(v, |q: f64| q.max(v)));
    // The step: from consecutive calls of a kind within a run, with the
    // same tools, whose messages grew enough to tell.
    let mut step: Option<f64> = None;
    for (i, s) in samples.iter().enumerate() {
        let Some(e) = samples
            .iter()
            .take(i)
            .rfind(|e| e.run == s.run && e.kind == s.kind)
        else {
            continue;
        };
        let (now, then) = (s.size(m), e.size(m));
        let grown = now.messages().saturating_sub(then.messages());
        if now.tools == then.tools && grown >= MIN_STEP.max(then.messages() / MIN_STEP_SHARE) {
            let rate = (s.reported as f64 - e.reported as f64).max(0.0) / grown as f64;
            step = max(step, rate);
        }
    }
    let mut rates = Rates {
        hi,
        lo,
        step: step.unwrap_or(hi),
        tools: hi,
        gap: [Gap::default(); 2],
        margin: CALIBRATION_MARGIN,
        error: [None, None],
    };
    // What a run's first call of a kind, after calls of the other, counted
    // beyond the bound from the latest of those calls; and from the gaps
    // that removed tokens, what tool definitions count.
    let mut gap = [Gap::default(); 2];
    let mut tools: Option<f64> = None;
    for (i, s) in samples.iter().enumerate() {
        let mut earlier = samples.iter().take(i).filter(|e| e.run == s.run);
        if earlier.clone().any(|e| e.kind == s.kind) {
            continue;
        }
        if let Some(e) = earlier.rfind(|e| e.kind != s.kind) {
            let then = e.size(m);
            let g = s.reported as f64 - extend(&rates, rates.step, e.reported, then, s.size(m));
            gap[slot(s.kind)].add(g, then.tools);
            if g < 0.0 && then.tools > 0 {
                tools = max(tools, -g / then.tools as f64);
            }
        }
    }
    rates.gap = gap;
    rates.tools = tools.unwrap_or(hi);
    let errors: Vec<(bool, f64)> = samples
        .iter()
        .enumerate()
        .filter(|(_, s)| s.predicted(m) > 0)
        .map(|(i, s)| {
            let first = !samples.iter().take(i).any(|e| e.run == s.run);
            (first, s.reported as f64 / s.predicted(m) as f64 - 1.0)
        })
        .collect();
    let spread = errors.iter().map(|(_, e)| *e).fold(0.0, f64::max);
    rates.margin = (spread + 0.01).clamp(CALIBRATION_MARGIN, MAX_CALIBRATION_MARGIN);
    rates.error = [true, false].map(|first| {
        errors
            .iter()
            .rev()
            .filter(|(f, _)| *f == first)
            .take(TRACK_RECORD)
            .map(|(_, e)| e.abs())
            .reduce(f64::max)
    });
    Some(rates)
}

/// A count of size `want`, bounded from a call of size `then` that counted
/// `reported`: plus the message units added since at `up` and the tool
/// definitions added at their rate, less the units removed at the rate
/// from below.
fn extend(r: &Rates, up: f64, reported: u64, then: Size, want: Size) -> f64 {
    let delta = |now: u64, then: u64, up: f64| {
        if now >= then {
            up * (now - then) as f64
        } else {
            -r.lo.min(up) * (then - now) as f64
        }
    };
    reported as f64
        + delta(want.messages(), then.messages(), up)
        + delta(want.tools, then.tools, r.tools)
}
