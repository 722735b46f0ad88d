//! Rule files: each rule deserialized and checked on its own.

use super::document::Doc;
use super::{file_problem, io_message, to_usize};
use crate::config::locate::{Seg, child, path_string};
use crate::config::raw::{RawNoCacheRule, RawOversizedModelRule, RawRetryLoopRule};
use crate::config::rules::{NoCacheRule, OversizedModelRule, RetryLoopRule, RuleMeta, Selector};
use crate::config::{Problem, Rules};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The rule lists of one file, before each rule is deserialized on its own
/// (so one bad rule does not hide the problems of the others). The keys are
/// those of [`RawRuleFile`].
#[derive(Deserialize)]
#[cfg_attr(test, derive(Default, serde::Serialize))]
#[serde(deny_unknown_fields)]
pub(super) struct RuleLists {
    #[serde(default)]
    no_cache: Vec<Value>,
    #[serde(default)]
    oversized_model: Vec<Value>,
    #[serde(default)]
    retry_loop: Vec<Value>,
}

/// The shipped rules (`rules/*.yaml`), built into the binary: used when the
/// configuration names no rules, and by `demo` and `backtest --simulate`.
pub const BUILTIN_RULES: [(&str, &str); 3] = [
    (
        "no_cache.yaml",
        include_str!("../../../../../rules/no_cache.yaml"),
    ),
    (
        "oversized_model.yaml",
        include_str!("../../../../../rules/oversized_model.yaml"),
    ),
    (
        "retry_loop.yaml",
        include_str!("../../../../../rules/retry_loop.yaml"),
    ),
];

/// The folder problems in the built-in rules are reported under.
pub const BUILTIN_FOLDER: &str = "<built-in rules>";

/// Loads [`BUILTIN_RULES`], adding any problem to `problems`.
pub(super) fn load_builtin_into(problems: &mut Vec<Problem>) -> Rules {
    let mut rules = Rules::default();
    let mut names = Names::default();
    for (name, text) in BUILTIN_RULES {
        match Doc::parse(&Path::new(BUILTIN_FOLDER).join(name), text) {
            Ok(mut doc) => {
                load_rule_file(&mut doc, &mut rules, &mut names);
                problems.append(&mut doc.into_problems());
            }
            Err(p) => problems.push(p),
        }
    }
    rules
}

/// Loads every rule file under `paths`, adding their problems to `problems`
/// in the order of the paths.
pub(super) fn load_rules_into(paths: &[PathBuf], problems: &mut Vec<Problem>) -> Rules {
    let mut rules = Rules::default();
    let mut names = Names::default();
    for file in rule_files(paths) {
        match file.and_then(|file| Doc::read(&file)) {
            Ok(mut doc) => {
                load_rule_file(&mut doc, &mut rules, &mut names);
                problems.append(&mut doc.into_problems());
            }
            Err(p) => problems.push(p),
        }
    }
    rules
}

/// The files named by `paths`: files as they are, directories as their
/// visible `*.yaml` and `*.yml` files, sorted by file name. A path that
/// cannot be read is a problem in its place.
pub(super) fn rule_files(paths: &[PathBuf]) -> Vec<Result<PathBuf, Problem>> {
    let mut files = Vec::new();
    for path in paths {
        let listed = match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => yaml_files_in(path),
            Ok(_) => Ok(vec![path.clone()]),
            Err(e) => Err(e),
        };
        match listed {
            Ok(found) => files.extend(found.into_iter().map(Ok)),
            Err(e) => files.push(Err(file_problem(
                path,
                format!("cannot read: {}", io_message(&e)),
            ))),
        }
    }
    files
}

pub(super) fn yaml_files_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let yaml = name.ends_with(".yaml") || name.ends_with(".yml");
        if yaml && !name.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

