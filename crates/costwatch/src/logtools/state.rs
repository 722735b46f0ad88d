//! costwatch's own read-only tools, over its state database, so that a
//! team's agent can ask what wasted money and why: `list_findings`,
//! `list_incidents`, `get_incident` (its sessions and investigations) and
//! `get_baseline` (what a group's sessions usually look like).
//!
//! Bounded like the log tools: at most 50 rows a call, a range of at most
//! [`LONGEST_RANGE`], defaulting to the last week. Findings and incidents
//! hold session ids, labels, figures and the investigation's summary,
//! never a secret: the state database stores none.

use super::args::{Args, MAX_LIMIT};
use super::rows::{object, time};
use super::{Answer, ToolDef};
use crate::clock::Clock;
use crate::detect::{Finding, Kind};
use crate::domain::Window;
use crate::source::links::SessionLinks;
use crate::store::inspect::{FindingQuery, IncidentQuery, IncidentRow, Inspect};
use crate::store::{StoreError, WindowStore};
use chrono::TimeDelta;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// The longest range `list_findings` and `list_incidents` read.
pub const LONGEST_RANGE: TimeDelta = TimeDelta::days(31);
/// The range read when none is given: the last week.
const DEFAULT_RANGE: TimeDelta = TimeDelta::days(7);
/// Findings `get_incident` returns, newest first.
const INCIDENT_FINDINGS: usize = 20;

/// costwatch's own tools, in the order they are listed.
pub const STATE_TOOLS: [&str; 4] = [
    "list_findings",
    "list_incidents",
    "get_incident",
    "get_baseline",
];

fn kind_argument() -> Value {
    json!({"type": "string", "enum": Kind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>()})
}

fn range_arguments(what: &str) -> Map<String, Value> {
    let time = |d: String| json!({"type": "string", "format": "date-time", "description": d});
    let mut m = Map::new();
    m.insert(
        "start".into(),
        time(format!(
            "{what} at or after this, RFC 3339 UTC; default: a week ago."
        )),
    );
    m.insert(
        "end".into(),
        time("Before this, RFC 3339 UTC; at most 31 days after start.".into()),
    );
    m
}

fn arguments(mut properties: Map<String, Value>, extra: Value, required: &[&str]) -> Value {
    if let Value::Object(extra) = extra {
        properties.extend(extra);
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn limit_argument() -> Value {
    json!({"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": MAX_LIMIT})
}

fn finding_schema() -> Value {
    object(json!({
        "kind": {"type": "string"},
        "session_id": {"type": "string"},
        "window_start": {"type": "string", "format": "date-time"},
        "window_end": {"type": "string", "format": "date-time"},
        "rule": {"type": "string"},
        "group": {"type": "string"},
        "severity": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "cost_usd": {"type": "number"},
        "impact_usd": {"type": "number"},
        "explanation": {"type": "string"},
        "what_to_do": {"type": "string"},
        "link": {"type": ["string", "null"], "description": "The session in the team's own tool."},
        "evidence": {},
    }))
}

fn incident_schema() -> Value {
    object(json!({
        "fingerprint": {"type": "string"},
        "status": {"type": "string", "enum": ["open", "resolved"]},
        "kind": {"type": "string"},
        "rule": {"type": "string"},
        "group": {"type": "string"},
        "severity": {"type": "string"},
        "started": {"type": "string", "format": "date-time"},
        "last_finding": {"type": "string", "format": "date-time"},
        "session_count": {"type": "integer", "minimum": 0},
        "impact_usd": {"type": "number"},
        "updated_at": {"type": "string", "format": "date-time"},
    }))
}

fn listing_schema(row: Value) -> Value {
    object(json!({
        "data": {"type": "array", "items": row},
        "more": {"type": "boolean", "description": "Whether more rows match than were returned."},
    }))
}

/// costwatch's own tools with their schemas, in [`STATE_TOOLS`] order.
pub fn state_tool_defs() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "list_findings",
            title: "Wasteful sessions found",
            description: "Sessions costwatch found wasting money (no_cache, oversized_model, \
                          retry_loop), newest first: the session, its group, cost, impact \
                          (what could have been saved), the evidence and one sentence why.",
            input_schema: arguments(
                range_arguments("Found in a window starting"),
                json!({"kind": kind_argument(), "group": {"type": "string", "description": "Peer group, e.g. feature=checkout."}, "limit": limit_argument()}),
                &[],
            ),
            output_schema: listing_schema(finding_schema()),
        },
        ToolDef {
            name: "list_incidents",
            title: "Incidents",
            description: "Incidents (one rule and peer group, alerted once), most recently \
                          active first: status, kind, sessions, impact in dollars.",
            input_schema: arguments(
                range_arguments("Active"),
                json!({
                    "status": {"type": "string", "enum": ["open", "resolved"]},
                    "kind": kind_argument(),
                    "group": {"type": "string"},
                    "limit": limit_argument(),
                }),
                &[],
            ),
            output_schema: listing_schema(incident_schema()),
        },
        ToolDef {
            name: "get_incident",
            title: "One incident",
            description: "One incident by fingerprint (or a unique beginning of it): its \
                          newest findings (the sessions) and its investigations (summary, \
                          cost, stop reason).",
            input_schema: arguments(
                Map::new(),
                json!({"fingerprint": {"type": "string"}}),
                &["fingerprint"],
            ),
            output_schema: object(json!({
                "incident": incident_schema(),
                "findings": {"type": "array", "items": finding_schema()},
                "findings_total": {"type": "integer", "minimum": 0},
                "investigations": {"type": "array", "items": {"type": "object"}},
            })),
        },
        ToolDef {
            name: "get_baseline",
            title: "A group's baseline",
            description: "What a peer group's recent sessions look like, the baseline findings \
                          are judged against: sessions kept, median calls per session and its \
                          spread, median cached share, the usual model, and since when its \
                          tiny calls have gone to a premium model.",
            input_schema: arguments(
                Map::new(),
                json!({"group": {"type": "string", "description": "Peer group as findings name it, e.g. feature=checkout."}}),
                &["group"],
            ),
            output_schema: object(json!({
                "group": {"type": "string"},
                "sessions": {"type": "integer", "minimum": 0},
                "median_requests": {"type": "number"},
                "log_requests_sigma": {"type": "number"},
                "cache_sessions": {"type": "integer", "minimum": 0},
                "median_cached_share": {"type": ["number", "null"]},
                "usual_model": {"type": ["string", "null"]},
                "premium_since": {"type": ["string", "null"]},
            })),
        },
    ]
}

