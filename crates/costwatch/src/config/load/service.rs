//! The sections of the running service: `group_by`, `state`, `detection`
//! and `server`.

use super::document::Doc;
use super::to_usize;
use crate::config::locate::item;
use crate::config::raw::{RawDetection, RawServer, RawState};
use crate::config::{DetectionConfig, ServerConfig, StateConfig};

pub(super) fn check_group_by(doc: &mut Doc, group_by: &[String]) {
    for (i, label) in group_by.iter().enumerate() {
        let path = item("group_by", i);
        if doc.check(!label.is_empty(), &path, || "must not be empty".to_owned()) {
            doc.check(!group_by[..i].contains(label), &path, || {
                format!("duplicate label `{label}`")
            });
        }
    }
}

pub(super) fn state_config(doc: &mut Doc, raw: RawState) -> StateConfig {
    let known = ["sqlite:", "postgres://", "postgresql://"];
    // The URL may hold a password, so the message does not repeat it.
    doc.check(
        known.iter().any(|p| raw.url.starts_with(p)),
        "state.url",
        || "must start with `sqlite:`, `postgres://` or `postgresql://`".to_owned(),
    );
    doc.between_u64("state.max_connections", raw.max_connections, 1, 100);
    doc.positive_duration("state.lease_ttl", raw.lease_ttl.0);
    StateConfig {
        url: raw.url,
        max_connections: to_usize(raw.max_connections).max(1) as u32,
        lease_ttl: raw.lease_ttl.0,
    }
}

pub(super) fn detection_config(doc: &mut Doc, raw: RawDetection) -> DetectionConfig {
    doc.between_u64(
        "detection.baseline_samples",
        raw.baseline_samples,
        16,
        65_536,
    );
    doc.at_least_u64("detection.max_candidates", raw.max_candidates, 1);
    doc.between_u64(
        "detection.drilldown_concurrency",
        raw.drilldown_concurrency,
        1,
        64,
    );
    raw.into()
}

impl From<RawDetection> for DetectionConfig {
    fn from(raw: RawDetection) -> DetectionConfig {
        DetectionConfig {
            baseline_samples: to_usize(raw.baseline_samples),
            max_candidates: to_usize(raw.max_candidates),
            drilldown_concurrency: to_usize(raw.drilldown_concurrency),
        }
    }
}

impl Default for DetectionConfig {
    /// The defaults of `detection`.
    fn default() -> Self {
        RawDetection::default().into()
    }
}

pub(super) fn server_config(doc: &mut Doc, raw: RawServer) -> Option<ServerConfig> {
    let listen = match raw.listen.as_deref() {
        None => None,
        Some(addr) => match addr.parse::<std::net::SocketAddr>() {
            Ok(addr) => Some(addr),
            Err(_) => {
                doc.check(false, "server.listen", || {
                    format!("must be an ip address and port such as `127.0.0.1:9464`, or null to disable, got `{addr}`")
                });
                return None;
            }
        },
    };
    Some(ServerConfig { listen })
}
