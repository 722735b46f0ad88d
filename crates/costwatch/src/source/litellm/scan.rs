//! A spend-log page read in one pass over its text ([`Scanner`]) into the
//! same [`Envelope`] serde's readers give (`wire.rs`, `metadata.rs`):
//! the columns costwatch reads, the keys of `metadata` it reads, every
//! other column and key skipped and checked against JSON's grammar.
//!
//! Where the page leaves the shape read here (a column given twice, a
//! missing or mistyped column, a count that is not a plain integer, a
//! surrogate escape, anything the scanner steps aside from), [`page`]
//! gives `None` and the page goes to serde, which gives the same rows or
//! names the failing field. `scan/tests.rs` holds the two equal on
//! generated pages and on the same pages corrupted byte by byte.

use super::metadata::{ErrorInformation, Metadata, MetadataColumn, TagsColumn, Usage};
use super::wire::{Envelope, WireRow};
use crate::source::json::scanner::{MAX_SKIP_DEPTH, Scanner, first};
use crate::source::json::{Field, Kind, Scalar, Text};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// Reads a whole page, or `None` when any of it is not in the shape read
/// here.
pub(super) fn page(text: &str) -> Option<Envelope<'_>> {
    let mut s = Scanner::new(text);
    let mut data = None;
    let mut page = None;
    let mut page_size = None;
    s.object(|s, key| match key {
        "data" => {
            let mut rows = Vec::with_capacity(512);
            s.array(|s| {
                rows.push(row(s)?);
                Some(())
            })?;
            first(&mut data, rows)
        }
        "page" => first(&mut page, s.nullable(Scanner::u64)?),
        "page_size" => first(&mut page_size, s.nullable(Scanner::u64)?),
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    if !s.at_end() {
        return None;
    }
    Some(Envelope {
        data: data?,
        page: page.flatten(),
        page_size: page_size.flatten(),
    })
}

/// One row, as serde's derived reader of [`WireRow`] reads it.
fn row<'a>(s: &mut Scanner<'a>) -> Option<WireRow<'a>> {
    let mut request_id = None;
    let mut start_time = None;
    let mut spend = None;
    let mut prompt_tokens = None;
    let mut completion_tokens = None;
    let mut model = None;
    let mut model_group = None;
    let mut model_id = None;
    let mut call_type = None;
    let mut session_id = None;
    let mut status = None;
    let mut end_user = None;
    let mut team_id = None;
    let mut user = None;
    let mut organization_id = None;
    let mut custom_llm_provider = None;
    let mut litellm_call_id = None;
    let mut request_tags = None;
    let mut metadata = None;
    s.object(|s, key| match key {
        "request_id" => first(&mut request_id, s.text()?),
        "startTime" => first(&mut start_time, time(s)?),
        "spend" => first(&mut spend, s.f64()?),
        "prompt_tokens" => first(&mut prompt_tokens, count(s)?),
        "completion_tokens" => first(&mut completion_tokens, count(s)?),
        "model" => first(&mut model, s.text()?),
        "model_group" => first(&mut model_group, s.opt_text()?),
        "model_id" => first(&mut model_id, s.opt_text()?),
        "call_type" => first(&mut call_type, s.opt_text()?),
        "session_id" => first(&mut session_id, s.opt_text()?),
        "status" => first(&mut status, s.opt_text()?),
        "end_user" => first(&mut end_user, s.opt_text()?),
        "team_id" => first(&mut team_id, s.opt_text()?),
        "user" => first(&mut user, s.opt_text()?),
        "organization_id" => first(&mut organization_id, s.opt_text()?),
        "custom_llm_provider" => first(&mut custom_llm_provider, s.opt_text()?),
        "litellm_call_id" => first(&mut litellm_call_id, s.opt_text()?),
        "request_tags" => first(&mut request_tags, tags_column(s)?),
        "metadata" => first(&mut metadata, metadata_column(s)?),
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    Some(WireRow {
        request_id: request_id?,
        start_time: start_time?,
        spend: spend?,
        prompt_tokens: prompt_tokens?,
        completion_tokens: completion_tokens?,
        model: model?,
        model_group: model_group.flatten(),
        model_id: model_id.flatten(),
        call_type: call_type.flatten(),
        session_id: session_id.flatten(),
        status: status.flatten(),
        end_user: end_user.flatten(),
        team_id: team_id.flatten(),
        user: user.flatten(),
        organization_id: organization_id.flatten(),
        custom_llm_provider: custom_llm_provider.flatten(),
        litellm_call_id: litellm_call_id.flatten(),
        request_tags: request_tags.flatten(),
        metadata: metadata.flatten(),
    })
}

/// `startTime`, as `wire::time` reads it.
fn time(s: &mut Scanner<'_>) -> Option<DateTime<Utc>> {
    let t = s.text()?;
    crate::source::time::fast_utc(&t).or_else(|| super::wire::parse_time(&t))
}

/// A token count: a plain integer that fits an `i64` (a negative one, or
/// any other number, is left to serde).
fn count(s: &mut Scanner<'_>) -> Option<i64> {
    i64::try_from(s.u64()?).ok()
}

/// The `request_tags` column as [`TagsColumn`] reads it; `null` is `None`.
fn tags_column<'a>(s: &mut Scanner<'a>) -> Option<Option<TagsColumn<'a>>> {
    s.nullable(|s| {
        Some(match s.peek()? {
            b'[' => TagsColumn::List(strings(s)?),
            _ => match s.field(Scanner::skipped)? {
                Field::Scalar(Scalar::Text(t)) => TagsColumn::Text(t),
                other => TagsColumn::Other(other.kind()),
            },
        })
    })
}