pub(super) fn load_rule_file(doc: &mut Doc, rules: &mut Rules, names: &mut Names) {
    let Some(lists) = doc.deserialize_at::<RuleLists>(&[]) else {
        return;
    };
    load_kind::<RawNoCacheRule>(doc, lists.no_cache.len(), rules, names);
    load_kind::<RawOversizedModelRule>(doc, lists.oversized_model.len(), rules, names);
    load_kind::<RawRetryLoopRule>(doc, lists.retry_loop.len(), rules, names);
}

/// The rule names seen so far, per kind, with where they were defined.
#[derive(Default)]
pub(super) struct Names(HashMap<(&'static str, String), String>);

impl Names {
    /// Reports `name` at `path` if a rule of the same kind already has it.
    fn check(&mut self, doc: &mut Doc, kind: &'static str, path: &str, name: &str) {
        let name_path = child(path, "name");
        if name.is_empty() || doc.is_tainted(&name_path) {
            return;
        }
        match self.0.get(&(kind, name.to_owned())) {
            Some(first) => {
                let message = format!("duplicate rule name `{name}`, first defined at {first}");
                doc.check(false, &name_path, || message);
            }
            None => {
                self.0
                    .insert((kind, name.to_owned()), doc.place(&name_path));
            }
        }
    }
}

/// A raw rule struct and how it becomes its typed rule.
pub(super) trait RawRule: DeserializeOwned {
    /// The top-level key of the kind.
    const KIND: &'static str;
    /// The typed rule.
    type Rule;
    /// Checks the parameters (not the meta fields) and builds the rule.
    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> Self::Rule;
    /// The name, severity, selector and enabled flag.
    fn meta(&self) -> RawMeta<'_>;
    /// The typed rule's meta fields.
    fn rule_meta(rule: &Self::Rule) -> &RuleMeta;
    /// Where the kind's rules go.
    fn list(rules: &mut Rules) -> &mut Vec<Self::Rule>;
}

/// The fields every raw rule has.
pub(super) struct RawMeta<'a> {
    name: &'a str,
    severity: crate::config::Severity,
    selector: &'a BTreeMap<String, String>,
    enabled: bool,
}

pub(super) fn load_kind<R: RawRule>(
    doc: &mut Doc,
    count: usize,
    rules: &mut Rules,
    names: &mut Names,
) {
    for i in 0..count {
        let segs = [Seg::Key(R::KIND.to_owned()), Seg::Index(i)];
        let Some(raw) = doc.deserialize_at::<R>(&segs) else {
            continue;
        };
        let path = path_string(&segs);
        let meta = rule_meta(doc, &path, raw.meta());
        let rule = raw.build(doc, &path, meta);
        names.check(doc, R::KIND, &path, &R::rule_meta(&rule).name);
        R::list(rules).push(rule);
    }
}

pub(super) fn rule_meta(doc: &mut Doc, path: &str, raw: RawMeta<'_>) -> RuleMeta {
    doc.check(!raw.name.trim().is_empty(), &child(path, "name"), || {
        "must not be empty".to_owned()
    });
    RuleMeta {
        name: raw.name.to_owned(),
        severity: raw.severity,
        selector: Selector(raw.selector.clone()),
        enabled: raw.enabled,
        file: doc.file.clone(),
    }
}

/// Checks shared by several kinds.
impl Doc {
    fn min_peers(&mut self, path: &str, v: u64) -> usize {
        self.at_least_u64(&child(path, "min_peers"), v, 1);
        to_usize(v)
    }

    fn min_impact_usd(&mut self, path: &str, v: f64) -> f64 {
        self.at_least_f64(&child(path, "min_impact_usd"), v, 0.0);
        v
    }
}

impl RawRule for RawNoCacheRule {
    const KIND: &'static str = "no_cache";
    type Rule = NoCacheRule;

    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> NoCacheRule {
        doc.at_least_u64(&child(path, "min_requests"), self.min_requests, 2);
        doc.share(&child(path, "max_cached_share"), self.max_cached_share);
        doc.share(
            &child(path, "min_peer_cached_share"),
            self.min_peer_cached_share,
        );
        doc.at_least_u64(
            &child(path, "min_cacheable_tokens"),
            self.min_cacheable_tokens,
            1,
        );
        if let Some(least) = self.model_min_cacheable_tokens.values().min() {
            doc.at_least_u64(&child(path, "model_min_cacheable_tokens"), *least, 1);
        }
        doc.at_least_u64(
            &child(path, "cache_lifetime_seconds"),
            self.cache_lifetime_seconds,
            1,
        );
        if let Some(least) = self.model_cache_lifetime_seconds.values().min() {
            doc.at_least_u64(&child(path, "model_cache_lifetime_seconds"), *least, 1);
        }
        doc.at_least_u64(&child(path, "min_missed_calls"), self.min_missed_calls, 2);
        for (key, given, instead) in [
            (
                "corroborating_sessions",
                self.corroborating_sessions.is_some(),
                "a single missed read is never a finding, beside its group's uncached sessions or not",
            ),
            (
                "corroborated_min_requests",
                self.corroborated_min_requests.is_some(),
                "a single missed read is never a finding, beside its group's uncached sessions or not",
            ),
            (
                "clear_avg_input_ratio",
                self.clear_avg_input_ratio.is_some(),
                "every finding is judged call by call from its request rows",
            ),
        ] {
            doc.check(!given, &child(path, key), || {
                format!("{key} was removed: {instead}")
            });
        }
        NoCacheRule {
            meta,
            min_requests: self.min_requests,
            min_avg_input_tokens: self.min_avg_input_tokens,
            min_cacheable_tokens: self.min_cacheable_tokens,
            model_min_cacheable_tokens: self.model_min_cacheable_tokens,
            cache_lifetime: Duration::from_secs(self.cache_lifetime_seconds),
            model_cache_lifetime: self
                .model_cache_lifetime_seconds
                .iter()
                .map(|(m, s)| (m.clone(), Duration::from_secs(*s)))
                .collect(),
            min_missed_calls: self.min_missed_calls,
            judge_once_ended: self.judge_once_ended,
            max_cached_share: self.max_cached_share,
            min_peer_cached_share: self.min_peer_cached_share,
            min_peers: doc.min_peers(path, self.min_peers),
            min_impact_usd: doc.min_impact_usd(path, self.min_impact_usd),
        }
    }

    fn meta(&self) -> RawMeta<'_> {
        RawMeta {
            name: &self.name,
            severity: self.severity,
            selector: &self.selector,
            enabled: self.enabled,
        }
    }

    fn rule_meta(rule: &NoCacheRule) -> &RuleMeta {
        &rule.meta
    }

    fn list(rules: &mut Rules) -> &mut Vec<NoCacheRule> {
        &mut rules.no_cache
    }
}

