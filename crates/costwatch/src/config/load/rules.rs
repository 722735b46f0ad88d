//! Rule files: each rule deserialized and checked on its own.

use super::document::{Doc, value_at};
use super::{file_problem, io_message};
use crate::config::Problem;
use crate::config::locate::{Seg, child, path_string};
use crate::detect::rules::{
    MetaKeys, NoCache, OversizedModel, RetryLoop, Rule, RuleFile, RuleMeta, RuleSettings, Rules,
};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

/// The rule lists of one file, before each rule is deserialized on its own
/// (so one bad rule does not hide the problems of the others). The keys are
/// those of [`RuleFile`].
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
    load_kind::<NoCache>(doc, lists.no_cache.len(), rules, names);
    load_kind::<OversizedModel>(doc, lists.oversized_model.len(), rules, names);
    load_kind::<RetryLoop>(doc, lists.retry_loop.len(), rules, names);
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

/// The keys of [`MetaKeys`]: read with it, and left out when the kind's
/// settings are read.
const META_KEYS: [&str; 4] = ["name", "severity", "match", "enabled"];

/// Loads the `count` rules of kind `S` of the document: each one's
/// [`MetaKeys`] and settings deserialized apart, every problem reported at
/// its key, then the ranges its schema states and the problems the kind
/// finds ([`crate::settings::Settings::problems`]).
pub(super) fn load_kind<S: RuleSettings>(
    doc: &mut Doc,
    count: usize,
    rules: &mut Rules,
    names: &mut Names,
) {
    for i in 0..count {
        let segs = [Seg::Key(S::KIND.to_owned()), Seg::Index(i)];
        let path = path_string(&segs);
        let entry = value_at(&doc.value, &segs);
        let removed: Vec<(&str, &str)> = S::REMOVED
            .iter()
            .filter(|(key, _)| entry.is_some_and(|v| v.get(key).is_some()))
            .copied()
            .collect();
        for (key, instead) in &removed {
            doc.check(false, &child(&path, key), || {
                format!("{key} was removed: {instead}")
            });
        }
        let keys = doc.deserialize_keys_at::<MetaKeys>(&segs, |k| META_KEYS.contains(&k), &[]);
        let settings = doc.deserialize_keys_at::<S>(
            &segs,
            |k| !META_KEYS.contains(&k) && !removed.iter().any(|(r, _)| *r == k),
            &META_KEYS,
        );
        let (Some(keys), Some(settings)) = (keys, settings) else {
            continue;
        };
        doc.check(!keys.name.trim().is_empty(), &child(&path, "name"), || {
            "must not be empty".to_owned()
        });
        super::settings::check(doc, &segs, &settings);
        names.check(doc, S::KIND, &path, &keys.name);
        S::list(rules).push(Rule {
            meta: RuleMeta::new(keys, doc.file.clone()),
            settings,
        });
    }
}

/// The JSON Schema of a rule file: each kind's settings with the keys every
/// rule has ([`MetaKeys`]) before them. `rules/rules.schema.json` is this,
/// pretty-printed.
pub fn rules_schema() -> Value {
    let mut file = schemars::schema_for!(RuleFile).to_value();
    let meta = schemars::schema_for!(MetaKeys).to_value();
    let meta_properties = meta.get("properties").and_then(Value::as_object);
    if let Some(defs) = file.get_mut("$defs").and_then(Value::as_object_mut) {
        for def in defs.values_mut() {
            let Some(def) = def.as_object_mut() else {
                continue;
            };
            let settings = def.remove("properties").and_then(|p| match p {
                Value::Object(m) => Some(m),
                _ => None,
            });
            let mut properties = meta_properties.cloned().unwrap_or_default();
            properties.extend(settings.unwrap_or_default());
            def.insert("properties".to_owned(), Value::Object(properties));
            let order: Vec<Value> = [meta.get("x-order"), def.get("x-order")]
                .into_iter()
                .flatten()
                .filter_map(Value::as_array)
                .flatten()
                .cloned()
                .collect();
            def.insert("x-order".to_owned(), Value::Array(order));
            def.insert("required".to_owned(), serde_json::json!(["name"]));
        }
        if let Some(meta_defs) = meta.get("$defs").and_then(Value::as_object) {
            defs.extend(meta_defs.clone());
        }
    }
    file
}
