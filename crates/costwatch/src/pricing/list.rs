//! A price list in the shape of the reference gateway's `GET /models`
//! answer, the one shape every price table has: its rows, their checks
//! against the limits (`limits.rs`), and the prices they
//! give.

use super::ModelPrice;
use crate::limits::{MAX_PRICE_USD_PER_MTOK, id, usd};
use crate::printable::printable;
use serde::Deserialize;
use std::collections::HashMap;

/// The `/models` answer (not paginated).
#[derive(Debug, Deserialize)]
struct ModelList {
    data: Vec<WireModel>,
}

#[derive(Debug, Deserialize)]
struct WireModel {
    id: String,
    input_usd_per_mtok: f64,
    #[serde(default)]
    cached_input_usd_per_mtok: Option<f64>,
    #[serde(default)]
    cache_write_usd_per_mtok: Option<f64>,
    output_usd_per_mtok: f64,
    #[serde(default)]
    supports_prompt_cache: Option<bool>,
    #[serde(default)]
    min_cacheable_prompt_tokens: Option<u64>,
    #[serde(default)]
    cache_lifetime_seconds: Option<u64>,
}

/// Parses and checks a price list (the reference gateway's `/models`
/// answer, `source.models_file`, the shipped table), naming the failing
/// field.
pub(crate) fn parse(body: &[u8]) -> Result<Vec<ModelPrice>, String> {
    let list: ModelList = crate::decode::json(body)?;
    catalogue(&list.data)?;
    Ok(list.data.into_iter().map(WireModel::into_record).collect())
}

impl WireModel {
    fn into_record(self) -> ModelPrice {
        let supports = self
            .supports_prompt_cache
            .unwrap_or(self.cached_input_usd_per_mtok.is_some());
        ModelPrice {
            id: self.id,
            input_usd_per_mtok: self.input_usd_per_mtok,
            cached_input_usd_per_mtok: self.cached_input_usd_per_mtok,
            cache_write_usd_per_mtok: self.cache_write_usd_per_mtok,
            output_usd_per_mtok: self.output_usd_per_mtok,
            supports_prompt_cache: supports,
            min_cacheable_prompt_tokens: self.min_cacheable_prompt_tokens.filter(|t| *t > 0),
            cache_lifetime_seconds: self.cache_lifetime_seconds.filter(|t| *t > 0),
        }
    }
}

impl WireModel {
    fn check(&self) -> Result<(), String> {
        id("id", &self.id)?;
        usd(
            "input_usd_per_mtok",
            self.input_usd_per_mtok,
            MAX_PRICE_USD_PER_MTOK,
        )?;
        usd(
            "output_usd_per_mtok",
            self.output_usd_per_mtok,
            MAX_PRICE_USD_PER_MTOK,
        )?;
        for (field, price) in [
            ("cached_input_usd_per_mtok", self.cached_input_usd_per_mtok),
            ("cache_write_usd_per_mtok", self.cache_write_usd_per_mtok),
        ] {
            if let Some(price) = price {
                usd(field, price, MAX_PRICE_USD_PER_MTOK)?;
            }
        }
        Ok(())
    }
}

/// Checks the catalogue's rows and that no model is listed twice.
fn catalogue(list: &[WireModel]) -> Result<(), String> {
    let mut ids: HashMap<&str, usize> = HashMap::with_capacity(list.len());
    for (i, m) in list.iter().enumerate() {
        m.check().map_err(|e| format!("data[{i}].{e}"))?;
        if let Some(first) = ids.insert(&m.id, i) {
            return Err(format!(
                "data[{i}].id: \"{}\" is listed before, at data[{first}]",
                printable(&m.id)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn with(mut row: Value, field: &str, value: Value) -> Value {
        row[field] = value;
        row
    }

    #[test]
    fn model_prices_are_finite_non_negative_bounded_and_listed_once() {
        let model = |id: &str| {
            json!({"id": id, "input_usd_per_mtok": 0.10, "cached_input_usd_per_mtok": 0.01,
                "cache_write_usd_per_mtok": 0.125, "output_usd_per_mtok": 0.40})
        };
        let list = |rows: Vec<Value>| parse(&serde_json::to_vec(&json!({ "data": rows })).unwrap());
        assert_eq!(list(vec![model("a"), model("b")]).unwrap().len(), 2);
        for field in [
            "input_usd_per_mtok",
            "cached_input_usd_per_mtok",
            "cache_write_usd_per_mtok",
            "output_usd_per_mtok",
        ] {
            for bad in [-1.0, 1.7e308, MAX_PRICE_USD_PER_MTOK * 2.0] {
                let row = with(model("b"), field, json!(bad));
                let err = list(vec![model("a"), row]).err().unwrap_or_default();
                assert_eq!(
                    err,
                    format!(
                        "data[1].{field}: {} is not between 0 and 10000",
                        if bad >= 1e15 {
                            format!("{bad:e}")
                        } else {
                            bad.to_string()
                        }
                    )
                );
            }
        }
        let no_cache = with(model("b"), "cached_input_usd_per_mtok", Value::Null);
        assert!(list(vec![no_cache]).is_ok());
        assert_eq!(
            list(vec![model("a"), model("b"), model("a")])
                .err()
                .unwrap_or_default(),
            "data[2].id: \"a\" is listed before, at data[0]"
        );
    }
}