/// costwatch's own tools over a state store.
pub struct StateTools<St> {
    store: St,
    clock: Arc<dyn Clock>,
    links: Option<SessionLinks>,
}

impl<St: Inspect + WindowStore> StateTools<St> {
    /// The tools over `store`, reading "now" from `clock`.
    pub fn new(store: St, clock: Arc<dyn Clock>) -> StateTools<St> {
        StateTools {
            store,
            clock,
            links: None,
        }
    }

    /// Links each finding's session in the team's own tool.
    pub fn with_links(mut self, links: Option<SessionLinks>) -> StateTools<St> {
        self.links = links;
        self
    }

    /// Runs tool `name` with `arguments`.
    pub async fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Answer, StoreError> {
        let a = Args(arguments);
        match name {
            "list_findings" => self.list_findings(&a).await,
            "list_incidents" => self.list_incidents(&a).await,
            "get_incident" => self.get_incident(&a).await,
            "get_baseline" => self.get_baseline(&a).await,
            other => Ok(Answer::Refused(format!("unknown tool `{other}`"))),
        }
    }

    /// `[start, end)` as given, else the last week.
    fn range(&self, a: &Args<'_>) -> Result<Window, String> {
        Ok(a.range(LONGEST_RANGE)?.unwrap_or_else(|| {
            let now = self.clock.now();
            Window {
                start: now - DEFAULT_RANGE,
                end: now,
            }
        }))
    }

    async fn list_findings(&self, a: &Args<'_>) -> Result<Answer, StoreError> {
        let checked = (|| {
            a.only(&["start", "end", "kind", "group", "limit"])?;
            let kinds = kind(a)?.into_iter().collect();
            let group = a.optional_str("group")?.map(str::to_owned);
            Ok::<_, String>((self.range(a)?, kinds, group, a.limit()?))
        })();
        let (range, kinds, group, limit) = match checked {
            Ok(c) => c,
            Err(why) => return Ok(Answer::Refused(why)),
        };
        let rows = self
            .store
            .list_findings(&FindingQuery {
                kinds,
                group,
                since: Some(range.start),
                until: Some(range.end),
                limit: Some(limit + 1),
            })
            .await?;
        Ok(listing(rows, limit, |f| finding(f, self.links.as_ref())))
    }

    async fn list_incidents(&self, a: &Args<'_>) -> Result<Answer, StoreError> {
        let checked = (|| {
            a.only(&["start", "end", "status", "kind", "group", "limit"])?;
            let open = a
                .choice("status", &["open", "resolved"])?
                .map(|s| s == "open");
            let kinds = kind(a)?
                .map(|k| k.as_str().to_owned())
                .into_iter()
                .collect();
            let group = a.optional_str("group")?.map(str::to_owned);
            Ok::<_, String>((self.range(a)?, open, kinds, group, a.limit()?))
        })();
        let (range, open, kinds, group, limit) = match checked {
            Ok(c) => c,
            Err(why) => return Ok(Answer::Refused(why)),
        };
        let rows = self
            .store
            .list_incidents(&IncidentQuery {
                kinds,
                group,
                open,
                since: Some(range.start),
                until: Some(range.end),
                limit: Some(limit + 1),
            })
            .await?;
        Ok(listing(rows, limit, incident))
    }

