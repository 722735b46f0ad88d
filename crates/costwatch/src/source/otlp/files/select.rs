//! Which files `source.path` names: a folder (every OTLP/JSON lines file
//! in it), or a glob like the OpenTelemetry Collector's `include` patterns
//! (`/var/log/otel/traces-*.json*`, `spans/**/*.jsonl`), so a folder may
//! hold other files.
//!
//! A glob's segments are matched one by one against the path below its
//! root, the longest leading part without a wildcard: `*` is any run of
//! characters within a segment, `?` one character, and a segment `**` any
//! number of folders, none included. Files a glob names are read whatever
//! their extension; `.gz` ones are inflated.

use std::path::{Component, Path, PathBuf};

/// The files to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    /// The folder listed: the whole path, or a glob's root.
    pub root: PathBuf,
    /// The glob's segments below `root`; `None` for a folder.
    pub pattern: Option<Vec<String>>,
}

/// Whether a path segment holds a wildcard.
fn is_wild(segment: &str) -> bool {
    segment.contains(['*', '?'])
}

impl Selection {
    /// What `path` names: a glob when one of its segments holds `*` or
    /// `?`, else a folder.
    pub fn of(path: &Path) -> Selection {
        let parts: Vec<Component> = path.components().collect();
        let Some(first_wild) = parts
            .iter()
            .position(|c| is_wild(&c.as_os_str().to_string_lossy()))
        else {
            return Selection {
                root: path.to_owned(),
                pattern: None,
            };
        };
        let root: PathBuf = parts[..first_wild].iter().collect();
        let pattern = parts[first_wild..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Selection {
            root: if root.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                root
            },
            pattern: Some(pattern),
        }
    }

    /// Whether the folders below the root are listed too.
    pub fn descends(&self) -> bool {
        self.pattern.as_ref().is_some_and(|p| p.len() > 1)
    }

    /// Whether `relative` (a path below the root, by segment) is named.
    pub fn matches(&self, relative: &[&str]) -> bool {
        match &self.pattern {
            None => relative.len() == 1,
            Some(pattern) => matches_segments(pattern, relative),
        }
    }

    /// Whether a folder at `relative` below the root may hold named files.
    pub fn may_hold(&self, relative: &[&str]) -> bool {
        let Some(pattern) = &self.pattern else {
            return false;
        };
        if pattern.iter().any(|s| s == "**") {
            return true;
        }
        relative.len() < pattern.len()
            && relative
                .iter()
                .zip(pattern)
                .all(|(name, glob)| matches_segment(glob, name))
    }
}

fn matches_segments(pattern: &[String], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((glob, rest)) if glob == "**" => {
            (0..=path.len()).any(|skip| matches_segments(rest, &path[skip..]))
        }
        Some((glob, rest)) => match path.split_first() {
            Some((name, tail)) => matches_segment(glob, name) && matches_segments(rest, tail),
            None => false,
        },
    }
}

/// `*` and `?` within one segment.
fn matches_segment(glob: &str, name: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // The usual two-pointer match with backtracking to the last `*`.
    let (mut g, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match glob.get(g) {
            Some('*') => {
                star = Some((g, n));
                g += 1;
            }
            Some(c) if *c == '?' || *c == name[n] => {
                g += 1;
                n += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    g = sg + 1;
                    n = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    glob[g..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rel(path: &str) -> Vec<&str> {
        path.split('/').collect()
    }

    #[test]
    fn a_path_without_wildcards_is_a_folder() {
        let s = Selection::of(Path::new("/var/log/otel"));
        assert_eq!(s.root, PathBuf::from("/var/log/otel"));
        assert_eq!(s.pattern, None);
        assert!(s.matches(&["traces.json"]));
        assert!(!s.matches(&rel("sub/traces.json")));
        assert!(!s.descends());
    }

    #[test]
    fn a_glob_is_rooted_at_its_last_plain_folder() {
        let s = Selection::of(Path::new("/var/log/otel/traces-*.json*"));
        assert_eq!(s.root, PathBuf::from("/var/log/otel"));
        assert!(s.matches(&["traces-1.json"]));
        assert!(s.matches(&["traces-2026-12-05T10-00-00.json.gz"]));
        assert!(!s.matches(&["metrics-1.json"]));
        assert!(!s.matches(&["traces.json"]), "the dash is required");
        assert!(!s.matches(&rel("old/traces-1.json")));
        assert!(!s.descends());
        let relative = Selection::of(Path::new("*.jsonl"));
        assert_eq!(relative.root, PathBuf::from("."));
    }

    #[test]
    fn a_double_star_is_any_number_of_folders() {
        let s = Selection::of(Path::new("spans/**/*.jsonl"));
        assert_eq!(s.root, PathBuf::from("spans"));
        assert!(s.matches(&["a.jsonl"]));
        assert!(s.matches(&rel("2026/12/05/a.jsonl")));
        assert!(!s.matches(&rel("2026/a.json")));
        assert!(s.descends());
        assert!(s.may_hold(&rel("2026/12")));
    }

    #[test]
    fn segments_match_with_stars_and_question_marks() {
        for (glob, name, want) in [
            ("*", "anything.json", true),
            ("*.json", "a.json", true),
            ("*.json", "a.json.gz", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("t?.json", "t1.json", true),
            ("t?.json", "t10.json", false),
            ("**", "x", true),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(matches_segment(glob, name), want, "{glob} on {name}");
        }
    }

    #[test]
    fn only_folders_a_named_file_may_sit_in_are_listed() {
        let s = Selection::of(Path::new("root/day-*/traces-*.json"));
        assert!(s.descends());
        assert!(s.may_hold(&["day-1"]));
        assert!(!s.may_hold(&["other"]));
        assert!(!s.may_hold(&rel("day-1/deeper")));
        assert!(s.matches(&rel("day-1/traces-a.json")));
    }
}
