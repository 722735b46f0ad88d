//! The settings of an `oversized_model` rule.

use super::{Rule, RuleSettings, Rules};
use crate::settings::Settings;
use crate::settings::units::positive;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// An `oversized_model` rule: a premium model used for tiny calls where
/// the group does not normally do so (`detect::oversized_model`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "OversizedModelRule")]
#[schemars(transform = crate::settings::in_declared_order::<OversizedModel>)]
pub struct OversizedModel {
    /// A model is premium when its blended price is at least this many times
    /// the cheapest model in use.
    #[schemars(range(min = 1.0))]
    pub premium_price_ratio: f64,
    /// Largest average prompt per premium call that counts as tiny, in tokens.
    pub max_avg_input_tokens: u64,
    /// Largest average completion per premium call that counts as tiny, in
    /// tokens.
    pub max_avg_output_tokens: u64,
    /// Smallest share of the session's cost spent on tiny premium calls.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_premium_cost_share: f64,
    /// Fewest peers before the group's habits are judged at all.
    #[schemars(range(min = 1))]
    pub min_peers: usize,
    /// When more than this share of the group's sessions make tiny premium
    /// calls, that is the group's normal pattern and nothing is flagged.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub max_group_share: f64,
    /// Below this many peers the group's baseline is thin: a finding needs
    /// at most half of `max_group_share` of the peers to make mostly tiny
    /// premium calls, and is marked `cold_start`.
    #[schemars(range(min = 1))]
    pub cold_start_peers: usize,
    /// The model this group's calls are meant for, declared by the team
    /// (say, after a deliberate move to a premium model): tiny calls to it,
    /// or to a model no dearer, are its design and never flagged, and a
    /// finding prices the calls on it rather than on the model the group's
    /// history uses most. Unset, costwatch never concludes by itself that a
    /// move to a premium model was meant.
    #[schemars(length(min = 1))]
    pub design_model: Option<String>,
    /// How long a group's tiny calls must have gone to a premium model
    /// without a pause (a window whose sessions made none) before its
    /// history takes that as its new normal: until then its sessions are
    /// flagged, however many do it, and its history keeps what it did
    /// before. A duration with a unit, such as `7d` or `36h`.
    #[serde(with = "positive")]
    #[schemars(with = "crate::settings::units::DurationText")]
    pub accept_after: Duration,
    /// Smallest estimated waste worth a finding, in USD.
    #[schemars(range(min = 0.0))]
    pub min_impact_usd: f64,
}

impl Default for OversizedModel {
    fn default() -> Self {
        OversizedModel {
            premium_price_ratio: 5.0,
            max_avg_input_tokens: 1000,
            max_avg_output_tokens: 500,
            min_premium_cost_share: 0.0,
            min_peers: 2,
            max_group_share: 0.5,
            cold_start_peers: 20,
            design_model: None,
            accept_after: Duration::from_secs(7 * 86_400),
            min_impact_usd: 0.0,
        }
    }
}

/// Why the settings that read a move from the newest sessions went.
const MOVE_READ_FROM_SESSIONS: &str = "costwatch no longer concludes that a group moved to a premium model on purpose; declare the move with design_model, and accept_after says when an undeclared one becomes the group's normal";

impl Settings for OversizedModel {}

impl RuleSettings for OversizedModel {
    const KIND: &'static str = crate::domain::Kind::OversizedModel.as_str();
    const REMOVED: &'static [(&'static str, &'static str)] = &[
        ("recent_sessions", MOVE_READ_FROM_SESSIONS),
        ("moved_after_sessions", MOVE_READ_FROM_SESSIONS),
        ("moved_wait_minutes", MOVE_READ_FROM_SESSIONS),
    ];

    fn list(rules: &mut Rules) -> &mut Vec<Rule<OversizedModel>> {
        &mut rules.oversized_model
    }
}
