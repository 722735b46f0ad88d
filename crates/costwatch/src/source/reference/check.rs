//! The reference gateway's rows held to the limits every value from a
//! gateway is held to ([`crate::limits`], the manual's "Limits on
//! gateway data"), checked as its page is parsed.
//!
//! A value no real gateway can send (tokens at `u64::MAX`, a cost of
//! 1.7e308, more cached than prompt tokens, a 7 MB label) fails its page
//! with the field's path, e.g. `data[7].cached_tokens: 900 is above
//! input_tokens 800`, so the window is tried again later and nothing of it
//! reaches the detectors, the baselines or the findings. Gateway text quoted
//! in a message is escaped ([`printable`]).
//!
//! A listing's pages are checked by one [`Pages`]: no more rows than asked
//! for, ids unique on a page, and for sessions the documented order
//! (`first_request_at`, then `session_id`). The order is what keeps a
//! session from being counted twice across pages in bounded memory: a
//! repeat either breaks the order or shares its `first_request_at` with the
//! rows around it, and only the ids of the rows sharing the latest
//! `first_request_at` are remembered (at most [`MAX_TIED`]).

#[cfg(test)]
use super::wire::Page;
use super::wire::{WireRequest, WireSession};
use crate::limits::{
    MAX_COST_USD, MAX_ID_BYTES, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES, MAX_LABELS, MAX_TIED,
    count, id, too_long, usd,
};
use crate::printable::printable;
use crate::source::Labels;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::DeserializeOwned;
use std::collections::{HashMap, HashSet};
use std::fmt::Display;

/// A row of a paginated listing.
pub(super) trait Row: DeserializeOwned {
    /// The name of the id field, unique on a page.
    const ID: &'static str;
    /// The row's id.
    fn id(&self) -> &str;
    /// Checks the row's own values; the message starts with the field.
    fn check(&self) -> Result<(), String>;
    /// The time the listing is ordered by, when it promises an order.
    fn ordered_by(&self) -> Option<DateTime<Utc>> {
        None
    }
}

impl Row for WireSession {
    const ID: &'static str = "session_id";

    fn id(&self) -> &str {
        &self.session_id
    }

    fn check(&self) -> Result<(), String> {
        id("session_id", &self.session_id)?;
        for (field, n) in [
            ("requests", self.requests),
            ("errors", self.errors),
            ("input_tokens", self.input_tokens),
            ("cached_tokens", self.cached_tokens),
            ("cache_write_tokens", self.cache_write_tokens),
            ("output_tokens", self.output_tokens),
        ] {
            count(field, n)?;
        }
        part("errors", self.errors, "requests", self.requests)?;
        part(
            "cached_tokens",
            self.cached_tokens,
            "input_tokens",
            self.input_tokens,
        )?;
        // Both are parts of the prompt, and a token is either read from the
        // cache or written to it.
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens {
            return Err(format!(
                "cache_write_tokens: {} and cached_tokens {} add up to more than input_tokens {}",
                self.cache_write_tokens, self.cached_tokens, self.input_tokens
            ));
        }
        usd("cost_usd", self.cost_usd, MAX_COST_USD)?;
        if let (Some(first), Some(last)) = (self.first_request_at, self.last_request_at)
            && last < first
        {
            return Err(format!(
                "last_request_at: {} is before first_request_at {}",
                time(last),
                time(first)
            ));
        }
        if let Some(model) = &self.models.first {
            id("models[0]", model)?;
        }
        for u in &self.by_model {
            let model = &u.model;
            id("by_model", model)?;
            for (field, n, whole_field, whole) in [
                (
                    "requests",
                    u.requests,
                    "the session's requests",
                    self.requests,
                ),
                (
                    "input_tokens",
                    u.input_tokens,
                    "the session's input_tokens",
                    self.input_tokens,
                ),
                (
                    "cached_tokens",
                    u.cached_tokens,
                    "its input_tokens",
                    u.input_tokens,
                ),
                (
                    "output_tokens",
                    u.output_tokens,
                    "the session's output_tokens",
                    self.output_tokens,
                ),
            ] {
                part(InModel(model, field), n, whole_field, whole)?;
            }
            usd(InModel(model, "cost_usd"), u.cost_usd, MAX_COST_USD)?;
        }
        labels(&self.labels)
    }

    fn ordered_by(&self) -> Option<DateTime<Utc>> {
        self.first_request_at
    }
}

impl Row for WireRequest {
    const ID: &'static str = "request_id";

    fn id(&self) -> &str {
        &self.request_id
    }

    fn check(&self) -> Result<(), String> {
        id("request_id", &self.request_id)?;
        id("session_id", &self.session_id)?;
        id("model", &self.model)?;
        if let Some(kind) = &self.error_type
            && kind.len() > MAX_ID_BYTES
        {
            return Err(too_long("error_type", kind.len(), MAX_ID_BYTES));
        }
        if let Some(status) = self.http_status
            && !(100..=599).contains(&status)
        {
            return Err(format!("http_status: {status} is not an HTTP status"));
        }
        for (field, n) in [
            ("input_tokens", self.input_tokens),
            ("cached_tokens", self.cached_tokens),
            ("cache_write_tokens", self.cache_write_tokens),
            ("output_tokens", self.output_tokens),
        ] {
            count(field, n)?;
        }
        part(
            "cached_tokens",
            self.cached_tokens,
            "input_tokens",
            self.input_tokens,
        )?;
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens {
            return Err(format!(
                "cache_write_tokens: {} and cached_tokens {} add up to more than input_tokens {}",
                self.cache_write_tokens, self.cached_tokens, self.input_tokens
            ));
        }
        usd("cost_usd", self.cost_usd, MAX_COST_USD)?;
        Ok(())
    }
}

