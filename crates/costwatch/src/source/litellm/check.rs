//! The limits every value read from LiteLLM is held to: the manual's
//! "Limits on gateway data", the reference gateway's own constants
//! (`limits.rs`). A value outside them fails its page with the field's
//! path (`data[3].prompt_tokens: -5 is negative`).

use crate::limits::count as count_within;
pub(super) use crate::limits::{
    MAX_COST_USD, MAX_COUNT, MAX_ID_BYTES, MAX_LABEL_KEY_BYTES, MAX_LABEL_VALUE_BYTES, MAX_LABELS,
    MAX_PRICE_USD_PER_MTOK, id, too_long, usd,
};
use serde_json::Value;

/// A token count read from a signed column: not negative, within
/// [`MAX_COUNT`].
pub(super) fn count(field: &str, n: i64) -> Result<u64, String> {
    let n = u64::try_from(n).map_err(|_| format!("{field}: {n} is negative"))?;
    count_within(field, n)
}

/// A token count read from free-form JSON (`usage_object` is the
/// provider's own usage): an integer (or a float without fraction), not
/// negative, within [`MAX_COUNT`].
pub(super) fn json_count(field: &str, v: &Value) -> Result<u64, String> {
    if let Some(n) = v.as_u64() {
        return count_within(field, n);
    }
    if let Some(n) = v.as_i64() {
        return Err(format!("{field}: {n} is negative"));
    }
    match v.as_f64() {
        Some(f) if f < 0.0 => Err(format!("{field}: {f} is negative")),
        Some(f) if f.fract() == 0.0 && f <= MAX_COUNT as f64 => Ok(f as u64),
        Some(f) if f.fract() == 0.0 => {
            Err(format!("{field}: {f:e} is above the limit of {MAX_COUNT}"))
        }
        _ => Err(format!("{field}: expected a token count, got {}", kind(v))),
    }
}

/// Text of at most `max` bytes.
pub(super) fn at_most(field: &str, text: &str, max: usize) -> Result<(), String> {
    if text.len() > max {
        return Err(too_long(field, text.len(), max));
    }
    Ok(())
}

/// What kind of JSON value `v` is, for messages.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_are_held_to_the_limits() {
        assert_eq!(count("prompt_tokens", 12), Ok(12));
        assert_eq!(
            count("prompt_tokens", -5),
            Err("prompt_tokens: -5 is negative".to_owned())
        );
        assert!(count("x", i64::MAX).is_err_and(|e| e.contains("above the limit")));
        assert_eq!(json_count("x", &json!(7)), Ok(7));
        assert_eq!(json_count("x", &json!(7.0)), Ok(7));
        assert_eq!(
            json_count("x", &json!(-1)),
            Err("x: -1 is negative".to_owned())
        );
        assert!(json_count("x", &json!(7.5)).is_err_and(|e| e.contains("expected a token count")));
        assert!(json_count("x", &json!("7")).is_err_and(|e| e.contains("a string")));
        assert!(json_count("x", &json!(1e30)).is_err_and(|e| e.contains("above the limit")));
        assert!(json_count("x", &json!(u64::MAX)).is_err_and(|e| e.contains("above the limit")));
    }

    #[test]
    fn costs_must_be_finite_and_bounded() {
        assert_eq!(usd("spend", 0.25, MAX_COST_USD), Ok(0.25));
        assert!(usd("spend", -0.1, MAX_COST_USD).is_err());
        assert!(usd("spend", f64::NAN, MAX_COST_USD).is_err());
        let e = usd("spend", 1.7e308, MAX_COST_USD)
            .err()
            .unwrap_or_default();
        assert_eq!(e, "spend: 1.7e308 is not between 0 and 1000000");
    }
}
