//! A page of observations read in one pass over its text ([`Scanner`])
//! into the same [`Page`] serde's readers give (`wire.rs`): the fields of
//! the groups costwatch asks for, every other field skipped and checked
//! against JSON's grammar.
//!
//! Where the page leaves the shape read here (a field given twice, a value
//! of another type, a surrogate escape, anything the scanner steps aside
//! from), [`page`] gives `None` and the page goes to serde, which gives the
//! same rows or names the failing field. `scan/tests.rs` holds the two
//! equal on generated pages and on the same pages corrupted byte by byte.

use super::wire::{Details, Meta, Metadata, Observation, Page};
use crate::source::json::Text;
use crate::source::json::scanner::{MAX_SKIP_DEPTH, Scanner, first};
use chrono::{DateTime, FixedOffset, Utc};

/// Reads a whole page, or `None` when any of it is not in the shape read
/// here.
pub(super) fn page(text: &str) -> Option<Page<'_>> {
    let mut s = Scanner::new(text);
    let mut data = None;
    let mut meta = None;
    s.object(|s, key| match key {
        "data" => {
            let rows = s.nullable(|s| {
                let mut rows = Vec::with_capacity(512);
                s.array(|s| {
                    rows.push(observation(s)?);
                    Some(())
                })?;
                Some(rows)
            })?;
            first(&mut data, rows)
        }
        "meta" => first(&mut meta, s.nullable(page_meta)?),
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    if !s.at_end() {
        return None;
    }
    Some(Page {
        data: data.flatten(),
        meta: meta.flatten(),
    })
}

/// `meta`, as serde's derived reader of [`Meta`] reads it.
fn page_meta<'a>(s: &mut Scanner<'a>) -> Option<Meta<'a>> {
    let mut cursor = None;
    s.object(|s, key| match key {
        "cursor" => first(&mut cursor, s.opt_text()?),
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    Some(Meta {
        cursor: cursor.flatten(),
    })
}

/// One observation, as serde's derived reader of [`Observation`] reads
/// it.
fn observation<'a>(s: &mut Scanner<'a>) -> Option<Observation<'a>> {
    let mut id = None;
    let mut trace_id = None;
    let mut start_time = None;
    let mut kind = None;
    let mut name = None;
    let mut level = None;
    let mut status_message = None;
    let mut version = None;
    let mut environment = None;
    let mut user_id = None;
    let mut session_id = None;
    let mut metadata = None;
    let mut model = None;
    let mut provided_model_name = None;
    let mut usage_details = None;
    let mut cost_details = None;
    let mut total_cost = None;
    let mut trace_name = None;
    let mut tags = None;
    let mut release = None;
    s.object(|s, key| match key {
        "id" => first(&mut id, s.opt_text()?),
        "traceId" => first(&mut trace_id, s.opt_text()?),
        "startTime" => first(&mut start_time, s.nullable(time)?),
        "type" => first(&mut kind, s.opt_text()?),
        "name" => first(&mut name, s.opt_text()?),
        "level" => first(&mut level, s.opt_text()?),
        "statusMessage" => first(&mut status_message, s.opt_text()?),
        "version" => first(&mut version, s.opt_text()?),
        "environment" => first(&mut environment, s.opt_text()?),
        "userId" => first(&mut user_id, s.opt_text()?),
        "sessionId" => first(&mut session_id, s.opt_text()?),
        "metadata" => first(&mut metadata, s.nullable(observation_metadata)?),
        "model" => first(&mut model, s.opt_text()?),
        "providedModelName" => first(&mut provided_model_name, s.opt_text()?),
        "usageDetails" => first(
            &mut usage_details,
            s.nullable(|s| details(s, Scanner::json_number))?,
        ),
        "costDetails" => first(&mut cost_details, s.nullable(|s| details(s, Scanner::f64))?),
        "totalCost" => first(&mut total_cost, s.nullable(Scanner::f64)?),
        "traceName" => first(&mut trace_name, s.opt_text()?),
        "tags" => first(&mut tags, s.nullable(strings)?),
        "release" => first(&mut release, s.opt_text()?),
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    Some(Observation {
        id: id.flatten(),
        trace_id: trace_id.flatten(),
        start_time: start_time.flatten(),
        kind: kind.flatten(),
        name: name.flatten(),
        level: level.flatten(),
        status_message: status_message.flatten(),
        version: version.flatten(),
        environment: environment.flatten(),
        user_id: user_id.flatten(),
        session_id: session_id.flatten(),
        metadata: metadata.flatten(),
        // Present or not matters: a key given as `null` is `Some(None)`.
        model,
        provided_model_name,
        usage_details: usage_details.flatten(),
        cost_details: cost_details.flatten(),
        total_cost: total_cost.flatten(),
        trace_name: trace_name.flatten(),
        tags: tags.flatten(),
        release: release.flatten(),
    })
}

/// `startTime`: Langfuse's own form directly, any other as chrono reads
/// it (`wire::start_time`).
fn time(s: &mut Scanner<'_>) -> Option<DateTime<Utc>> {
    let t = s.text()?;
    crate::source::time::fast_utc(&t).or_else(|| {
        t.parse::<DateTime<FixedOffset>>()
            .ok()
            .map(|v| v.with_timezone(&Utc))
    })
}

/// `metadata` that is not `null`: an object's scalar entries, `None` for
/// any other value.
fn observation_metadata<'a>(s: &mut Scanner<'a>) -> Option<Metadata<'a>> {
    Some(Metadata(s.field(Scanner::entries)?.object()))
}

/// `usageDetails` or `costDetails`: each value read by `value`.
fn details<'a, V>(
    s: &mut Scanner<'a>,
    mut value: impl FnMut(&mut Scanner<'a>) -> Option<V>,
) -> Option<Details<'a, V>> {
    let mut pairs = Vec::with_capacity(16);
    s.object(|s, key| {
        pairs.push((Text::from(key), value(s)?));
        Some(())
    })?;
    Some(Details::from_pairs(pairs))
}

/// A list of strings; anything else in it is left to serde.
fn strings<'a>(s: &mut Scanner<'a>) -> Option<Vec<Text<'a>>> {
    let mut list = Vec::new();
    s.array(|s| {
        list.push(s.text()?);
        Some(())
    })?;
    Some(list)
}

#[cfg(test)]
mod tests;
