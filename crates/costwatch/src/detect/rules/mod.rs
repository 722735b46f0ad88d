//! The detectors' rules, as rule files (`rules/*.yaml`) write them: what
//! every rule has ([`RuleMeta`]), and each kind's settings beside it
//! ([`NoCache`], [`OversizedModel`], [`RetryLoop`]), every key's doc,
//! default and range written once, on its field. The rule files' JSON
//! Schema is generated from these, and the loader (`config::load`) checks
//! the ranges the schema states. What a range cannot say each kind says in
//! [`Settings::problems`], and the
//! keys it no longer reads in [`RuleSettings::REMOVED`].

mod no_cache;
mod oversized_model;
mod retry_loop;

pub use no_cache::NoCache;
pub use oversized_model::OversizedModel;
pub use retry_loop::RetryLoop;

use crate::domain::{Labels, Severity};
use crate::settings::Settings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::PathBuf;

/// Exact-match label selector; empty matches every session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector(pub Labels);

impl Selector {
    /// Whether every pair of the selector is present in `labels`.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.0.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// Number of pairs; a more specific selector wins over a less specific one.
    pub fn specificity(&self) -> usize {
        self.0.len()
    }
}

/// The keys every rule has, as a rule file writes them.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<MetaKeys>)]
pub struct MetaKeys {
    /// Unique name among the rules of its kind; appears in findings.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Severity of the rule's findings.
    #[serde(default = "warning")]
    pub severity: Severity,
    /// Exact-match label selector; `{}` covers every session. The most
    /// specific matching rule decides.
    #[serde(default, rename = "match")]
    pub selector: BTreeMap<String, String>,
    /// A disabled rule silences the sessions it covers.
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn warning() -> Severity {
    Severity::Warning
}

fn enabled() -> bool {
    true
}

/// What every rule has.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleMeta {
    /// Unique name within its kind; appears in findings.
    pub name: String,
    /// Severity of its findings.
    pub severity: Severity,
    /// Which sessions the rule covers.
    pub selector: Selector,
    /// A disabled rule silences the sessions it covers.
    pub enabled: bool,
    /// File the rule came from.
    pub file: PathBuf,
}

impl RuleMeta {
    /// The meta of a rule written with `keys` in `file`.
    pub fn new(keys: MetaKeys, file: PathBuf) -> RuleMeta {
        RuleMeta {
            name: keys.name,
            severity: keys.severity,
            selector: Selector(keys.selector),
            enabled: keys.enabled,
            file,
        }
    }
}

/// One rule: what every rule has, and its kind's settings (reached through
/// it: `rule.min_peers`).
#[derive(Debug, Clone, PartialEq)]
pub struct Rule<S> {
    /// Name, severity, selector.
    pub meta: RuleMeta,
    /// The kind's settings.
    pub settings: S,
}

impl<S> Deref for Rule<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.settings
    }
}

/// A `no_cache` rule.
pub type NoCacheRule = Rule<NoCache>;
/// An `oversized_model` rule.
pub type OversizedModelRule = Rule<OversizedModel>;
/// A `retry_loop` rule.
pub type RetryLoopRule = Rule<RetryLoop>;

/// The settings of one kind of rule.
pub trait RuleSettings: Settings + Default + Sized {
    /// The rule file's key for the kind.
    const KIND: &'static str;
    /// Keys an earlier release read and this one refuses, each with what
    /// replaced it.
    const REMOVED: &'static [(&'static str, &'static str)] = &[];
    /// Where the kind's rules go.
    fn list(rules: &mut Rules) -> &mut Vec<Rule<Self>>;
}

/// Every rule, by kind, in load order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rules {
    /// `no_cache` rules.
    pub no_cache: Vec<NoCacheRule>,
    /// `oversized_model` rules.
    pub oversized_model: Vec<OversizedModelRule>,
    /// `retry_loop` rules.
    pub retry_loop: Vec<RetryLoopRule>,
}

// The kinds of a rule file, for its JSON Schema (`config::rules_schema`
// puts the keys of `MetaKeys` before each kind's settings); the doc comment
// is the schema's description.
/// One rule file. Every kind is optional; each holds a list of rules.
#[derive(JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "costwatch rule file")]
#[allow(dead_code)]
pub struct RuleFile {
    /// Multi-request conversations on a cache-capable model that never hit
    /// the prompt cache while their peers do.
    #[serde(default)]
    no_cache: Vec<NoCache>,
    /// A premium model used for tiny calls where the group does not normally
    /// do so.
    #[serde(default)]
    oversized_model: Vec<OversizedModel>,
    /// Sessions that call far more often than their peers, confirmed by
    /// repeated near-identical requests or an error burst.
    #[serde(default)]
    retry_loop: Vec<RetryLoop>,
}

/// Picks the rule that covers `labels`: the enabled-or-not rule with the most
/// specific matching selector, the first loaded on a tie. A disabled winner
/// means "not checked".
pub fn select<'a, R>(
    rules: &'a [R],
    meta: impl Fn(&R) -> &RuleMeta,
    labels: &Labels,
) -> Option<&'a R> {
    let mut best: Option<(&R, usize)> = None;
    for r in rules {
        let m = meta(r);
        if m.selector.matches(labels) {
            let s = m.selector.specificity();
            if best.is_none_or(|(_, bs)| s > bs) {
                best = Some((r, s));
            }
        }
    }
    best.and_then(|(r, _)| meta(r).enabled.then_some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(name: &str, sel: &[(&str, &str)], enabled: bool) -> RuleMeta {
        RuleMeta {
            name: name.into(),
            severity: Severity::Warning,
            selector: Selector(
                sel.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            enabled,
            file: PathBuf::from("rules/x.yaml"),
        }
    }

    #[test]
    fn most_specific_selector_wins_and_disabled_silences() {
        let rules = vec![
            meta("all", &[], true),
            meta("support", &[("feature", "support")], true),
            meta("quiet", &[("feature", "batch")], false),
        ];
        let l = |v: &str| Labels::from([("feature".to_string(), v.to_string())]);
        assert_eq!(
            select(&rules, |r| r, &l("support")).map(|r| r.name.as_str()),
            Some("support")
        );
        assert_eq!(
            select(&rules, |r| r, &l("search")).map(|r| r.name.as_str()),
            Some("all")
        );
        assert_eq!(select(&rules, |r| r, &l("batch")), None);
    }
}