impl RawRule for RawOversizedModelRule {
    const KIND: &'static str = "oversized_model";
    type Rule = OversizedModelRule;

    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> OversizedModelRule {
        doc.at_least_f64(
            &child(path, "premium_price_ratio"),
            self.premium_price_ratio,
            1.0,
        );
        doc.share(
            &child(path, "min_premium_cost_share"),
            self.min_premium_cost_share,
        );
        doc.share(&child(path, "max_group_share"), self.max_group_share);
        doc.at_least_u64(&child(path, "cold_start_peers"), self.cold_start_peers, 1);
        for (key, given) in [
            ("recent_sessions", self.recent_sessions.is_some()),
            ("moved_after_sessions", self.moved_after_sessions.is_some()),
            ("moved_wait_minutes", self.moved_wait_minutes.is_some()),
        ] {
            doc.check(!given, &child(path, key), || {
                format!(
                    "{key} was removed: costwatch no longer concludes that a group moved to a premium model on purpose; declare the move with design_model, and accept_after says when an undeclared one becomes the group's normal"
                )
            });
        }
        let at = child(path, "accept_after");
        let accept_after = match humantime::parse_duration(&self.accept_after) {
            Ok(d) => {
                doc.positive_duration(&at, d);
                d
            }
            Err(e) => {
                doc.check(false, &at, || {
                    format!("invalid duration `{}`: {e}", self.accept_after)
                });
                Duration::ZERO
            }
        };
        OversizedModelRule {
            meta,
            premium_price_ratio: self.premium_price_ratio,
            max_avg_input_tokens: self.max_avg_input_tokens,
            max_avg_output_tokens: self.max_avg_output_tokens,
            min_premium_cost_share: self.min_premium_cost_share,
            min_peers: doc.min_peers(path, self.min_peers),
            max_group_share: self.max_group_share,
            cold_start_peers: to_usize(self.cold_start_peers),
            design_model: self.design_model,
            accept_after,
            min_impact_usd: doc.min_impact_usd(path, self.min_impact_usd),
        }
    }

