//! What the traffic showed of each model's prompt cache
//! (`detect::caching`), one row a model, merged by each window's commit.

use super::placeholders::value_tuples;
use super::*;
use crate::detect::{CachingEvidence, ModelCaching};

pub(super) async fn load(store: &SqlStore) -> Result<CachingEvidence, StoreError> {
    let rows = sqlx::query("SELECT model, facts FROM model_caching ORDER BY model")
        .fetch_all(&store.pool)
        .await
        .map_err(unavailable)?;
    let mut models = Vec::with_capacity(rows.len());
    for r in rows {
        let c = |e: sqlx::Error| StoreError::Corrupt(e.to_string());
        let model: String = r.try_get("model").map_err(c)?;
        let facts: String = r.try_get("facts").map_err(c)?;
        let m: ModelCaching = serde_json::from_str(&facts)
            .map_err(|e| StoreError::Corrupt(format!("caching facts of {model}: {e}")))?;
        models.push((model, m));
    }
    Ok(CachingEvidence::from_models(models))
}

/// Merges `seen` into the stored rows of its models, inside a window's
/// transaction. On PostgreSQL the rows are locked first, so two replicas'
/// windows merge one after the other rather than one over the other.
pub(super) async fn merge_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    backend: Backend,
    seen: &CachingEvidence,
    now: i64,
) -> Result<(), StoreError> {
    let models: Vec<(&String, &ModelCaching)> =
        seen.iter().filter(|(_, m)| !m.is_empty()).collect();
    if models.is_empty() {
        return Ok(());
    }
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE",
        Backend::Sqlite => "",
    };
    let mut merged = Vec::with_capacity(models.len());
    for (model, m) in models {
        let stored = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT facts FROM model_caching WHERE model = $1{lock}"
        )))
        .bind(model.as_str())
        .fetch_optional(&mut **tx)
        .await
        .map_err(unavailable)?;
        let mut facts = match stored {
            Some(r) => {
                let text: String = r
                    .try_get("facts")
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?;
                serde_json::from_str::<ModelCaching>(&text)
                    .map_err(|e| StoreError::Corrupt(format!("caching facts of {model}: {e}")))?
            }
            None => ModelCaching::default(),
        };
        facts.merge(m);
        merged.push((model, json(&facts)?));
    }
    for chunk in merged.chunks(super::placeholders::ROWS_PER_STATEMENT) {
        let sql = format!(
            "INSERT INTO model_caching (model, facts, updated_ms) VALUES {} \
             ON CONFLICT (model) DO UPDATE SET facts = excluded.facts, updated_ms = excluded.updated_ms",
            value_tuples(backend, chunk.len(), 3)
        );
        // Only numbered placeholders are formatted in; the values are bound.
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (model, facts) in chunk {
            q = q.bind(model.as_str()).bind(facts.as_str()).bind(now);
        }
        q.execute(&mut **tx).await.map_err(unavailable)?;
    }
    Ok(())
}
