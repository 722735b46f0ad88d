//! The layer order of `crates/costwatch/src`, as ARCHITECTURE.md's module
//! table writes it: every `crate::` reference in a module's non-test code
//! points to a module above it in that table (so no two modules depend on
//! each other), and every module is in the table.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The modules of ARCHITECTURE.md's table ("Modules of `crates/costwatch`"),
/// top first.
fn table_order() -> Vec<String> {
    let text = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let section = text
        .split("## Modules of `crates/costwatch`")
        .nth(1)
        .expect("ARCHITECTURE.md has the module table");
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(|m| m.trim_end_matches('/').to_owned())
        .collect()
}

/// `lines` without the items under `#[cfg(test)]`: a `mod x;` line, or a
/// `mod x { ... }` block (braces counted), or the one item that follows.
fn without_tests(lines: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != "#[cfg(test)]" {
            out.push(lines[i].to_owned());
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < lines.len() && lines[j].trim_start().starts_with("#[") {
            j += 1;
        }
        let item = lines.get(j).map_or("", |l| l.trim());
        if item.contains("mod ") && item.ends_with('{') {
            let mut depth = 0i64;
            while j < lines.len() {
                depth += lines[j].matches('{').count() as i64;
                depth -= lines[j].matches('}').count() as i64;
                j += 1;
                if depth <= 0 {
                    break;
                }
            }
            i = j;
        } else {
            i = j + 1;
        }
    }
    out
}

/// The top-level modules each module's non-test code refers to, with a
/// file that does.
fn references(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<(String, String), PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(src).unwrap().to_path_buf();
            let first = rel.components().next().unwrap();
            let first = first.as_os_str().to_string_lossy().into_owned();
            // The binary (main.rs, cli/) uses the library as `costwatch::`.
            if matches!(first.as_str(), "main.rs" | "lib.rs" | "cli") {
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "tests" {
                    stack.push(path);
                }
                continue;
            }
            if !name.ends_with(".rs") || name.starts_with("tests") {
                continue;
            }
            let from = first.trim_end_matches(".rs").to_owned();
            let text = fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for line in without_tests(&lines) {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (at, _) in line.match_indices("crate::") {
                    let before = line[..at].chars().next_back();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                        continue;
                    }
                    let to: String = line[at + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if to != from && modules.contains(&to) {
                        out.entry((from.clone(), to)).or_insert_with(|| rel.clone());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn modules_depend_only_on_modules_above_them_in_architecture_md() {
    let order = table_order();
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();
    let src = root().join("crates/costwatch/src");
    let mut present = BTreeSet::new();
    for entry in fs::read_dir(&src).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        let module = name.trim_end_matches(".rs").to_owned();
        if !matches!(module.as_str(), "main" | "lib" | "cli") {
            present.insert(module);
        }
    }
    let missing: Vec<&String> = present
        .iter()
        .filter(|m| !rank.contains_key(m.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "not in ARCHITECTURE.md's table: {missing:?}"
    );
    let refs = references(&src, &present);
    let upward: Vec<String> = refs
        .iter()
        .filter(|((from, to), _)| rank[from.as_str()] < rank[to.as_str()])
        .map(|((from, to), file)| format!("{from} -> {to} ({})", file.display()))
        .collect();
    assert!(
        upward.is_empty(),
        "references up ARCHITECTURE.md's table: {upward:#?}"
    );
}

/// CONTRIBUTING's "Adding a source" stays short and true: at most 15
/// lines, every file it names exists, and every source folder declares
/// the facts the registry (`SourceKind::facts`) reads.
#[test]
fn adding_a_source_is_short_and_names_what_exists() {
    let text = fs::read_to_string(root().join("CONTRIBUTING.md")).unwrap();
    let section = text
        .split("## Adding a source\n")
        .nth(1)
        .expect("CONTRIBUTING.md has \"Adding a source\"");
    let section = section.split("\n## ").next().unwrap_or(section).trim();
    let lines = section.lines().count();
    assert!(lines <= 15, "\"Adding a source\" is {lines} lines");
    let src = root().join("crates/costwatch/src");
    for name in section.split('`').skip(1).step_by(2) {
        if name.ends_with(".rs") {
            let found = [src.join(name), src.join("source").join(name)]
                .iter()
                .any(|p| p.is_file());
            assert!(
                found,
                "\"Adding a source\" names {name}, which is not in {src:?}"
            );
        }
    }
    let registry = fs::read_to_string(src.join("source/mod.rs")).unwrap();
    for folder in ["reference", "litellm", "langfuse", "otlp"] {
        let module = fs::read_to_string(src.join("source").join(folder).join("mod.rs")).unwrap();
        assert!(
            module.contains("KIND: super::KindFacts"),
            "source/{folder}/ declares no KindFacts"
        );
        assert!(
            registry.contains(&format!("=> &{folder}::")),
            "SourceKind::facts does not register {folder}"
        );
    }
}