    fn meta(&self) -> RawMeta<'_> {
        RawMeta {
            name: &self.name,
            severity: self.severity,
            selector: &self.selector,
            enabled: self.enabled,
        }
    }

    fn rule_meta(rule: &OversizedModelRule) -> &RuleMeta {
        &rule.meta
    }

    fn list(rules: &mut Rules) -> &mut Vec<OversizedModelRule> {
        &mut rules.oversized_model
    }
}

impl RawRule for RawRetryLoopRule {
    const KIND: &'static str = "retry_loop";
    type Rule = RetryLoopRule;

    fn build(self, doc: &mut Doc, path: &str, meta: RuleMeta) -> RetryLoopRule {
        doc.at_least_u64(&child(path, "min_requests"), self.min_requests, 2);
        doc.at_least_f64(
            &child(path, "min_ratio_to_median"),
            self.min_ratio_to_median,
            1.0,
        );
        let z = self.min_robust_z;
        doc.check(
            z > 0.0 && z.is_finite(),
            &child(path, "min_robust_z"),
            || format!("must be greater than 0, got {z}"),
        );
        doc.at_least_u64(&child(path, "min_identical_run"), self.min_identical_run, 2);
        doc.at_least_u64(
            &child(path, "suspect_min_identical_run"),
            self.suspect_min_identical_run,
            2,
        );
        doc.share(
            &child(path, "input_tolerance_ratio"),
            self.input_tolerance_ratio,
        );
        doc.at_least_u64(
            &child(path, "max_run_gap_seconds"),
            self.max_run_gap_seconds,
            1,
        );
        doc.check(
            self.drilldown_budget <= 1_000_000,
            &child(path, "drilldown_budget"),
            || format!("must be at most 1000000, got {}", self.drilldown_budget),
        );
        RetryLoopRule {
            meta,
            min_requests: self.min_requests,
            min_ratio_to_median: self.min_ratio_to_median,
            min_robust_z: self.min_robust_z,
            min_peers: doc.min_peers(path, self.min_peers),
            cold_start_min_requests: self.cold_start_min_requests,
            min_identical_run: self.min_identical_run,
            suspect_min_identical_run: self.suspect_min_identical_run,
            input_tolerance_tokens: self.input_tolerance_tokens,
            input_tolerance_ratio: self.input_tolerance_ratio,
            steady_growth: self.steady_growth,
            growth_tolerance_tokens: self.growth_tolerance_tokens,
            suspect_min_suspicion: self.suspect_min_suspicion,
            suspect_max_mean_gap: Duration::from_secs(self.suspect_max_mean_gap_seconds),
            drilldown_budget: to_usize(self.drilldown_budget),
            max_run_gap: Duration::from_secs(self.max_run_gap_seconds),
            min_error_burst: self.min_error_burst,
        }
    }

    fn meta(&self) -> RawMeta<'_> {
        RawMeta {
            name: &self.name,
            severity: self.severity,
            selector: &self.selector,
            enabled: self.enabled,
        }
    }

    fn rule_meta(rule: &RetryLoopRule) -> &RuleMeta {
        &rule.meta
    }

    fn list(rules: &mut Rules) -> &mut Vec<RetryLoopRule> {
        &mut rules.retry_loop
    }
}
