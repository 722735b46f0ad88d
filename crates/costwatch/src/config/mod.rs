//! The configuration file, read into the settings of the components it
//! configures, and the rule files, read into `detect::rules`.
//!
//! Each section is one struct, owned by what it configures and written
//! once: its fields are what serde reads and what the program uses, each
//! with its doc, default and range ([`crate::settings`]). Loading
//! (`load/`) collects every problem (file, line, column, field path,
//! message, or the environment variable to blame) instead of stopping at
//! the first one, and resolves what a file names (secrets, paths).

mod env;
mod error;
mod load;
mod locate;
mod service;

pub use crate::detect::DetectionConfig;
pub use crate::detect::rules::{
    NoCacheRule, OversizedModelRule, RetryLoopRule, RuleMeta, Rules, Selector,
};
pub use crate::domain::Severity;
pub use crate::incidents::AlertPolicy;
pub use crate::investigate::budget::{Caps, Prices};
pub use crate::investigate::tokens::TokenizerChoice;
pub use crate::investigate::{DEFAULT_MODEL, EscalateConfig, InvestigationConfig};
pub use crate::notify::settings::{
    EmailConfig, NotifyConfig, SmtpSecurity, WebhookConfig, WebhookShape,
};
pub use crate::schedule::{CronExpr, ScheduleConfig, WindowConfig};
pub use crate::source::reference::DEFAULT_MAX_PAGES;
pub use crate::source::settings::{KindConfig, SourceConfig};
pub use crate::store::StateConfig;
pub use error::{ConfigError, Problem};
pub use load::{
    BUILTIN_RULES, builtin_rules, config_schema, load, load_rules, load_with_env, rules_schema,
};
pub use service::{ServerConfig, default_group_by};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

/// The whole, validated configuration: the file's sections ([`Sections`],
/// reached through it: `config.windows`), the source read after its kind,
/// and the rules its `rules` name.
#[derive(Debug, Clone)]
pub struct Config {
    /// File the configuration was read from.
    pub path: PathBuf,
    /// Where sessions come from.
    pub source: SourceConfig,
    /// The rules loaded from `rule_paths`, or the built-in ones.
    pub rules: Rules,
    /// Every other section.
    pub sections: Sections,
}

impl Deref for Config {
    type Target = Sections;

    fn deref(&self) -> &Sections {
        &self.sections
    }
}

impl DerefMut for Config {
    fn deref_mut(&mut self) -> &mut Sections {
        &mut self.sections
    }
}

/// The sections of a configuration file besides `source` (read apart,
/// after `source.kind`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(transform = crate::settings::in_declared_order::<Sections>)]
pub struct Sections {
    /// How time is cut into windows.
    pub windows: WindowConfig,
    /// Labels whose values form a session's peer group.
    pub group_by: Vec<String>,
    /// Where state lives.
    pub state: StateConfig,
    /// Detector tuning not tied to one rule.
    pub detection: DetectionConfig,
    /// When the detection job runs (`costwatch run`).
    pub schedule: ScheduleConfig,
    /// How findings become alerts.
    pub alerts: AlertPolicy,
    /// Where alerts go.
    pub notify: NotifyConfig,
    /// The local HTTP endpoint: `/metrics`, `/healthz` and the status page.
    pub server: ServerConfig,
    /// Escalation of flagged incidents to a capped LLM investigation.
    pub investigation: InvestigationConfig,
    /// Rule files and directories, relative to the configuration file's
    /// folder; none (the default) means the rules built into the binary.
    #[serde(rename = "rules")]
    #[schemars(example = ["rules"])]
    pub rule_paths: Vec<PathBuf>,
}

impl Default for Sections {
    fn default() -> Self {
        Sections {
            windows: WindowConfig::default(),
            group_by: default_group_by(),
            state: StateConfig::default(),
            detection: DetectionConfig::default(),
            schedule: ScheduleConfig::default(),
            alerts: AlertPolicy::default(),
            notify: NotifyConfig::default(),
            server: ServerConfig::default(),
            investigation: InvestigationConfig::default(),
            rule_paths: Vec::new(),
        }
    }
}
