//! The JSONB columns of a spend-log row, `metadata` and `request_tags`,
//! read for what costwatch uses of them.
//!
//! `metadata` holds about two dozen keys LiteLLM writes (the key's hash
//! and alias, guardrails, the model map, timings, ...). Of it costwatch
//! reads `spend_logs_metadata` (labels, session keys),
//! `error_information` (a failure's class and status), the usage in
//! `additional_usage_values` and `usage_object` (cache tokens, see
//! `usage.rs`) and, since `metadata.<key>` in `source.session_key` or
//! `source.labels` may name any key, each string, number or boolean at its
//! top level (borrowed from the page, not copied). Every other value is
//! skipped unread.
//!
//! Either column may come as the JSON text of its value (the raw query
//! hands JSONB out as text); that text is read when the row is mapped.

use crate::source::json::{AnyScalar, Entries, Field, Keys, Kind, Object, Scalar, Strings, Text};
use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// `metadata` as read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Metadata<'a> {
    /// The top level's string, number and boolean entries (`None` for an
    /// entry of another kind, which hides an earlier one of its key).
    pub top: Entries<'a>,
    /// `spend_logs_metadata`, when it is an object.
    pub spend_logs_metadata: Option<Entries<'a>>,
    /// `error_information`, when it is an object.
    pub error_information: Option<ErrorInformation<'a>>,
    /// `additional_usage_values`, when it is an object.
    pub additional_usage_values: Option<Usage>,
    /// `usage_object`, when it is an object.
    pub usage_object: Option<Usage>,
}

impl Metadata<'_> {
    /// The top-level entry `key`, when it is a string, number or boolean.
    pub(super) fn get(&self, key: &str) -> Option<&Scalar<'_>> {
        self.top.get(key)
    }
}

impl<'de> Keys<'de> for Metadata<'de> {
    fn entry<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let scalar = match &*key {
            "spend_logs_metadata" => {
                let v: Field<'de, Entries<'de>> = map.next_value()?;
                let s = v.scalar().cloned();
                self.spend_logs_metadata = v.object();
                s
            }
            "error_information" => {
                let v: Field<'de, ErrorInformation<'de>> = map.next_value()?;
                let s = v.scalar().cloned();
                self.error_information = v.object();
                s
            }
            "additional_usage_values" => {
                let v: Field<'de, Usage> = map.next_value()?;
                let s = v.scalar().cloned();
                self.additional_usage_values = v.object();
                s
            }
            "usage_object" => {
                let v: Field<'de, Usage> = map.next_value()?;
                let s = v.scalar().cloned();
                self.usage_object = v.object();
                s
            }
            _ => map.next_value::<AnyScalar<'de>>()?.scalar().cloned(),
        };
        self.top.0.push((key, scalar));
        Ok(())
    }
}

/// `metadata.error_information`: what LiteLLM caught on a failure.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ErrorInformation<'a> {
    /// `error_class` (`RateLimitError`), when a scalar.
    pub error_class: Option<Scalar<'a>>,
    /// `error_code` (`"429"`, or a number), when a scalar.
    pub error_code: Option<Scalar<'a>>,
}

impl<'de> Keys<'de> for ErrorInformation<'de> {
    fn entry<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let slot = match &*key {
            "error_class" => &mut self.error_class,
            "error_code" => &mut self.error_code,
            _ => return map.next_value::<IgnoredAny>().map(drop),
        };
        *slot = map.next_value::<AnyScalar<'de>>()?.scalar().cloned();
        Ok(())
    }
}

/// A usage object (`additional_usage_values`, `usage_object`): its prompt
/// cache counts, each as the JSON value found (`None` when absent or
/// null).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Usage {
    /// `cache_read_input_tokens`.
    pub cache_read_input_tokens: Option<Value>,
    /// `cache_creation_input_tokens`.
    pub cache_creation_input_tokens: Option<Value>,
    /// `prompt_tokens_details`, when it is an object.
    pub prompt_tokens_details: Option<Details>,
}

impl<'de> Keys<'de> for Usage {
    fn entry<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        match &*key {
            "cache_read_input_tokens" => self.cache_read_input_tokens = map.next_value()?,
            "cache_creation_input_tokens" => self.cache_creation_input_tokens = map.next_value()?,
            "prompt_tokens_details" => {
                self.prompt_tokens_details = map.next_value::<Field<'de, Details>>()?.object();
            }
            _ => {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// `prompt_tokens_details` of a usage object.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Details {
    /// `cached_tokens`.
    pub cached_tokens: Option<Value>,
    /// `cache_creation_tokens`.
    pub cache_creation_tokens: Option<Value>,
    /// `cache_write_tokens`.
    pub cache_write_tokens: Option<Value>,
}

impl<'de> Keys<'de> for Details {
    fn entry<A: MapAccess<'de>>(&mut self, key: Text<'de>, map: &mut A) -> Result<(), A::Error> {
        let slot = match &*key {
            "cached_tokens" => &mut self.cached_tokens,
            "cache_creation_tokens" => &mut self.cache_creation_tokens,
            "cache_write_tokens" => &mut self.cache_write_tokens,
            _ => return map.next_value::<IgnoredAny>().map(drop),
        };
        *slot = map.next_value()?;
        Ok(())
    }
}

/// The `metadata` column: an object, the JSON text of one, or a value of
/// another kind (which fails the row). Null or absent is `None` around it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum MetadataColumn<'a> {
    Object(Box<Metadata<'a>>),
    Text(Text<'a>),
    Other(Kind),
}

impl<'de: 'a, 'a> Deserialize<'de> for MetadataColumn<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Field::<'de, Metadata<'de>>::deserialize(d)? {
            Field::Object(m) => MetadataColumn::Object(Box::new(m)),
            Field::Scalar(Scalar::Text(t)) => MetadataColumn::Text(t),
            other => MetadataColumn::Other(other.kind()),
        })
    }
}

