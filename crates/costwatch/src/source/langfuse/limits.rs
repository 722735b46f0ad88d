//! The limits every value read from Langfuse is held to: the manual's
//! "Limits on gateway data", the reference source's own constants
//! (`limits.rs`). A value outside them fails its page with the
//! field's path.

use crate::limits;
pub(super) use crate::limits::{
    MAX_COST_USD, MAX_COUNT, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES, MAX_LABELS, MAX_TIED, id,
    too_long,
};
use crate::printable::printable;
use std::fmt::Display;

/// Checks a dollar amount: finite, from 0 to [`MAX_COST_USD`].
pub(super) fn usd(field: impl Display, v: f64) -> Result<(), String> {
    limits::usd(field, v, MAX_COST_USD).map(|_| ())
}

/// A map key in a field path (`usageDetails.input`), printable.
pub(super) struct Key<'a>(pub &'static str, pub &'a str);

impl Display for Key<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.0, printable(self.1))
    }
}