    async fn get_incident(&self, a: &Args<'_>) -> Result<Answer, StoreError> {
        let id = match a
            .only(&["fingerprint"])
            .and_then(|()| a.required_str("fingerprint"))
        {
            Ok(id) => id.to_ascii_lowercase(),
            Err(why) => return Ok(Answer::Refused(why)),
        };
        let mut found = self.store.incidents_by_id(&id).await?;
        let row = match found.len() {
            0 => {
                return Ok(Answer::Refused(format!(
                    "fingerprint: no incident `{id}`; list_incidents names them"
                )));
            }
            1 => found.remove(0),
            n => {
                return Ok(Answer::Refused(format!(
                    "fingerprint: `{id}` begins {n} incidents' fingerprints; give more of it"
                )));
            }
        };
        let (findings, total) = self
            .store
            .findings_of(&row.incident, INCIDENT_FINDINGS)
            .await?;
        let investigations: Vec<Value> = self
            .store
            .investigations_of(&row.incident.fingerprint)
            .await?
            .iter()
            .map(|i| {
                let r = &i.report;
                json!({
                    "started": time(i.created_at),
                    "run_id": r.run_id,
                    "model": r.model,
                    "summary": r.summary,
                    "cost_usd": r.cost_usd,
                    "stop_reason": r.stop_reason,
                    "stop_detail": r.stop_detail,
                    "rounds": r.rounds,
                    "tool_calls": r.tool_calls,
                })
            })
            .collect();
        Ok(Answer::Done(json!({
            "incident": incident(&row),
            "findings": findings
                .iter()
                .map(|f| finding(f, self.links.as_ref()))
                .collect::<Vec<_>>(),
            "findings_total": total,
            "investigations": investigations,
        })))
    }

    async fn get_baseline(&self, a: &Args<'_>) -> Result<Answer, StoreError> {
        let group = match a.only(&["group"]).and_then(|()| a.required_str("group")) {
            Ok(g) => g.to_owned(),
            Err(why) => return Ok(Answer::Refused(why)),
        };
        let mut baselines = self
            .store
            .load_baselines(std::slice::from_ref(&group))
            .await?;
        let Some(b) = baselines.remove(&group) else {
            return Ok(Answer::Refused(format!(
                "group: no baseline for `{group}`; groups are named as in findings, e.g. feature=checkout"
            )));
        };
        let stats = b.stats();
        Ok(Answer::Done(json!({
            "group": group,
            "sessions": stats.peers,
            "median_requests": stats.median_requests(),
            "log_requests_sigma": stats.log_req_sigma,
            "cache_sessions": stats.cache_peers,
            "median_cached_share": stats.cache_median,
            "usual_model": stats.usual_model,
            "premium_since": stats.premium_since.map(time),
        })))
    }
}

/// The first `limit` of `rows` (read one more than that) as a listing,
/// saying whether there were more.
fn listing<T>(rows: Vec<T>, limit: usize, row: impl Fn(&T) -> Value) -> Answer {
    let more = rows.len() > limit;
    let data: Vec<Value> = rows.iter().take(limit).map(row).collect();
    Answer::Done(json!({"data": data, "more": more}))
}

/// `kind`, if given.
fn kind(a: &Args<'_>) -> Result<Option<Kind>, String> {
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    Ok(a.choice("kind", &names)?
        .and_then(|k| Kind::ALL.into_iter().find(|x| x.as_str() == k)))
}

/// A finding as a row.
fn finding(f: &Finding, links: Option<&SessionLinks>) -> Value {
    json!({
        "kind": f.kind.as_str(),
        "session_id": f.session_id,
        "window_start": time(f.window.start),
        "window_end": time(f.window.end),
        "rule": f.rule,
        "group": f.group,
        "severity": f.severity,
        "labels": f.labels,
        "cost_usd": f.cost_usd,
        "impact_usd": f.impact_usd,
        "explanation": f.explanation,
        "what_to_do": crate::detect::remedy::what_to_do(f.kind, &f.evidence),
        "link": links.and_then(|l| l.session(&f.session_id)),
        "evidence": f.evidence,
    })
}

/// An incident as a row.
fn incident(r: &IncidentRow) -> Value {
    let i = &r.incident;
    json!({
        "fingerprint": i.fingerprint,
        "status": if i.firing { "open" } else { "resolved" },
        "kind": i.kind,
        "rule": i.rule,
        "group": i.group,
        "severity": i.severity,
        "started": time(i.started),
        "last_finding": time(i.last_finding),
        "session_count": i.session_count,
        "impact_usd": i.impact_usd,
        "updated_at": time(r.updated_at),
    })
}
