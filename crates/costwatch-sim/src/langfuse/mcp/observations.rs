//! `listObservations` and `getObservation`
//! (`features/observations/tools/listObservations.ts`, `getObservation.ts`,
//! `schema.ts`): the observations of the v2 API ([`super::super::paging`]
//! selects and orders them, [`super::super::observation`] writes them),
//! projected to the fields asked for (compact defaults, `["*"]`, or named
//! fields) with a `url` to the trace, `limit` rows a page and the v2
//! cursor in `meta.cursor`.

use super::filters::{self, Filter};
use super::input::{Args, Failure};
use super::json::Node;
use super::tools::{LEVELS, TYPES};
use crate::dataset::Dataset;
use crate::langfuse::paging::{Cursor, Entry, Listing, decode_cursor};
use crate::langfuse::query::{Groups, ObservationsQuery};
use crate::langfuse::{LangfuseSim, PROJECT_ID, Shape, observation};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use std::sync::PoisonError;
use url::Url;

/// What a call runs against.
pub(super) struct Ctx<'a> {
    pub sim: &'a LangfuseSim,
    /// The simulator's horizon.
    pub now: Option<DateTime<Utc>>,
    /// The product's base URL (`NEXTAUTH_URL`): the request's host.
    pub base: &'a str,
}

/// One observation field of the MCP tools (`schema.ts`).
pub(super) struct FieldDef {
    pub name: &'static str,
    pub ty: &'static str,
    pub nullable: bool,
    pub default: bool,
    pub expensive: bool,
    pub sensitive: bool,
    /// Needs a selective scope (`requiresScope`).
    pub scoped: bool,
    pub description: Option<&'static str>,
}

const fn f(name: &'static str, ty: &'static str, flags: &'static str) -> FieldDef {
    // Flags: n nullable, d default, e expensive, s sensitive, r requires scope.
    let b = flags.as_bytes();
    let mut has = [false; 5];
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'n' => has[0] = true,
            b'd' => has[1] = true,
            b'e' => has[2] = true,
            b's' => has[3] = true,
            b'r' => has[4] = true,
            _ => {}
        }
        i += 1;
    }
    FieldDef {
        name,
        ty,
        nullable: has[0],
        default: has[1],
        expensive: has[2],
        sensitive: has[3],
        scoped: has[4],
        description: None,
    }
}

const fn described(mut def: FieldDef, text: &'static str) -> FieldDef {
    def.description = Some(text);
    def
}

/// The scope the expensive fields need.
pub(super) const SCOPE_REQUIREMENT: &str =
    "Requires traceId, an exact id filter, or both fromStartTime and toStartTime.";

/// Every field, group by group in `OBSERVATION_FIELD_GROUPS_PUBLIC_API`
/// order (core, basic, time, io, metadata, model, usage, prompt, metrics,
/// trace_context).
pub(super) const FIELDS: [FieldDef; 39] = [
    f("id", "string", "d"),
    f("traceId", "string", "nd"),
    f("startTime", "datetime", "d"),
    f("endTime", "datetime", "nd"),
    f("projectId", "string", "s"),
    f("parentObservationId", "string", "nd"),
    f("type", "string", "d"),
    f("name", "string", "nd"),
    f("level", "string", "d"),
    f("statusMessage", "string", "nd"),
    f("version", "string", "n"),
    f("environment", "string", "n"),
    f("bookmarked", "boolean", ""),
    f("public", "boolean", ""),
    f("userId", "string", "ns"),
    f("sessionId", "string", "ns"),
    described(
        f("isRootObservation", "boolean", "d"),
        "Whether this observation is a logical root. App-root observations can be roots while retaining a non-null parentObservationId.",
    ),
    f("completionStartTime", "datetime", "n"),
    f("createdAt", "datetime", ""),
    f("updatedAt", "datetime", ""),
    f("input", "unknown", "esr"),
    f("output", "unknown", "esr"),
    described(
        f("metadata", "record", "esr"),
        "Metadata values are truncated to 200 UTF-8 characters per key by default. When requesting metadata explicitly, pass expandMetadataKeys with the keys that may need full values.",
    ),
    f("providedModelName", "string", "nd"),
    f("internalModelId", "string", "n"),
    f("modelParameters", "record", "nes"),
    f("usageDetails", "map<string, number>", ""),
    f("costDetails", "map<string, number>", ""),
    f("totalCost", "number", "n"),
    f("usagePricingTierId", "string", "n"),
    f("usagePricingTierName", "string", "n"),
    f("promptId", "string", "n"),
    f("promptName", "string", "n"),
    f("promptVersion", "number", "n"),
    f("latency", "number", "nd"),
    f("timeToFirstToken", "number", "n"),
    f("tags", "array", "s"),
    f("release", "string", "n"),
    f("traceName", "string", "ns"),
];

