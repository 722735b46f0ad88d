//! The scenario families the quality report runs, and which of their seeds
//! may be tuned against:
//!
//! - `base`: the simulator's first family (`costwatch_sim::scenario`),
//!   written together with the detectors. Tuning seeds 7, 11, 23, 42 and
//!   99 (the seeds of the main quality table); held-out seeds 1234, 5678,
//!   31337, 271828 and 314159.
//! - `adversarial`: the second family (`costwatch_sim::scenario::adversarial`),
//!   built to break the detectors. Tuning seeds 3, 17, 101, 2026 and
//!   65537; held-out seeds 1234, 5678, 31337, 271828 and 314159. Its
//!   sessions are also scored per situation, each named by
//!   `Situation::name` (`model_move`: a sub-step sent to a premium model
//!   nobody declared, in all or part of a group's sessions).
//!
//! Detection is tuned on each family's tuning seeds; the held-out seeds of
//! both families are reported, never tuned against.
//! The adversarial family is served live (each window sees only the calls
//! made by its end plus the settle lag), since sessions crossing windows are
//! one of its situations; the first family is served historically, as in
//! its main table.

use super::BenchError;
use super::quality::{self, DatasetRun, Serving};
use costwatch::detect::Kind;
use costwatch_sim::Dataset;
use costwatch_sim::scenario::adversarial::{self, Notes, Situation};
use costwatch_sim::scenario::{self, ScenarioParams};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Seeds of the first family that detection may be tuned against.
pub const BASE_TUNING: [u64; 5] = [7, 11, 23, 42, 99];
/// Seeds of the first family that are only ever reported.
pub const BASE_HELD_OUT: [u64; 5] = [1234, 5678, 31337, 271828, 314159];
/// Seeds of the adversarial family that detection may be tuned against.
pub const ADVERSARIAL_TUNING: [u64; 5] = [3, 17, 101, 2026, 65537];
/// Seeds of the adversarial family that are only ever reported.
pub const ADVERSARIAL_HELD_OUT: [u64; 5] = [1234, 5678, 31337, 271828, 314159];

/// A scenario family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    /// The first family, written with the detectors.
    Base,
    /// The second family, built to break them.
    Adversarial,
}

/// Which seeds of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Seeds detection may be tuned against.
    Tuning,
    /// Seeds that are only reported.
    HeldOut,
}

impl Split {
    /// Parses `tuning` or `held-out`.
    pub fn parse(s: &str) -> Option<Split> {
        match s {
            "tuning" => Some(Split::Tuning),
            "held-out" => Some(Split::HeldOut),
            _ => None,
        }
    }
}

impl Family {
    /// Both families, in report order.
    pub const ALL: [Family; 2] = [Family::Base, Family::Adversarial];

