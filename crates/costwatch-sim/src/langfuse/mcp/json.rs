//! A tool's result as the server writes it: `JSON.stringify(result, null,
//! 2)`, keys in the order the server builds its objects, and whole numbers
//! without a fraction, as JavaScript prints them.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// A JSON value whose objects keep their key order.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// Any value (its objects are written with sorted keys).
    Value(Value),
    /// An object, keys in order.
    Object(Vec<(String, Node)>),
    /// An array.
    Array(Vec<Node>),
}

impl Node {
    /// An object from pairs.
    pub(super) fn object(pairs: impl IntoIterator<Item = (&'static str, Node)>) -> Node {
        Node::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
    }

    /// Two-space indented JSON, as `JSON.stringify(result, null, 2)`.
    pub(super) fn pretty(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "null".to_owned())
    }
}

impl From<Value> for Node {
    fn from(v: Value) -> Node {
        Node::Value(v)
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Node::Value(v) => Js(v).serialize(s),
            Node::Object(pairs) => {
                let mut map = s.serialize_map(Some(pairs.len()))?;
                for (k, v) in pairs {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            Node::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
        }
    }
}

/// A plain value written as JavaScript writes numbers: `0` rather than
/// `0.0`.
struct Js<'a>(&'a Value);

impl Serialize for Js<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                    s.serialize_i64(f as i64)
                }
                _ => n.serialize(s),
            },
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Js(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut out = s.serialize_map(Some(map.len()))?;
                for (k, v) in map {
                    out.serialize_entry(k, &Js(v))?;
                }
                out.end()
            }
            other => other.serialize(s),
        }
    }
}
