//! How rule files write durations: whole seconds (`*_seconds` keys, alone
//! or per model) and durations with a unit (`7d`, `36h`).

use serde::{Deserialize, Deserializer, Serializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// A duration written as whole seconds.
pub mod seconds {
    use super::*;

    /// Reads whole seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_secs)
    }

    /// Writes whole seconds.
    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(v.as_secs())
    }
}

/// Durations by model, written as whole seconds.
pub mod seconds_by_model {
    use super::*;

    /// Reads a map of whole seconds.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Duration>, D::Error> {
        let secs = BTreeMap::<String, u64>::deserialize(d)?;
        Ok(secs
            .into_iter()
            .map(|(m, s)| (m, Duration::from_secs(s)))
            .collect())
    }

    /// Writes a map of whole seconds.
    pub fn serialize<S: Serializer>(
        v: &BTreeMap<String, Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_map(v.iter().map(|(m, d)| (m, d.as_secs())))
    }
}

/// A duration written with a unit, such as `7d` or `36h`.
pub mod with_unit {
    use super::*;

    /// Reads a duration with a unit.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text)
            .map_err(|e| serde::de::Error::custom(format!("invalid duration `{text}`: {e}")))
    }

    /// Writes a duration with a unit.
    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*v))
    }
}
