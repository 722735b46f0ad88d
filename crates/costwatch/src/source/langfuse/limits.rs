//! The limits every value read from Langfuse is held to: the README's
//! "Limits on gateway data", the same numbers the reference source checks
//! (`source/wire/check.rs`). A value outside them fails its page with the
//! field's path.

use crate::printable::printable;
use std::fmt::Display;

/// Largest count of tokens in one call: `u32::MAX`.
pub(super) const MAX_COUNT: u64 = u32::MAX as u64;
/// Largest cost of one call, in dollars.
pub(super) const MAX_COST_USD: f64 = 1_000_000.0;
/// Longest id (observation, session, model) and `error_type`, in bytes.
pub(super) const MAX_ID_BYTES: usize = 256;
/// Most labels on one call.
pub(super) const MAX_LABELS: usize = 64;
/// Longest label key, in bytes.
pub(super) const MAX_LABEL_KEY_BYTES: usize = 256;
/// Longest label value, in bytes.
pub(super) const MAX_LABEL_VALUE_BYTES: usize = 1024;
/// Most observation ids remembered that share one `startTime`.
pub(super) const MAX_TIED: usize = 10_000;

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
