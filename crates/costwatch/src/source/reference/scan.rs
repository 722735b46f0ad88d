//! A direct reader of the two listings costwatch reads by the million:
//! session pages and request pages, in the plain shape the reference
//! gateway sends them, on the one-pass [`Scanner`].
//!
//! It reads the plain shape only. A string it keeps with an escape, a
//! duplicate or missing field, a value of another type, anything the
//! scanner steps aside from: the reader returns `None` and the page goes to
//! serde, which gives the same rows or names the failing field (checked
//! against serde on generated and corrupted pages in `scan/tests.rs`).

use super::wire::{ModelNames, Page, WireModelUsage, WireRequest, WireSession, add_usage};
use crate::domain::Labels;
use crate::source::ModelUsage;
use crate::source::RequestStatus;
use crate::source::json::scanner::{MAX_SKIP_DEPTH, Scanner, first};

/// A row the reader can read.
pub(in crate::source) trait Scan: Sized {
    /// Reads one row at the scanner's position; `None` when the row is not
    /// in the plain shape.
    fn scan(s: &mut Scanner<'_>) -> Option<Self>;
}

/// Reads a whole page, or `None` when any of it is not in the plain shape.
pub(in crate::source) fn page<T: Scan>(text: &str) -> Option<Page<T>> {
    let mut s = Scanner::new(text);
    let mut data: Option<Vec<T>> = None;
    let mut cursor: Option<Option<String>> = None;
    s.object(|s, key| match key {
        "data" => {
            let mut rows = Vec::with_capacity(50);
            s.array(|s| {
                rows.push(T::scan(s)?);
                Some(())
            })?;
            first(&mut data, rows)
        }
        "next_cursor" => {
            let c = s.opt_str()?.map(str::to_owned);
            first(&mut cursor, c)
        }
        _ => s.skip(MAX_SKIP_DEPTH),
    })?;
    if !s.at_end() {
        return None;
    }
    Some(Page {
        data: data?,
        next_cursor: cursor.flatten(),
    })
}

impl Scan for WireSession {
    fn scan(s: &mut Scanner<'_>) -> Option<Self> {
        let mut session_id = None;
        let mut first_request_at = None;
        let mut last_request_at = None;
        let mut requests = None;
        let mut errors = None;
        let mut input_tokens = None;
        let mut cached_tokens = None;
        let mut cache_write_tokens = None;
        let mut output_tokens = None;
        let mut cost_usd = None;
        let mut models = None;
        let mut by_model = None;
        let mut labels = None;
        s.object(|s, key| match key {
            "session_id" => first(&mut session_id, s.str()?.to_owned()),
            "first_request_at" => first(&mut first_request_at, s.opt_time()?),
            "last_request_at" => first(&mut last_request_at, s.opt_time()?),
            "requests" => first(&mut requests, s.u64()?),
            "errors" => first(&mut errors, s.u64()?),
            "input_tokens" => first(&mut input_tokens, s.u64()?),
            "cached_tokens" => first(&mut cached_tokens, s.u64()?),
            "cache_write_tokens" => first(&mut cache_write_tokens, s.u64()?),
            "output_tokens" => first(&mut output_tokens, s.u64()?),
            "cost_usd" => first(&mut cost_usd, s.f64()?),
            "models" => first(&mut models, model_names(s)?),
            "by_model" => first(&mut by_model, by_model_list(s)?),
            "labels" => first(&mut labels, label_map(s)?),
            _ => s.skip(MAX_SKIP_DEPTH),
        })?;
        Some(WireSession {
            session_id: session_id?,
            first_request_at: first_request_at.flatten(),
            last_request_at: last_request_at.flatten(),
            requests: requests?,
            errors: errors.unwrap_or_default(),
            input_tokens: input_tokens?,
            cached_tokens: cached_tokens.unwrap_or_default(),
            cache_write_tokens: cache_write_tokens.unwrap_or_default(),
            output_tokens: output_tokens.unwrap_or_default(),
            cost_usd: cost_usd?,
            models: models.unwrap_or_default(),
            by_model: by_model.unwrap_or_default(),
            labels: labels.unwrap_or_default(),
        })
    }
}

/// `models` as [`ModelNames`]' reader keeps it: how many, and the first.
fn model_names(s: &mut Scanner<'_>) -> Option<ModelNames> {
    let mut names = ModelNames::default();
    s.array(|s| {
        let name = s.str()?;
        if names.count == 0 {
            names.first = Some(name.to_owned());
        }
        names.count += 1;
        Some(())
    })?;
    Some(names)
}

/// `by_model` as [`super::by_model_list`] reads it: a repeated model keeps
/// its last entry ([`add_usage`]), sorted by model name.
fn by_model_list(s: &mut Scanner<'_>) -> Option<Vec<ModelUsage>> {
    let mut out: Vec<ModelUsage> = Vec::with_capacity(1);
    s.object(|s, model| {
        let usage = WireModelUsage::scan(s)?.of(model.to_owned());
        add_usage(&mut out, usage).then_some(())
    })?;
    out.sort_by(|a, b| a.model.cmp(&b.model));
    Some(out)
}

/// `labels`: string values, a repeated key keeping its last value.
fn label_map(s: &mut Scanner<'_>) -> Option<Labels> {
    let mut labels = Labels::new();
    s.object(|s, key| {
        let value = s.str()?;
        labels.insert(key.to_owned(), value.to_owned());
        Some(())
    })?;
    Some(labels)
}

impl Scan for WireModelUsage {
    fn scan(s: &mut Scanner<'_>) -> Option<Self> {
        let mut requests = None;
        let mut input_tokens = None;
        let mut cached_tokens = None;
        let mut output_tokens = None;
        let mut cost_usd = None;
        s.object(|s, key| match key {
            "requests" => first(&mut requests, s.u64()?),
            "input_tokens" => first(&mut input_tokens, s.u64()?),
            "cached_tokens" => first(&mut cached_tokens, s.u64()?),
            "output_tokens" => first(&mut output_tokens, s.u64()?),
            "cost_usd" => first(&mut cost_usd, s.f64()?),
            _ => s.skip(MAX_SKIP_DEPTH),
        })?;
        Some(WireModelUsage {
            requests: requests.unwrap_or_default(),
            input_tokens: input_tokens.unwrap_or_default(),
            cached_tokens: cached_tokens.unwrap_or_default(),
            output_tokens: output_tokens.unwrap_or_default(),
            cost_usd: cost_usd.unwrap_or_default(),
        })
    }
}

impl Scan for WireRequest {
    fn scan(s: &mut Scanner<'_>) -> Option<Self> {
        let mut request_id = None;
        let mut session_id = None;
        let mut created_at = None;
        let mut model = None;
        let mut status = None;
        let mut http_status = None;
        let mut error_type = None;
        let mut input_tokens = None;
        let mut cached_tokens = None;
        let mut cache_write_tokens = None;
        let mut output_tokens = None;
        let mut cost_usd = None;
        s.object(|s, key| match key {
            "request_id" => first(&mut request_id, s.str()?.to_owned()),
            "session_id" => first(&mut session_id, s.str()?.to_owned()),
            "created_at" => first(&mut created_at, s.time()?),
            "model" => first(&mut model, s.str()?.to_owned()),
            "status" => {
                let v = match s.str()? {
                    "success" => RequestStatus::Success,
                    "error" => RequestStatus::Error,
                    _ => return None,
                };
                first(&mut status, v)
            }
            "http_status" => {
                let v = if s.peek()? == b'n' {
                    s.literal("null")?;
                    None
                } else {
                    Some(u16::try_from(s.u64()?).ok()?)
                };
                first(&mut http_status, v)
            }
            "error_type" => first(&mut error_type, s.opt_str()?.map(str::to_owned)),
            "input_tokens" => first(&mut input_tokens, s.u64()?),
            "cached_tokens" => first(&mut cached_tokens, s.u64()?),
            "cache_write_tokens" => first(&mut cache_write_tokens, s.u64()?),
            "output_tokens" => first(&mut output_tokens, s.u64()?),
            "cost_usd" => first(&mut cost_usd, s.f64()?),
            _ => s.skip(MAX_SKIP_DEPTH),
        })?;
        Some(WireRequest {
            request_id: request_id?,
            session_id: session_id?,
            created_at: created_at?,
            model: model?,
            status: status?,
            http_status: http_status.flatten(),
            error_type: error_type.flatten(),
            input_tokens: input_tokens?,
            cached_tokens: cached_tokens.unwrap_or_default(),
            cache_write_tokens: cache_write_tokens.unwrap_or_default(),
            output_tokens: output_tokens.unwrap_or_default(),
            cost_usd: cost_usd?,
        })
    }
}

#[cfg(test)]
mod tests;