/// Every field group: the rows are read whole and projected.
const ALL_GROUPS: Groups = Groups {
    basic: true,
    time: true,
    io: true,
    metadata: true,
    model: true,
    usage: true,
    prompt: true,
    metrics: true,
    trace_context: true,
};

/// Fields that need a selective scope, to project or to filter on.
const EXPENSIVE: [&str; 3] = ["input", "output", "metadata"];

/// `ObservationFieldsSchema`: the `fields` argument and its checks.
fn fields_arg(a: &mut Args<'_>) -> Option<Vec<String>> {
    let fields = a.opt_strings("fields")?;
    if fields.is_empty() {
        a.issue(
            "fields",
            "Fields array cannot be empty. Use undefined for defaults or specify fields.",
        );
        return None;
    }
    if fields.iter().any(|f| f == "*") && fields.len() > 1 {
        a.issue(
            "fields",
            "Use either fields: [\"*\"] or explicit field names. Mixed wildcard projection is invalid.",
        );
        return None;
    }
    for field in &fields {
        if field != "*" && !FIELDS.iter().any(|d| d.name == field) {
            a.issue(
                "fields",
                format!("Invalid observation field \"{field}\". Call getObservationFieldSchema for accepted fields."),
            );
        }
    }
    Some(fields)
}

/// `getProjectionFields`.
fn projection(fields: Option<&[String]>) -> Vec<&'static str> {
    match fields {
        None => FIELDS
            .iter()
            .filter(|d| d.default)
            .map(|d| d.name)
            .collect(),
        Some([star]) if star == "*" => FIELDS.iter().map(|d| d.name).collect(),
        Some(names) => names
            .iter()
            .filter_map(|n| FIELDS.iter().find(|d| d.name == n).map(|d| d.name))
            .collect(),
    }
}

/// The query of the v2 API these arguments amount to.
pub(super) fn scope(
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
    kind: Option<String>,
    is_root: Option<bool>,
) -> ObservationsQuery {
    ObservationsQuery {
        fields: ALL_GROUPS,
        limit: 1,
        cursor: None,
        cursor_text: None,
        from,
        to,
        kind,
        level: None,
        name: None,
        user_id: None,
        session_id: None,
        trace_id: None,
        version: None,
        parent_observation_id: None,
        is_root,
        environments: Vec::new(),
    }
}

/// An observation's v2 row with every field group.
pub(super) fn row_of(entry: &Entry<'_>, shape: &Shape, dataset: &Dataset) -> Map<String, Value> {
    match observation::to_json(entry, &ALL_GROUPS, shape, dataset) {
        Value::Object(row) => row,
        _ => Map::new(),
    }
}

/// The link to the observation in the product (`buildObservationUrl`).
fn url(base: &str, trace_id: &str, id: &str) -> Option<String> {
    let mut u = Url::parse(base).ok()?;
    u.path_segments_mut()
        .ok()?
        .pop_if_empty()
        .extend(["project", PROJECT_ID, "traces", trace_id]);
    u.query_pairs_mut().append_pair("observation", id);
    Some(u.to_string())
}

/// `projectObservation` and the `url` beside it.
fn project(row: &Map<String, Value>, fields: &[&str], base: &str) -> Node {
    let mut out: Vec<(String, Node)> = Vec::with_capacity(fields.len() + 1);
    for &name in fields {
        let value = match name {
            "providedModelName" if row.contains_key("model") => row.get("model"),
            other => row.get(other),
        };
        if let Some(v) = value
            && !out.iter().any(|(k, _)| k == name)
        {
            out.push((name.to_owned(), Node::Value(v.clone())));
        }
    }
    let trace = row
        .get("traceId")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = row.get("id").and_then(Value::as_str).unwrap_or_default();
    if !trace.is_empty()
        && let Some(link) = url(base, trace, id)
    {
        out.push(("url".to_owned(), Node::Value(json!(link))));
    }
    Node::Object(out)
}