/// The strings of a list, its other entries skipped, as `Strings` reads
/// them.
fn strings<'a>(s: &mut Scanner<'a>) -> Option<Vec<Text<'a>>> {
    let mut list = Vec::new();
    s.array(|s| {
        if let Field::Scalar(Scalar::Text(t)) = s.field(Scanner::skipped)? {
            list.push(t);
        }
        Some(())
    })?;
    Some(list)
}

/// The JSON text of `request_tags` when it is a list: its strings, or
/// `None` for any other text, which is left to serde.
pub(super) fn tags_text(text: &str) -> Option<Vec<Text<'_>>> {
    let mut s = Scanner::new(text);
    if s.peek()? != b'[' {
        return None;
    }
    let list = strings(&mut s)?;
    s.at_end().then_some(list)
}

/// The `metadata` column as [`MetadataColumn`] reads it; `null` is
/// `None`.
fn metadata_column<'a>(s: &mut Scanner<'a>) -> Option<Option<MetadataColumn<'a>>> {
    Some(match s.field(metadata)? {
        Field::Other(Kind::Null) => None,
        Field::Object(m) => Some(MetadataColumn::Object(m)),
        Field::Scalar(Scalar::Text(t)) => Some(MetadataColumn::Text(t)),
        other => Some(MetadataColumn::Other(other.kind())),
    })
}

/// `metadata` as its `Keys` reader reads it: each top-level key in order,
/// the four objects it reads into their own fields. It is built where it
/// is kept, on the heap, not moved there.
fn metadata<'a>(s: &mut Scanner<'a>) -> Option<Box<Metadata<'a>>> {
    let mut m = Box::<Metadata<'a>>::default();
    m.top.0.reserve(32);
    s.object(|s, key| {
        let value = match key {
            "spend_logs_metadata" => keep(&mut m.spend_logs_metadata, s.field(Scanner::entries)?),
            "error_information" => keep(&mut m.error_information, s.field(error_information)?),
            "additional_usage_values" => keep(&mut m.additional_usage_values, s.field(usage)?),
            "usage_object" => keep(&mut m.usage_object, s.field(usage)?),
            _ => s.field(Scanner::skipped)?.into_scalar(),
        };
        m.top.0.push((Text::from(key), value));
        Some(())
    })?;
    Some(m)
}

/// A key of `metadata` read into its own field: the object when it is
/// one (its top-level entry then holds no scalar), else no object and the
/// value's scalar, as the `Keys` reader keeps them.
fn keep<'a, T>(slot: &mut Option<T>, value: Field<'a, T>) -> Option<Scalar<'a>> {
    match value {
        Field::Object(t) => {
            *slot = Some(t);
            None
        }
        other => {
            *slot = None;
            other.into_scalar()
        }
    }
}

/// `error_information`, as its `Keys` reader reads it.
fn error_information<'a>(s: &mut Scanner<'a>) -> Option<ErrorInformation<'a>> {
    let mut info = ErrorInformation::default();
    s.object(|s, key| {
        let slot = match key {
            "error_class" => &mut info.error_class,
            "error_code" => &mut info.error_code,
            _ => return s.skip(MAX_SKIP_DEPTH),
        };
        *slot = s.field(Scanner::skipped)?.into_scalar();
        Some(())
    })?;
    Some(info)
}

/// A usage object, as its `Keys` reader reads it.
fn usage(s: &mut Scanner<'_>) -> Option<Usage> {
    let mut u = Usage::default();
    s.object(|s, key| {
        match key {
            "cache_read_input_tokens" => u.cache_read_input_tokens = count_value(s)?,
            "cache_creation_input_tokens" => u.cache_creation_input_tokens = count_value(s)?,
            "prompt_tokens_details" => {
                u.prompt_tokens_details = match s.field(details)? {
                    Field::Object(d) => Some(d),
                    _ => None,
                };
            }
            _ => s.skip(MAX_SKIP_DEPTH)?,
        }
        Some(())
    })?;
    Some(u)
}

/// `prompt_tokens_details`, as its `Keys` reader reads it.
fn details(s: &mut Scanner<'_>) -> Option<super::metadata::Details> {
    let mut d = super::metadata::Details::default();
    s.object(|s, key| {
        let slot = match key {
            "cached_tokens" => &mut d.cached_tokens,
            "cache_creation_tokens" => &mut d.cache_creation_tokens,
            "cache_write_tokens" => &mut d.cache_write_tokens,
            _ => return s.skip(MAX_SKIP_DEPTH),
        };
        *slot = count_value(s)?;
        Some(())
    })?;
    Some(d)
}

/// A cache count as the `Value` serde reads: a number or a string (which
/// the count's check then refuses by name), `null` as `None`; any other
/// value is left to serde.
fn count_value(s: &mut Scanner<'_>) -> Option<Option<Value>> {
    Some(match s.peek()? {
        b'n' => {
            s.literal("null")?;
            None
        }
        b'"' => Some(Value::String(s.text()?.0.into_owned())),
        b'-' | b'0'..=b'9' => Some(Value::Number(s.json_number()?)),
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
