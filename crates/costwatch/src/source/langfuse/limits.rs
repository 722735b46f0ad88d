//! The limits every value read from Langfuse is held to: the manual's
//! "Limits on gateway data", the reference source's own constants
//! (`source/wire/check.rs`). A value outside them fails its page with the
//! field's path.

use crate::printable::printable;
pub(super) use crate::source::wire::check::{
    MAX_COST_USD, MAX_COUNT, MAX_ID_BYTES, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES, MAX_LABELS,
    MAX_TIED,
};
use std::fmt::Display;

/// Checks an id: 1 to [`MAX_ID_BYTES`] bytes.
pub(super) fn id(field: impl Display, text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{field}: empty"));
    }
    if text.len() > MAX_ID_BYTES {
        return Err(too_long(field, text.len(), MAX_ID_BYTES));
    }
    Ok(())
}

/// Checks a dollar amount: finite, from 0 to [`MAX_COST_USD`].
pub(super) fn usd(field: impl Display, v: f64) -> Result<(), String> {
    if !(v.is_finite() && (0.0..=MAX_COST_USD).contains(&v)) {
        // `1.7e308`, not three hundred digits.
        let shown = if v.abs() < 1e15 {
            v.to_string()
        } else {
            format!("{v:e}")
        };
        return Err(format!(
            "{field}: {shown} is not between 0 and {MAX_COST_USD}"
        ));
    }
    Ok(())
}

/// `field: N bytes, above the limit of M`.
pub(super) fn too_long(field: impl Display, len: usize, max: usize) -> String {
    format!("{field}: {len} bytes, above the limit of {max}")
}

/// A map key in a field path (`usageDetails.input`), printable.
pub(super) struct Key<'a>(pub &'static str, pub &'a str);

impl Display for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, printable(self.1))
    }
}
