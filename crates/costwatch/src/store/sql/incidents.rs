//! Incidents: opened and grown by findings, listed while they go on, and the
//! source's own incident when the gateway cannot be read.

use super::*;

pub(super) async fn open_incidents(store: &SqlStore) -> Result<Vec<Incident>, StoreError> {
    let rows = sqlx::query(
        "SELECT fingerprint, kind, rule, group_key, labels, severity, status, started_ms, last_finding_ms, \
         session_count, impact_usd, sequence, notified_ms, notified_sessions, last_error, reopen_until_ms \
         FROM incidents WHERE status = 'firing' ORDER BY started_ms, fingerprint",
    )
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    rows.iter().map(incident_from_row).collect()
}

pub(super) async fn incident_findings(
    store: &SqlStore,
    i: &Incident,
    limit: usize,
) -> Result<Vec<Finding>, StoreError> {
    let rows = sqlx::query(
        "SELECT session_id, kind, rule, severity, group_key, labels, window_start_ms, window_end_ms, \
         cost_usd, impact_usd, evidence, explanation FROM findings \
         WHERE kind = $1 AND rule = $2 AND group_key = $3 AND window_start_ms >= $4 \
         ORDER BY impact_usd DESC, id LIMIT $5",
    )
    .bind(i.kind.as_str())
    .bind(i.rule.as_str())
    .bind(i.group.as_str())
    .bind(ms(i.started))
    .bind(limit as i64)
    .fetch_all(&store.pool)
    .await
    .map_err(unavailable)?;
    rows.iter().map(finding_from_row).collect()
}

pub(super) async fn source_failed(
    store: &SqlStore,
    job: &str,
    error: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let fp = crate::incidents::fingerprint(crate::incidents::SOURCE_UNHEALTHY, job, "gateway");
    sqlx::query(
        "INSERT INTO incidents (fingerprint, kind, rule, group_key, labels, severity, status, started_ms, \
         last_finding_ms, session_count, impact_usd, sequence, notified_ms, notified_sessions, last_error, updated_ms) \
         VALUES ($1, $2, $3, 'gateway', '{}', 'critical', 'firing', $4, $4, 0, 0, 0, NULL, 0, $5, $4) \
         ON CONFLICT (fingerprint) DO UPDATE SET \
         started_ms = CASE WHEN incidents.status = 'resolved' THEN excluded.started_ms ELSE incidents.started_ms END, \
         notified_ms = CASE WHEN incidents.status = 'resolved' THEN NULL ELSE incidents.notified_ms END, \
         last_finding_ms = excluded.last_finding_ms, last_error = excluded.last_error, \
         status = 'firing', updated_ms = excluded.updated_ms",
    )
    .bind(fp)
    .bind(crate::incidents::SOURCE_UNHEALTHY)
    .bind(job)
    .bind(ms(at))
    .bind(error)
    .execute(&store.pool)
    .await
    .map_err(unavailable)?;
    Ok(())
}

/// Adds a new finding to its incident, opening a new episode when the
/// incident was resolved before its reopening time (or never existed).
pub(super) async fn upsert_incident(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    f: &Finding,
    now: i64,
) -> Result<(), StoreError> {
    let fp = crate::incidents::fingerprint(f.kind.as_str(), &f.rule, &f.group);
    let labels: crate::source::Labels = f
        .labels
        .iter()
        .filter(|(k, _)| {
            f.group
                .split(',')
                .any(|pair| pair.split('=').next() == Some(k.as_str()))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // A resolved incident whose reopening time is past (or unset) opens a
    // new episode; one resolved more recently continues its episode, and
    // keeps its reopening time as the mark that the last word people had
    // of it was its resolution.
    let fresh = "(incidents.status = 'resolved' AND (incidents.reopen_until_ms IS NULL \
                 OR excluded.started_ms > incidents.reopen_until_ms))";
    let query = format!(
        "INSERT INTO incidents (fingerprint, kind, rule, group_key, labels, severity, status, started_ms, \
         last_finding_ms, session_count, impact_usd, sequence, notified_ms, notified_sessions, updated_ms) \
         VALUES ($1, $2, $3, $4, $5, $6, 'firing', $7, $8, 1, $9, 0, NULL, 0, $10) \
         ON CONFLICT (fingerprint) DO UPDATE SET \
         severity = excluded.severity, \
         started_ms = CASE WHEN {fresh} THEN excluded.started_ms ELSE incidents.started_ms END, \
         session_count = CASE WHEN {fresh} THEN 1 ELSE incidents.session_count + 1 END, \
         impact_usd = CASE WHEN {fresh} THEN excluded.impact_usd \
                      ELSE incidents.impact_usd + excluded.impact_usd END, \
         notified_ms = CASE WHEN {fresh} THEN NULL ELSE incidents.notified_ms END, \
         notified_sessions = CASE WHEN {fresh} THEN 0 ELSE incidents.notified_sessions END, \
         reopen_until_ms = CASE WHEN {fresh} THEN NULL ELSE incidents.reopen_until_ms END, \
         last_finding_ms = excluded.last_finding_ms, status = 'firing', updated_ms = excluded.updated_ms"
    );
    // Built from the constant above only.
    sqlx::query(sqlx::AssertSqlSafe(query))
        .bind(fp)
        .bind(f.kind.as_str())
        .bind(f.rule.as_str())
        .bind(f.group.as_str())
        .bind(json(&labels)?)
        .bind(f.severity.as_str())
        .bind(ms(f.window.start))
        .bind(ms(f.window.end))
        .bind(f.impact_usd)
        .bind(now)
        .execute(&mut **tx)
        .await
        .map_err(unavailable)?;
    Ok(())
}

pub(super) fn incident_from_row(r: &AnyRow) -> Result<Incident, StoreError> {
    let severity: Severity = serde_json::from_value(serde_json::Value::String(
        r.try_get("severity").map_err(corrupt)?,
    ))
    .map_err(corrupt)?;
    let notified: Option<i64> = r.try_get("notified_ms").map_err(corrupt)?;
    Ok(Incident {
        fingerprint: r.try_get("fingerprint").map_err(corrupt)?,
        kind: r.try_get("kind").map_err(corrupt)?,
        rule: r.try_get("rule").map_err(corrupt)?,
        group: r.try_get("group_key").map_err(corrupt)?,
        labels: serde_json::from_str(&r.try_get::<String, _>("labels").map_err(corrupt)?)
            .map_err(corrupt)?,
        severity,
        firing: r.try_get::<String, _>("status").map_err(corrupt)? == "firing",
        started: from_ms(r.try_get("started_ms").map_err(corrupt)?)?,
        last_finding: from_ms(r.try_get("last_finding_ms").map_err(corrupt)?)?,
        session_count: r.try_get::<i64, _>("session_count").map_err(corrupt)? as u64,
        impact_usd: r.try_get("impact_usd").map_err(corrupt)?,
        sequence: r.try_get::<i64, _>("sequence").map_err(corrupt)? as u32,
        notified: notified.map(from_ms).transpose()?,
        notified_sessions: r.try_get::<i64, _>("notified_sessions").map_err(corrupt)? as u64,
        last_error: r.try_get("last_error").map_err(corrupt)?,
        reopened: r
            .try_get::<Option<i64>, _>("reopen_until_ms")
            .map_err(corrupt)?
            .is_some(),
    })
}