/// `assertAllowedExpensiveObservationAccess`.
fn guard(
    fields: &[&str],
    filters: &[Filter],
    trace_id: Option<&str>,
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
) -> Result<(), Failure> {
    let mut columns: Vec<&str> = EXPENSIVE
        .into_iter()
        .filter(|c| fields.contains(c) || filters.iter().any(|f| f.column == *c))
        .collect();
    if columns.is_empty() {
        return Ok(());
    }
    let bounded = matches!((from, to), (Some(a), Some(b)) if a < b);
    if trace_id.is_some_and(|t| !t.is_empty())
        || filters.iter().any(Filter::is_id_filter)
        || bounded
    {
        return Ok(());
    }
    columns.sort_unstable();
    Err(Failure::Request(format!(
        "Accessing observation {} requires traceId, an id filter, or both fromStartTime and toStartTime.",
        columns.join(", ")
    )))
}

/// The cursor argument, decoded as `EncodedObservationsCursorV2` decodes it.
fn cursor_arg(text: &str) -> Result<Cursor, Failure> {
    decode_cursor(text).map_err(|issue| match issue {
        None => Failure::Request("Invalid cursor format".to_owned()),
        Some(issue) => {
            let path: Vec<String> = issue["path"]
                .as_array()
                .map(|p| {
                    p.iter()
                        .skip(1)
                        .map(|s| s.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let message = issue["message"].as_str().unwrap_or_default();
            Failure::Validation(vec![format!("{}: {message}", path.join("."))])
        }
    })
}

/// `listObservations`.
pub(super) fn list(ctx: &Ctx<'_>, arguments: Option<&Value>) -> Result<Node, Failure> {
    let mut a = Args::new(arguments);
    let fields = fields_arg(&mut a);
    let _expand = a.opt_strings("expandMetadataKeys");
    let limit = a.limit("limit");
    let cursor = a.opt_string("cursor");
    let kind = a.enumerated("type", &TYPES, false);
    let name = a.opt_string("name");
    let user_id = a.opt_string("userId");
    let level = a.enumerated("level", &LEVELS, false);
    let trace_id = a.opt_string("traceId");
    let version = a.opt_string("version");
    let parent = a.opt_string("parentObservationId");
    let is_root = a.opt_bool("isRootObservation");
    let environment = a.opt_string("environment");
    let from = a.opt_time("fromStartTime");
    let to = a.opt_time("toStartTime");
    let filters = filters::parse(&mut a);
    a.finish()?;

    let fields = projection(fields.as_deref());
    guard(&fields, &filters, trace_id.as_deref(), from, to)?;
    let cursor = cursor.as_deref().map(cursor_arg).transpose()?;
    let q = ObservationsQuery {
        level,
        name,
        user_id,
        trace_id,
        version,
        parent_observation_id: parent,
        environments: environment.into_iter().collect(),
        ..scope(from, to, kind, is_root)
    };
    let shape = ctx.sim.shape.read().unwrap_or_else(PoisonError::into_inner);
    let dataset = &ctx.sim.dataset;
    let mut listing = Listing::new(dataset, &q, ctx.now, &shape.without_session);
    if !filters.is_empty() {
        listing.retain(|e| {
            let row = row_of(e, &shape, dataset);
            filters.iter().all(|f| f.keeps(&row))
        });
    }
    let page = listing.page(cursor.as_ref(), limit);
    let data = page
        .rows
        .iter()
        .map(|e| project(&row_of(e, &shape, dataset), &fields, ctx.base))
        .collect();
    let meta = match page.next {
        Some(c) => Node::object([("cursor", Node::Value(json!(c)))]),
        None => Node::Object(Vec::new()),
    };
    Ok(Node::object([("data", Node::Array(data)), ("meta", meta)]))
}

/// `getObservation`.
pub(super) fn get(ctx: &Ctx<'_>, arguments: Option<&Value>) -> Result<Node, Failure> {
    let mut a = Args::new(arguments);
    let id = a.string_min1("observationId");
    let fields = fields_arg(&mut a);
    let _expand = a.opt_strings("expandMetadataKeys");
    a.finish()?;
    let id = id.unwrap_or_default();
    let fields = projection(fields.as_deref());
    let shape = ctx.sim.shape.read().unwrap_or_else(PoisonError::into_inner);
    let dataset = &ctx.sim.dataset;
    let listing = Listing::new(
        dataset,
        &scope(None, None, None, None),
        ctx.now,
        &shape.without_session,
    );
    let entry = listing
        .entries()
        .iter()
        .find(|e| e.request.request_id == id)
        .ok_or_else(|| Failure::Request(format!("Observation {id} not found")))?;
    Ok(project(&row_of(entry, &shape, dataset), &fields, ctx.base))
}
