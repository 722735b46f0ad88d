//! Timestamps as sources write them: RFC 3339, read straight from the
//! common UTC forms (`2026-11-02T00:01:49.677Z`) and by chrono otherwise,
//! as serde field readers ([`time`], [`opt_time`]) and as a function
//! ([`fast_utc`]).

use chrono::{DateTime, Utc};

/// An RFC 3339 timestamp; the gateway's own form
/// (`2026-11-02T00:01:49.677Z`) is read directly, anything else by chrono.
pub(crate) fn time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    d.deserialize_str(Time)
}

/// An optional [`time`].
pub(crate) fn opt_time<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<DateTime<Utc>>, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Option<DateTime<Utc>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an RFC 3339 timestamp")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            time(d).map(Some)
        }
    }
    d.deserialize_option(V)
}

/// The visitor of [`time`].
struct Time;

impl serde::de::Visitor<'_> for Time {
    type Value = DateTime<Utc>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an RFC 3339 timestamp")
    }
    fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<Self::Value, E> {
        match fast_utc(t) {
            Some(v) => Ok(v),
            // What chrono's own `Deserialize` accepts.
            None => t
                .parse::<DateTime<chrono::FixedOffset>>()
                .map(|v| v.with_timezone(&Utc))
                .map_err(E::custom),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]` (up to nine fractional digits) followed by
/// `Z` or `+00:00`; `None` for any other shape, which the caller hands to
/// chrono.
pub(crate) fn fast_utc(t: &str) -> Option<DateTime<Utc>> {
    let b = t.as_bytes();
    let b = match b.strip_suffix(b"Z") {
        Some(head) => head,
        None => b.strip_suffix(b"+00:00")?,
    };
    if b.len() < 19
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        b.get(r)?.iter().try_fold(0u32, |acc, c| {
            c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
        })
    };
    let date = chrono::NaiveDate::from_ymd_opt(num(0..4)? as i32, num(5..7)?, num(8..10)?)?;
    let frac = &b[19..];
    let nanos = match frac {
        [] => 0,
        [b'.', digits @ ..] if (1..=9).contains(&digits.len()) => {
            num(20..20 + digits.len())? * 10u32.pow(9 - digits.len() as u32)
        }
        _ => return None,
    };
    let time =
        chrono::NaiveTime::from_hms_nano_opt(num(11..13)?, num(14..16)?, num(17..19)?, nanos)?;
    Some(date.and_time(time).and_utc())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_fast_agree_with_chrono() {
        for t in [
            "2026-11-02T00:01:49.677Z",
            "2026-11-02T00:01:49Z",
            "2026-11-02T23:59:59.123456789Z",
            "2024-02-29T12:00:00.5Z",
        ] {
            let chrono: DateTime<Utc> = serde_json::from_str(&format!("\"{t}\"")).unwrap();
            assert_eq!(fast_utc(t), Some(chrono), "{t}");
        }
        for t in [
            "2026-11-02T00:01:49+02:00",
            "2026-11-02 00:01:49Z",
            "2026-02-30T00:00:00Z",
            "2026-11-02T00:01:49.Z",
            "2026-11-02T00:01:49.1234567890Z",
        ] {
            assert_eq!(fast_utc(t), None, "{t}");
        }
    }
}