/// Reads the JSON text of `metadata`: its object, or `None` for text
/// that is not the JSON of an object (LiteLLM reads such text as `{}`).
pub(super) fn metadata_text(text: &str) -> Option<Metadata<'_>> {
    serde_json::from_str::<Object<Metadata<'_>>>(text)
        .ok()
        .map(|o| o.0)
}

/// The `request_tags` column: a list (its strings), the JSON text of one,
/// or a value of another kind (which fails the row).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum TagsColumn<'a> {
    List(Vec<Text<'a>>),
    Text(Text<'a>),
    Other(Kind),
}

impl<'de: 'a, 'a> Deserialize<'de> for TagsColumn<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = TagsColumn<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let list = Strings::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(TagsColumn::List(list.0))
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(TagsColumn::Text(Text::from(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(TagsColumn::Text(Text(v.to_owned().into())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(TagsColumn::Text(Text(v.into())))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(TagsColumn::Other(Kind::Boolean))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(TagsColumn::Other(Kind::Number))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(TagsColumn::Other(Kind::Number))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(TagsColumn::Other(Kind::Number))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(TagsColumn::List(Vec::new()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(TagsColumn::Other(Kind::Object))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Reads the JSON text of `request_tags`: the strings of its list (none
/// for `null`), or `None` for text that is not the JSON of a list.
pub(super) fn tags_text(text: &str) -> Option<Vec<Text<'_>>> {
    serde_json::from_str::<Option<Strings<'_>>>(text)
        .ok()
        .map(|list| list.map(|l| l.0).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Metadata<'static> {
        match Field::<'_, Metadata<'_>>::deserialize(v).unwrap() {
            Field::Object(m) => m,
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn only_the_keys_used_are_read_and_the_last_of_a_key_wins() {
        let text = r#"{"user_api_key_alias": "bot", "applied_guardrails": ["g"],
            "error_information": {"error_class": "RateLimitError", "error_code": "429",
                                  "traceback": "long"},
            "spend_logs_metadata": {"z": 1, "a": "x", "a": {"nested": true}},
            "usage_object": {"cache_read_input_tokens": 5,
                             "prompt_tokens_details": {"cached_tokens": 4}},
            "usage_object": "not an object",
            "user_api_key_alias": "later"}"#;
        let from_text = serde_json::from_str::<Object<Metadata<'_>>>(text)
            .unwrap()
            .0;
        let from_value = read(serde_json::from_str(text).unwrap());
        for m in [from_text, from_value] {
            let get = |k: &str| m.get(k).and_then(Scalar::text);
            assert_eq!(get("user_api_key_alias").as_deref(), Some("later"));
            assert_eq!(get("applied_guardrails"), None);
            assert_eq!(get("error_information"), None);
            let info = m.error_information.clone().unwrap();
            let class = info.error_class.and_then(|c| c.text());
            assert_eq!(class.as_deref(), Some("RateLimitError"));
            let slm = m.spend_logs_metadata.clone().unwrap();
            assert_eq!(slm.0.len(), 2);
            assert_eq!(slm.get("a"), None);
            assert_eq!(slm.get("z").and_then(Scalar::text).as_deref(), Some("1"));
            // The last `usage_object` is not an object: none is read, and
            // its string is a scalar like any other.
            assert_eq!(m.usage_object, None);
            assert_eq!(get("usage_object").as_deref(), Some("not an object"));
        }
    }

    #[test]
    fn metadata_as_text_is_read_and_other_text_is_none() {
        let m = metadata_text(r#"{"spend_logs_metadata": {"feature": "chat"}}"#).unwrap();
        assert!(m.spend_logs_metadata.unwrap().get("feature").is_some());
        assert_eq!(metadata_text("{not json"), None);
        assert_eq!(metadata_text("[1]"), None);
        assert_eq!(metadata_text("null"), None);
    }

    #[test]
    fn tags_are_a_list_its_text_or_another_kind() {
        let col = |v: Value| TagsColumn::deserialize(v).unwrap();
        assert_eq!(
            col(json!(["a", 1, "b"])),
            TagsColumn::List(vec!["a".into(), "b".into()])
        );
        assert_eq!(col(json!("[\"a\"]")), TagsColumn::Text("[\"a\"]".into()));
        assert_eq!(col(json!({"a": 1})), TagsColumn::Other(Kind::Object));
        assert_eq!(col(json!(3)), TagsColumn::Other(Kind::Number));
        assert_eq!(tags_text("[\"a\", 2, \"b\"]").unwrap().len(), 2);
        assert_eq!(tags_text("null"), Some(Vec::new()));
        assert_eq!(tags_text("\"a\""), None);
        assert_eq!(tags_text("[oops"), None);
    }
}
