//! The serde forms of settings that are not plain numbers or strings:
//! durations (with a unit, `7d`, `36h`, or whole seconds in `*_seconds`
//! keys), http(s) URLs, socket addresses, time zones and timestamps. Each
//! reads into the program's own type and refuses a bad value with a
//! message in the words of a configuration file (never repeating a URL,
//! which may hold a credential); each writes the value back for the
//! schemas' defaults.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;
use url::Url;

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

/// How a duration with a unit is described in a schema: a string of the
/// format `duration-with-unit` (`500ms`, `30s`, `15m`, `2h`, `7d`).
pub struct DurationText;

impl schemars::JsonSchema for DurationText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DurationText".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "format": "duration-with-unit"})
    }
}

/// Reads a string with `parse`, whose error is the whole message.
struct Parsed<F>(&'static str, F);

impl<T, F: FnOnce(&str) -> Result<T, String>> Visitor<'_> for Parsed<F> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        (self.1)(v).map_err(E::custom)
    }
}

fn parse_duration(v: &str) -> Result<Duration, String> {
    humantime::parse_duration(v).map_err(|e| format!("invalid duration `{v}`: {e}"))
}

const DURATION: &str = "a duration with a unit, such as `30s` or `15m`";

/// A duration written with a unit, such as `7d` or `36h`.
pub mod with_unit {
    use super::*;

    /// Reads a duration with a unit.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_str(Parsed(DURATION, parse_duration))
    }

    /// Writes a duration with a unit.
    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*v))
    }
}

/// A duration with a unit that must be above zero.
pub mod positive {
    use super::*;

    /// Reads a duration with a unit, above zero.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        d.deserialize_str(Parsed(DURATION, |v: &str| match parse_duration(v)? {
            d if d.is_zero() => Err("must be greater than 0".to_owned()),
            d => Ok(d),
        }))
    }

    pub use super::with_unit::serialize;
}

/// An optional duration with a unit; `null` is none.
pub mod opt_with_unit {
    use super::*;

    /// Reads an optional duration with a unit.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(with = "with_unit")] Duration);
        Option::<W>::deserialize(d).map(|w| w.map(|W(d)| d))
    }

    /// Writes an optional duration with a unit.
    pub fn serialize<S: Serializer>(v: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(d) => with_unit::serialize(d, s),
            None => s.serialize_none(),
        }
    }
}

/// `raw` as an http or https URL.
pub fn parse_http_url(raw: &str) -> Result<Url, String> {
    let url = Url::parse(raw).map_err(|e| format!("invalid url: {e}"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "must be an http or https url, got scheme `{other}`"
        )),
    }
}

/// An http or https URL.
pub mod http_url {
    use super::*;

    /// Reads an http(s) URL.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Url, D::Error> {
        d.deserialize_str(Parsed("a string", parse_http_url))
    }

    /// Writes the URL.
    pub fn serialize<S: Serializer>(v: &Url, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.as_str())
    }
}

/// An optional http or https URL; `null` is none.
pub mod opt_http_url {
    use super::*;

    /// Reads an optional http(s) URL.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(with = "http_url")] Url);
        Option::<W>::deserialize(d).map(|w| w.map(|W(u)| u))
    }

    /// Writes the URL, if any.
    pub fn serialize<S: Serializer>(v: &Option<Url>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(u) => s.serialize_str(u.as_str()),
            None => s.serialize_none(),
        }
    }
}

/// An optional listening address (`127.0.0.1:9464`); `null` is none.
pub mod opt_listen {
    use super::*;

    /// Reads an optional socket address.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(deserialize_with = "addr")] SocketAddr);
        fn addr<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
            d.deserialize_str(Parsed("a string", |v: &str| {
                v.parse().map_err(|_| {
                    format!(
                        "must be an ip address and port such as `127.0.0.1:9464`, or null to \
                         disable, got `{}`",
                        crate::printable::printable(v)
                    )
                })
            }))
        }
        Option::<W>::deserialize(d).map(|w| w.map(|W(a)| a))
    }

    /// Writes the address, if any.
    pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.collect_str(a),
            None => s.serialize_none(),
        }
    }
}

/// An IANA time zone name (`UTC`, `Europe/Berlin`).
pub mod time_zone {
    use super::*;
    use chrono_tz::Tz;

    /// Reads a time zone name.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Tz, D::Error> {
        d.deserialize_str(Parsed("a string", |v: &str| {
            v.parse::<Tz>().map_err(|_| {
                format!(
                    "unknown time zone `{}`; expected an iana name such as `UTC` or \
                     `Europe/Berlin`",
                    crate::printable::printable(v)
                )
            })
        }))
    }

    /// Writes the name.
    pub fn serialize<S: Serializer>(v: &Tz, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.name())
    }
}

/// An optional RFC 3339 timestamp, read as UTC; `null` is none.
pub mod opt_timestamp {
    use super::*;
    use chrono::{DateTime, Utc};

    /// Reads an optional timestamp.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(deserialize_with = "at")] DateTime<Utc>);
        fn at<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
            d.deserialize_str(Parsed("a string", |v: &str| {
                DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| {
                        format!(
                            "must be an rfc 3339 timestamp such as 2026-10-11T00:00:00Z, got `{}`",
                            crate::printable::printable(v)
                        )
                    })
            }))
        }
        Option::<W>::deserialize(d).map(|w| w.map(|W(t)| t))
    }

    /// Writes the timestamp, if any.
    pub fn serialize<S: Serializer>(v: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(t) => s.serialize_str(&t.to_rfc3339()),
            None => s.serialize_none(),
        }
    }
}
