//! The pieces of JSON a row of a gateway's page is read into (a LiteLLM
//! spend-log row, a Langfuse observation), borrowed from the page's text
//! where they can be: strings, the string, number or boolean of a
//! free-form value, and objects of which only chosen keys are read.
//!
//! Each reads the same from a page's text (serde over the text, the one
//! reader of every page) and from a [`serde_json::Value`] (the slow path
//! that names a failing field), and each treats what it is given as a
//! `Value` would: a key given twice is its last value, `null` is absent,
//! anything of another kind is kept as its kind for messages, never an
//! error.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

/// A JSON string, borrowed from the page when it holds no escapes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(super) struct Text<'a>(pub Cow<'a, str>);

impl Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'a> From<&'a str> for Text<'a> {
    fn from(s: &'a str) -> Self {
        Text(Cow::Borrowed(s))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Text<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'a>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V(PhantomData))
    }
}

/// What kind of JSON value something is, for messages (as
/// the LiteLLM source's `check::kind` names a `Value`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Null,
    Boolean,
    Number,
    String,
    List,
    Object,
}

impl Kind {
    /// `a list`, `an object`, ...
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::List => "a list",
            Kind::Object => "an object",
        }
    }
}

/// A string, number or boolean.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Scalar<'a> {
    Text(Text<'a>),
    Number(Number),
    Bool(bool),
}

impl Scalar<'_> {
    /// The value as a label or key takes it: a string as it is, a number
    /// or boolean as its JSON text; `None` for the empty string.
    pub(super) fn text(&self) -> Option<String> {
        match self {
            Scalar::Text(s) if !s.is_empty() => Some(s.to_string()),
            Scalar::Text(_) => None,
            Scalar::Number(n) => Some(n.to_string()),
            Scalar::Bool(b) => Some(b.to_string()),
        }
    }
}

/// Reads the keys of an object that matter and skips the others. `entry`
/// is called once per key, in order, and must read the key's value from
/// `map` exactly once.
pub(super) trait Keys<'de>: Default {
    /// Reads the value of `key`.
    fn entry<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error>;

    /// Called once the object is read.
    fn finish(&mut self) {}
}

/// Any JSON value, read as what it is: an object into `T` (its chosen
/// keys), a scalar as such, anything else as its kind.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Field<'a, T> {
    Object(T),
    Scalar(Scalar<'a>),
    Other(Kind),
}

impl<'a, T> Field<'a, T> {
    /// The object, when it is one.
    pub(super) fn object(self) -> Option<T> {
        match self {
            Field::Object(t) => Some(t),
            _ => None,
        }
    }

    /// The scalar, when it is one.
    pub(super) fn scalar(&self) -> Option<&Scalar<'a>> {
        match self {
            Field::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// The kind of value it is.
    pub(super) fn kind(&self) -> Kind {
        match self {
            Field::Object(_) => Kind::Object,
            Field::Scalar(Scalar::Text(_)) => Kind::String,
            Field::Scalar(Scalar::Number(_)) => Kind::Number,
            Field::Scalar(Scalar::Bool(_)) => Kind::Boolean,
            Field::Other(k) => *k,
        }
    }
}

impl<'de: 'a, 'a, T: Keys<'de>> Deserialize<'de> for Field<'a, T> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor(PhantomData))
    }
}

/// An object's keys read into `T`; any other value is an error (for a
/// text that must hold an object).
pub(super) struct Object<T>(pub T);

impl<'de, T: Keys<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Keys<'de>> Visitor<'de> for V<T> {
            type Value = Object<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                read_keys(map).map(Object)
            }
        }
        d.deserialize_map(V(PhantomData))
    }
}

fn read_keys<'de, T: Keys<'de>, A: MapAccess<'de>>(mut map: A) -> Result<T, A::Error> {
    let mut t = T::default();
    while let Some(key) = map.next_key::<Text<'de>>()? {
        t.entry(key, &mut map)?;
    }
    t.finish();
    Ok(t)
}

struct FieldVisitor<'a, T>(PhantomData<(&'a (), T)>);

impl<'de: 'a, 'a, T: Keys<'de>> Visitor<'de> for FieldVisitor<'a, T> {
    type Value = Field<'a, T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Field::Scalar(Scalar::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Field::Scalar(Scalar::Number(v.into())))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Field::Scalar(Scalar::Number(v.into())))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // As `Value` reads a float: JSON has no NaN or infinity.
        Ok(Number::from_f64(v).map_or(Field::Other(Kind::Null), |n| {
            Field::Scalar(Scalar::Number(n))
        }))
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Scalar(Scalar::Text(Text(Cow::Borrowed(v)))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Scalar(Scalar::Text(Text(Cow::Owned(v.to_owned())))))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Field::Scalar(Scalar::Text(Text(Cow::Owned(v)))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Other(Kind::Null))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Field::Other(Kind::Null))
    }
    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Field::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Field::Other(Kind::List))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        read_keys(map).map(Field::Object)
    }
}

/// An object whose keys are all skipped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Skipped;

impl<'de> Keys<'de> for Skipped {
    fn entry<A: MapAccess<'de>>(&mut self, _: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        map.next_value::<IgnoredAny>().map(drop)
    }
}

