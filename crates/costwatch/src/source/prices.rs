//! Prices for calls a source does not price: the source's own catalogue,
//! then `source.models_file`, then the table shipped inside the binary.

use super::ModelPrice;

/// Model prices by id, first match wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceTable {
    models: Vec<ModelPrice>,
}

impl PriceTable {
    /// A table of `models`.
    pub fn new(models: Vec<ModelPrice>) -> PriceTable {
        PriceTable { models }
    }

    /// The prices of `model`, if known.
    pub fn get(&self, model: &str) -> Option<&ModelPrice> {
        self.models.iter().find(|m| m.id == model)
    }
}
