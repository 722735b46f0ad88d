//! The `detection` section: detector tuning not tied to one rule.

use crate::settings::Settings;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Detector tuning not tied to one rule.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<DetectionConfig>)]
pub struct DetectionConfig {
    /// Recent sessions kept per group as its baseline.
    #[schemars(range(min = 16, max = 65_536))]
    pub baseline_samples: usize,
    /// Largest number of candidates kept in memory for one window; beyond
    /// it the window is read a second time and judged as it streams.
    #[schemars(range(min = 1))]
    pub max_candidates: usize,
    /// Concurrent drill-down requests.
    #[schemars(range(min = 1, max = 64))]
    pub drilldown_concurrency: usize,
}

impl Default for DetectionConfig {
    fn default() -> Self {
        DetectionConfig {
            baseline_samples: 512,
            max_candidates: 10_000,
            drilldown_concurrency: 4,
        }
    }
}

impl Settings for DetectionConfig {}