/// A value that is only looked at for being a string, number or boolean.
pub(super) type AnyScalar<'a> = Field<'a, Skipped>;

/// The string, number or boolean entries of an object, ordered and
/// deduplicated as a `serde_json::Map` holds them (by key, the last of a
/// key given twice); an entry of another kind is kept as `None`, since it
/// still hides an earlier one of its key.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Entries<'a>(pub Vec<(Text<'a>, Option<Scalar<'a>>)>);

impl<'a> Entries<'a> {
    /// The entry of `key`, when it is a scalar.
    pub(super) fn get(&self, key: &str) -> Option<&Scalar<'a>> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| &**k == key)
            .and_then(|(_, v)| v.as_ref())
    }

    /// Puts the entries in key order, the last of each key kept.
    pub(super) fn sort(&mut self) {
        let sorted = self.0.windows(2).all(|w| w[0].0 < w[1].0);
        if !sorted {
            // Stable: among equal keys the latest given comes first.
            self.0.reverse();
            self.0.sort_by(|a, b| a.0.cmp(&b.0));
            self.0.dedup_by(|later, earlier| later.0 == earlier.0);
        }
    }
}

impl<'de> Keys<'de> for Entries<'de> {
    fn entry<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let value = map.next_value::<AnyScalar<'de>>()?;
        self.0.push((key, value.scalar().cloned()));
        Ok(())
    }

    fn finish(&mut self) {
        self.sort();
    }
}

/// The strings of a list, its other entries skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Strings<'a>(pub Vec<Text<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Strings<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Strings<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strings<'a>, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element_seed(StringOrSkip(PhantomData))? {
                    out.extend(v);
                }
                Ok(Strings(out))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

/// One entry of a list: a string, or `None` for anything else.
struct StringOrSkip<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> DeserializeSeed<'de> for StringOrSkip<'a> {
    type Value = Option<Text<'a>>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(match AnyScalar::deserialize(d)? {
            Field::Scalar(Scalar::Text(t)) => Some(t),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `check` on `text` read from the page and read from a `Value`.
    fn both<'a, T: Deserialize<'a>>(text: &'a str, check: impl Fn(T)) {
        check(serde_json::from_str::<T>(text).unwrap());
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        check(T::deserialize(value).unwrap());
    }

    #[test]
    fn text_borrows_from_the_page_unless_it_holds_escapes() {
        let page = r#"["plain", "esc\"aped"]"#;
        let [a, b]: [Text<'_>; 2] = serde_json::from_str(page).unwrap();
        assert!(matches!(a.0, Cow::Borrowed("plain")));
        assert!(matches!(b.0, Cow::Owned(ref s) if s == "esc\"aped"));
        let err = Text::deserialize(json!(5)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid type: integer `5`, expected a string"
        );
    }

    #[test]
    fn entries_hold_scalars_in_key_order_and_the_last_of_a_key() {
        let text = r#"{"b": "x", "a": 1, "c": {"d": 1}, "b": true, "e": [1], "f": "", "c": 2.5, "g": null}"#;
        let value: serde_json::Value = serde_json::from_str(text).unwrap();
        let want: Vec<(String, Option<String>)> = value
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let s = match v {
                    serde_json::Value::String(s) => Some(s.clone()),
                    serde_json::Value::Number(n) => Some(n.to_string()),
                    serde_json::Value::Bool(b) => Some(b.to_string()),
                    _ => None,
                };
                (k.clone(), s)
            })
            .collect();
        both(text, |Object(e): Object<Entries<'_>>| {
            let got: Vec<(String, Option<String>)> =
                e.0.iter()
                    .map(|(k, v)| {
                        let s = v.as_ref().map(|v| match v {
                            Scalar::Text(t) => t.to_string(),
                            Scalar::Number(n) => n.to_string(),
                            Scalar::Bool(b) => b.to_string(),
                        });
                        (k.to_string(), s)
                    })
                    .collect();
            assert_eq!(got, want);
            assert_eq!(
                e.get("c"),
                Some(&Scalar::Number(Number::from_f64(2.5).unwrap()))
            );
            assert_eq!(e.get("e"), None);
            assert_eq!(e.get("f").and_then(Scalar::text), None);
        });
    }

    #[test]
    fn a_field_keeps_the_kind_of_what_it_is_not() {
        let kind = |text: &str| serde_json::from_str::<AnyScalar<'_>>(text).unwrap().kind();
        assert_eq!(kind("[1, {\"a\": []}]"), Kind::List);
        assert_eq!(kind("{\"a\": [1]}"), Kind::Object);
        assert_eq!(kind("null"), Kind::Null);
        assert_eq!(kind("false"), Kind::Boolean);
        assert_eq!(kind("-3"), Kind::Number);
        assert_eq!(kind("\"x\""), Kind::String);
    }

    #[test]
    fn a_list_gives_its_strings_only() {
        both(
            r#"["a", 7, {"b": "c"}, ["d"], null, "e"]"#,
            |s: Strings<'_>| {
                let got: Vec<&str> = s.0.iter().map(|t| &**t).collect();
                assert_eq!(got, ["a", "e"]);
            },
        );
    }
}