    /// The family's name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Family::Base => "base",
            Family::Adversarial => "adversarial",
        }
    }

    /// Parses a family's name.
    pub fn parse(s: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The family's seeds of `split`.
    pub fn seeds(self, split: Split) -> &'static [u64] {
        match (self, split) {
            (Family::Base, Split::Tuning) => &BASE_TUNING,
            (Family::Base, Split::HeldOut) => &BASE_HELD_OUT,
            (Family::Adversarial, Split::Tuning) => &ADVERSARIAL_TUNING,
            (Family::Adversarial, Split::HeldOut) => &ADVERSARIAL_HELD_OUT,
        }
    }

    /// The models' minimum cacheable prefixes, as a user of those models
    /// configures them (the providers publish them; the gateway's catalogue
    /// does not carry them). The first family's models all cache from the
    /// rules' default of 1,024 tokens: nothing to say.
    pub fn cache_minimums(self) -> BTreeMap<String, u64> {
        match self {
            Family::Base => BTreeMap::new(),
            Family::Adversarial => adversarial::catalogue()
                .into_iter()
                .filter_map(|m| Some((m.id.clone(), adversarial::min_prefix(&m.id)?)))
                .collect(),
        }
    }

    /// The features the family's team moved to a premium model on purpose,
    /// with the model: declared in its rules (`design_model`), as the team
    /// would. The adversarial family's `summarize` moves to Sonnet on day
    /// 2; the first family moves nothing on purpose.
    pub fn design_models(self) -> BTreeMap<String, String> {
        match self {
            Family::Base => BTreeMap::new(),
            Family::Adversarial => BTreeMap::from([(
                adversarial::Feature::Summarize.name().to_owned(),
                scenario::SONNET.to_owned(),
            )]),
        }
    }

    /// What the family's team tells costwatch in its rules.
    pub fn told(self) -> quality::Told {
        quality::Told {
            cache_minimums: self.cache_minimums(),
            design_models: self.design_models(),
        }
    }

    /// One seed's traffic, with what each session was made to be (the
    /// adversarial family only).
    pub fn generate(self, params: &ScenarioParams) -> (Dataset, Option<Notes>) {
        match self {
            Family::Base => (scenario::generate(params), None),
            Family::Adversarial => {
                let (d, n) = adversarial::generate_with_notes(params);
                (d, Some(n))
            }
        }
    }

    /// Whether `seed` is one of the family's held-out seeds.
    pub fn is_held_out(self, seed: u64) -> bool {
        self.seeds(Split::HeldOut).contains(&seed)
    }

    /// How the family is served unless asked otherwise.
    pub fn serving(self) -> Serving {
        match self {
            Family::Base => Serving::Historical,
            Family::Adversarial => Serving::Live,
        }
    }
}

/// One situation's sessions over one or more seeds: how many are truly
/// wasteful of each kind, and what costwatch flagged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SituationTally {
    /// Sessions.
    pub sessions: usize,
    /// Truly wasteful sessions, per kind in [`Kind::ALL`] order.
    pub truth: [usize; 3],
    /// Of those, flagged by costwatch for that kind.
    pub found: [usize; 3],
    /// Flagged by costwatch for a kind they do not carry.
    pub false_flags: [usize; 3],
}

impl SituationTally {
    /// Adds `other` to this tally.
    pub fn add(&mut self, other: &SituationTally) {
        self.sessions += other.sessions;
        for k in 0..3 {
            self.truth[k] += other.truth[k];
            self.found[k] += other.found[k];
            self.false_flags[k] += other.false_flags[k];
        }
    }
}

/// One seed of a family.
#[derive(Debug, Clone)]
pub struct FamilyRun {
    /// The family.
    pub family: Family,
    /// Scores and findings.
    pub run: DatasetRun,
    /// Per situation (the adversarial family only).
    pub situations: BTreeMap<Situation, SituationTally>,
}

