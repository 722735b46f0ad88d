//! Where each field of a YAML document is written: an index from field paths
//! (`source.page_limit`, `no_cache[0].name`) to 1-based line and column.
//!
//! serde only knows the path of a problem; this index turns the path into a
//! position. It is built from `saphyr-parser` events, whose markers have
//! 1-based lines and 0-based columns (in characters); the index stores both
//! 1-based.

use saphyr_parser::{Event, Marker, Parser};
use std::collections::HashMap;

/// A 1-based position in a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
}

impl From<Marker> for Pos {
    fn from(m: Marker) -> Self {
        Pos {
            line: m.line(),
            column: m.col() + 1,
        }
    }
}

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Renders a path the way problems show it: `no_cache[0].max_cached_share`.
pub(crate) fn path_string(segs: &[Seg]) -> String {
    segs.iter().fold(String::new(), |acc, seg| match seg {
        Seg::Key(k) => child(&acc, k),
        Seg::Index(i) => item(&acc, *i),
    })
}

/// The path of key `key` under `parent`.
pub(crate) fn child(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The path of element `index` of the sequence at `parent`.
pub(crate) fn item(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

/// Whether `path` is `ancestor` or lies below it.
pub(crate) fn is_within(path: &str, ancestor: &str) -> bool {
    if ancestor.is_empty() {
        return true;
    }
    match path.strip_prefix(ancestor) {
        Some(rest) => rest.is_empty() || rest.starts_with('.') || rest.starts_with('['),
        None => false,
    }
}

/// The path one step up, or `None` at the root.
pub(crate) fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    let cut = path.rfind(['.', '[']).unwrap_or(0);
    Some(&path[..cut])
}

/// Positions of the keys and values of one YAML document.
#[derive(Debug, Default)]
pub(crate) struct Index {
    values: HashMap<String, Pos>,
    keys: HashMap<String, Pos>,
}

/// A container being walked, with the path of the node that opened it.
enum Frame {
    /// A mapping; `key` is the key whose value comes next, `None` when a key
    /// comes next.
    Map { path: String, key: Option<String> },
    /// A sequence; `next` is the index of the next element.
    Seq { path: String, next: usize },
}

impl Index {
    /// Indexes the first document of `text`. A syntax error ends the walk;
    /// what came before it stays indexed (the error itself is reported by
    /// the deserializer).
    pub fn build(text: &str) -> Index {
        let mut index = Index::default();
        let mut stack: Vec<Frame> = Vec::new();
        let mut documents = 0;
        let mut parser = Parser::new_from_str(text);
        while let Some(Ok((event, span))) = parser.next_event() {
            let pos = Pos::from(span.start);
            match event {
                Event::DocumentStart(_) => {
                    documents += 1;
                    if documents > 1 {
                        break;
                    }
                }
                Event::Scalar(value, ..) => {
                    index.node(&mut stack, pos, Some(&value));
                }
                Event::Alias(_) => {
                    index.node(&mut stack, pos, None);
                }
                Event::MappingStart(..) => {
                    if let Some(path) = index.node(&mut stack, pos, None) {
                        stack.push(Frame::Map { path, key: None });
                    }
                }
                Event::SequenceStart(..) => {
                    if let Some(path) = index.node(&mut stack, pos, None) {
                        stack.push(Frame::Seq { path, next: 0 });
                    }
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    stack.pop();
                }
                _ => {}
            }
        }
        index
    }

    /// Records a node starting at `pos` and returns its path; `scalar` is its
    /// text when it is a scalar. A key is recorded as a key: a scalar key
    /// returns `None`, a complex key gets the path `<parent>.?` so its own
    /// children have somewhere to go.
    fn node(&mut self, stack: &mut [Frame], pos: Pos, scalar: Option<&str>) -> Option<String> {
        let path = match stack.last_mut() {
            None => String::new(),
            Some(Frame::Seq { path, next }) => {
                *next += 1;
                item(path, *next - 1)
            }
            Some(Frame::Map { path, key }) => match key.take() {
                Some(k) => child(path, &k),
                None => {
                    let name = scalar.unwrap_or("?").to_owned();
                    let key_path = child(path, &name);
                    self.keys.entry(key_path.clone()).or_insert(pos);
                    *key = Some(name);
                    return scalar.is_none().then_some(key_path);
                }
            },
        };
        self.values.entry(path.clone()).or_insert(pos);
        Some(path)
    }

    /// Where the value at `path` starts.
    pub fn value(&self, path: &str) -> Option<Pos> {
        self.values.get(path).copied()
    }

    /// Where the key of `path` is written (for `unknown field` problems).
    pub fn key(&self, path: &str) -> Option<Pos> {
        self.keys.get(path).copied()
    }

    /// Whether the document writes anything at `path`.
    pub fn contains(&self, path: &str) -> bool {
        self.values.contains_key(path)
    }

    /// The best position for a problem at `path`: its value, else the key
    /// of the nearest ancestor the document writes.
    pub fn locate(&self, path: &str) -> Option<Pos> {
        if let Some(pos) = self.value(path) {
            return Some(pos);
        }
        let mut at = parent(path);
        while let Some(p) = at {
            if let Some(pos) = self
                .key(p)
                .or_else(|| self.value(p).filter(|_| !p.is_empty()))
            {
                return Some(pos);
            }
            at = parent(p);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "\
source:
  api_url: http://x/v1
  labels: {team: a, env: 'prod'}
list:
  - name: one
    n: 3
  -   name: two
flow: [a, [b, c], {k: v}]
? [complex, key]
: 1
after: 2
";

    fn at(line: usize, column: usize) -> Option<Pos> {
        Some(Pos { line, column })
    }

    #[test]
    fn values_and_keys_have_one_based_positions() {
        let index = Index::build(DOC);
        let cases: &[(&str, Option<Pos>)] = &[
            ("source.api_url", at(2, 12)),
            ("source.labels", at(3, 11)),
            ("source.labels.env", at(3, 26)),
            ("list[0]", at(5, 5)),
            ("list[0].n", at(6, 8)),
            ("list[1].name", at(7, 13)),
            ("flow[1][1]", at(8, 15)),
            ("flow[2].k", at(8, 23)),
            ("after", at(11, 8)),
            ("list[2]", None),
        ];
        for (path, want) in cases {
            assert_eq!(index.value(path), *want, "value of {path}");
        }
        assert_eq!(index.key("source.labels.team"), at(3, 12));
        assert_eq!(index.key("list[1].name"), at(7, 7));
    }

    #[test]
    fn locate_falls_back_to_the_nearest_written_ancestor() {
        let index = Index::build(DOC);
        assert_eq!(index.locate("source.page_limit"), at(1, 1));
        assert_eq!(index.locate("list[1].min_peers"), at(7, 7));
        assert_eq!(index.locate("windows.size"), None);
    }

    #[test]
    fn a_syntax_error_keeps_what_came_before() {
        let index = Index::build("a: 1\nb: [2\n");
        assert_eq!(index.value("a"), at(1, 4));
    }

    #[test]
    fn paths_render_and_nest() {
        let segs = [
            Seg::Key("no_cache".into()),
            Seg::Index(2),
            Seg::Key("name".into()),
        ];
        assert_eq!(path_string(&segs), "no_cache[2].name");
        assert!(is_within("no_cache[2].name", "no_cache[2]"));
        assert!(is_within("no_cache[2]", "no_cache"));
        assert!(!is_within("no_cache_x", "no_cache"));
        assert!(is_within("anything", ""));
        assert_eq!(parent("no_cache[2].name"), Some("no_cache[2]"));
        assert_eq!(parent("no_cache[2]"), Some("no_cache"));
        assert_eq!(parent("no_cache"), Some(""));
        assert_eq!(parent(""), None);
    }
}
