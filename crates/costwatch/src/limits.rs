//! The limits every value read from a source is held to (the manual,
//! "Limits on gateway data"), and the checks every source's rows share. A
//! value no real gateway can send (tokens at `u64::MAX`, a cost of 1.7e308,
//! a 7 MB label) fails its page with the field's path, so the window is
//! tried again later and nothing of it reaches the detectors.

use std::fmt::Display;

/// Largest count of calls or tokens in one row: `u32::MAX`, four billion
/// tokens in one session.
pub(crate) const MAX_COUNT: u64 = u32::MAX as u64;
/// Largest cost of one session, one model's share of it, or one call.
pub(crate) const MAX_COST_USD: f64 = 1_000_000.0;
/// Largest price per million tokens.
pub(crate) const MAX_PRICE_USD_PER_MTOK: f64 = 10_000.0;
/// Longest id (session, request, model) and `error_type`, in bytes.
pub(crate) const MAX_ID_BYTES: usize = 256;
/// Most labels on one session.
pub(crate) const MAX_LABELS: usize = 64;
/// Longest label key, in bytes.
pub(crate) const MAX_LABEL_KEY_BYTES: usize = 256;
/// Longest label value, in bytes.
pub(crate) const MAX_LABEL_VALUE_BYTES: usize = 1024;
/// Most models in one session's `by_model`.
pub(crate) const MAX_MODELS_PER_SESSION: usize = 256;
/// Most session ids remembered that share one `first_request_at`.
pub(crate) const MAX_TIED: usize = 10_000;

/// A count of calls or tokens: at most [`MAX_COUNT`].
pub(crate) fn count(field: impl Display, n: u64) -> Result<u64, String> {
    if n > MAX_COUNT {
        return Err(format!("{field}: {n} is above the limit of {MAX_COUNT}"));
    }
    Ok(n)
}

/// A dollar figure: finite, from 0 to `max`.
pub(crate) fn usd(field: impl Display, v: f64, max: f64) -> Result<f64, String> {
    if !(v.is_finite() && (0.0..=max).contains(&v)) {
        // `1.7e308`, not three hundred digits.
        let shown = if v.abs() < 1e15 {
            v.to_string()
        } else {
            format!("{v:e}")
        };
        return Err(format!("{field}: {shown} is not between 0 and {max}"));
    }
    Ok(v)
}

/// An id: 1 to [`MAX_ID_BYTES`] bytes.
pub(crate) fn id(field: impl Display, text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{field}: empty"));
    }
    if text.len() > MAX_ID_BYTES {
        return Err(too_long(field, text.len(), MAX_ID_BYTES));
    }
    Ok(())
}

/// `field: N bytes, above the limit of M`.
pub(crate) fn too_long(field: impl Display, len: usize, max: usize) -> String {
    format!("{field}: {len} bytes, above the limit of {max}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_outside_the_limits_name_their_field() {
        assert_eq!(count("requests", 3), Ok(3));
        assert!(count("requests", MAX_COUNT + 1).is_err_and(|e| e.starts_with("requests: ")));
        assert_eq!(usd("spend", 0.25, MAX_COST_USD), Ok(0.25));
        assert!(usd("spend", -0.1, MAX_COST_USD).is_err());
        assert!(usd("spend", f64::NAN, MAX_COST_USD).is_err());
        assert_eq!(
            usd("spend", 1.7e308, MAX_COST_USD),
            Err("spend: 1.7e308 is not between 0 and 1000000".to_owned())
        );
        assert_eq!(id("model", ""), Err("model: empty".to_owned()));
        assert!(id("model", &"m".repeat(MAX_ID_BYTES + 1)).is_err_and(|e| e.contains("bytes")));
    }
}