/// Generates, serves (as `serving`, or the family's way) and scores one
/// seed of `family`.
pub async fn run_seed(
    family: Family,
    seed: u64,
    days: u32,
    rules: &Path,
    serving: Option<Serving>,
) -> Result<FamilyRun, BenchError> {
    let params = ScenarioParams {
        seed,
        days,
        ..ScenarioParams::default()
    };
    let serving = serving.unwrap_or(family.serving());
    let (dataset, notes) = family.generate(&params);
    let truth = dataset.truth.clone();
    let run = quality::run_dataset(seed, dataset, &params, rules, &family.told(), serving).await?;
    let mut situations = BTreeMap::new();
    if let Some(notes) = notes {
        let flagged: BTreeSet<(Kind, &str)> = run
            .costwatch
            .iter()
            .map(|f| (f.kind, f.session_id.as_str()))
            .collect();
        for (id, n) in &notes.sessions {
            let t: &mut SituationTally = situations.entry(n.situation).or_default();
            t.sessions += 1;
            for (k, kind) in Kind::ALL.into_iter().enumerate() {
                let is_true = truth.of(kind.as_str()).any(|x| x == id);
                let is_flagged = flagged.contains(&(kind, id.as_str()));
                t.truth[k] += usize::from(is_true);
                t.found[k] += usize::from(is_true && is_flagged);
                t.false_flags[k] += usize::from(!is_true && is_flagged);
            }
        }
    }
    Ok(FamilyRun {
        family,
        run,
        situations,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_splits_do_not_overlap() {
        for f in Family::ALL {
            assert_eq!(Family::parse(f.name()), Some(f));
            let tuning: BTreeSet<u64> = f.seeds(Split::Tuning).iter().copied().collect();
            assert!(f.seeds(Split::HeldOut).iter().all(|s| !tuning.contains(s)));
            assert!(!f.seeds(Split::HeldOut).is_empty());
        }
        assert_eq!(Family::parse("other"), None);
        assert_eq!(Split::parse("held-out"), Some(Split::HeldOut));
        assert_eq!(Split::parse("heldout"), None);
        assert_eq!(Family::Adversarial.seeds(Split::Tuning).len(), 5);
        assert_eq!(Family::Base.seeds(Split::Tuning), [7, 11, 23, 42, 99]);
    }

    #[test]
    fn the_detector_is_told_the_minimums_a_rule_does_not_set_itself() {
        let minimums = Family::Adversarial.cache_minimums();
        assert_eq!(minimums.get(adversarial::HAIKU), Some(&2_048));
        assert_eq!(minimums.get(adversarial::OPUS), Some(&4_096));
        assert!(Family::Base.cache_minimums().is_empty());
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("no_cache.yaml"),
            format!(
                "no_cache:\n  - name: a\n  - name: b\n    match: {{feature: x}}\n    model_min_cacheable_tokens: {{{}: 1500}}\n",
                adversarial::HAIKU
            ),
        )
        .unwrap();
        let told = quality::Told {
            cache_minimums: minimums,
            ..quality::Told::default()
        };
        let d = quality::detector_knowing(dir.path(), &told).unwrap();
        // The family's deliberate move, declared as its team would.
        let declared = quality::detector_knowing(
            Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../rules")),
            &Family::Adversarial.told(),
        )
        .unwrap();
        let rule = declared
            .rules
            .oversized_model
            .iter()
            .find(|r| r.meta.name == "summarize-by-design")
            .unwrap();
        assert_eq!(rule.design_model.as_deref(), Some(scenario::SONNET));
        assert_eq!(rule.meta.selector.0["feature"], "summarize");
        assert!(Family::Base.design_models().is_empty());
        let of = |i: usize| d.rules.no_cache[i].model_min_cacheable_tokens.clone();
        assert_eq!(of(0).get(adversarial::HAIKU), Some(&2_048));
        assert_eq!(of(0).get(adversarial::OPUS), Some(&4_096));
        assert_eq!(of(1).get(adversarial::HAIKU), Some(&1_500));
    }

    #[test]
    fn tallies_add_up() {
        let mut a = SituationTally {
            sessions: 2,
            truth: [1, 0, 2],
            found: [1, 0, 1],
            false_flags: [0, 3, 0],
        };
        a.add(&a.clone());
        assert_eq!(a.sessions, 4);
        assert_eq!(
            (a.truth, a.found, a.false_flags),
            ([2, 0, 4], [2, 0, 2], [0, 6, 0])
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_adversarial_seed_is_scored_per_situation() {
        let rules = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../rules"));
        let r = run_seed(Family::Adversarial, 5, 1, rules, None)
            .await
            .unwrap();
        let total: SituationTally = r.situations.values().fold(Default::default(), |mut a, t| {
            a.add(t);
            a
        });
        assert_eq!(total.sessions, r.run.result.sessions);
        for (k, score) in r.run.result.costwatch.scores.iter().enumerate() {
            assert_eq!(total.found[k], score.true_positives);
            assert_eq!(total.false_flags[k], score.false_positives);
            assert_eq!(total.truth[k] - total.found[k], score.false_negatives);
        }
        assert!(r.situations.contains_key(&Situation::BelowMinimum));
        // Day 0 has the `checkout` model move: waste, whatever share moved.
        let moved = r.situations[&Situation::ModelMove];
        assert!(moved.sessions > 0);
        assert_eq!(moved.truth, [0, moved.sessions, 0]);
        assert_eq!(Situation::ModelMove.name(), "model_move");
    }
}