/// The checks of one listing, page after page: see the module documentation.
#[derive(Debug)]
pub(super) struct Pages {
    limit: usize,
    /// The order time of the latest row that had one.
    last: Option<DateTime<Utc>>,
    /// That row's id.
    last_id: String,
    /// Ids of the rows sharing `last`, once two do.
    tied: HashSet<String>,
}

impl Pages {
    /// Checks for a listing read `limit` rows at a time.
    pub(super) fn new(limit: u32) -> Pages {
        Pages {
            limit: limit as usize,
            last: None,
            last_id: String::new(),
            tied: HashSet::new(),
        }
    }

    /// Parses the listing's next page and checks it (the gateway client
    /// parses under its retries, then calls [`Pages::check`]).
    #[cfg(test)]
    pub(super) fn parse<T: Row>(&mut self, body: &[u8]) -> Result<Page<T>, String> {
        let page: Page<T> = crate::decode::json(body)?;
        self.check(&page.data)?;
        Ok(page)
    }

    /// Checks the rows of the listing's next page; the message names the
    /// failing field (`data[7].cached_tokens: ...`).
    pub(super) fn check<T: Row>(&mut self, rows: &[T]) -> Result<(), String> {
        if rows.len() > self.limit {
            return Err(format!(
                "data: {} rows, more than the {} asked for",
                rows.len(),
                self.limit
            ));
        }
        // foldhash, seeded per process like the groups' maps: SipHash was
        // a sixtieth of a small-window replay's instructions here.
        let mut ids: HashMap<&str, usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(rows.len(), Default::default());
        for (i, row) in rows.iter().enumerate() {
            row.check().map_err(|e| format!("data[{i}].{e}"))?;
            if let Some(first) = ids.insert(row.id(), i) {
                return Err(format!(
                    "data[{i}].{}: \"{}\" is listed before, at data[{first}]",
                    T::ID,
                    printable(row.id())
                ));
            }
            if let Some(at) = row.ordered_by() {
                self.follow::<T>(at, row.id())
                    .map_err(|e| format!("data[{i}].{e}"))?;
            }
        }
        Ok(())
    }

    /// Checks that a row ordered at `at` may come after the rows so far.
    fn follow<T: Row>(&mut self, at: DateTime<Utc>, id: &str) -> Result<(), String> {
        match self.last {
            Some(last) if at < last => Err(format!(
                "first_request_at: {} is before {} of an earlier row; rows come in first_request_at order",
                time(at),
                time(last)
            )),
            Some(last) if at == last => {
                if self.tied.is_empty() {
                    self.tied.insert(std::mem::take(&mut self.last_id));
                }
                if self.tied.contains(id) {
                    return Err(format!(
                        "{}: \"{}\" is listed before, on an earlier page",
                        T::ID,
                        printable(id)
                    ));
                }
                if self.tied.len() < MAX_TIED {
                    self.tied.insert(id.to_owned());
                }
                Ok(())
            }
            _ => {
                self.last = Some(at);
                self.tied.clear();
                self.last_id.clear();
                self.last_id.push_str(id);
                Ok(())
            }
        }
    }
}

/// Checks that a drill-down's rows all belong to `session_id` and that no
/// request is listed twice (across its pages).
pub(super) fn drill_down(
    session_id: &str,
    rows: &[crate::source::RequestRecord],
) -> Result<(), String> {
    let mut ids: HashSet<&str> = HashSet::with_capacity(rows.len());
    for r in rows {
        if r.session_id != session_id {
            return Err(format!(
                "request \"{}\" belongs to session \"{}\", not to \"{}\"",
                printable(&r.request_id),
                printable(&r.session_id),
                printable(session_id)
            ));
        }
        if !ids.insert(&r.request_id) {
            return Err(format!(
                "request \"{}\" is listed twice",
                printable(&r.request_id)
            ));
        }
    }
    Ok(())
}

/// `n` is a part of `whole` and cannot exceed it.
fn part(field: impl Display, n: u64, whole_field: &str, whole: u64) -> Result<(), String> {
    if n > whole {
        return Err(format!("{field}: {n} is above {whole_field} {whole}"));
    }
    Ok(())
}

fn labels(labels: &Labels) -> Result<(), String> {
    if labels.len() > MAX_LABELS {
        return Err(format!(
            "labels: {} labels, above the limit of {MAX_LABELS}",
            labels.len()
        ));
    }
    for (key, value) in labels {
        if key.is_empty() {
            return Err("labels: an empty key".to_owned());
        }
        if key.len() > MAX_LABEL_KEY_BYTES {
            return Err(format!(
                "labels: a key of {} bytes, above the limit of {MAX_LABEL_KEY_BYTES}",
                key.len()
            ));
        }
        if value.len() > MAX_LABEL_VALUE_BYTES {
            return Err(too_long(
                format_args!("labels.{}", printable(key)),
                value.len(),
                MAX_LABEL_VALUE_BYTES,
            ));
        }
    }
    Ok(())
}

/// `by_model.<model>.<field>`, formatted only for a message.
struct InModel<'a>(&'a str, &'static str);

impl Display for InModel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "by_model.{}.{}", printable(self.0), self.1)
    }
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
