//! What prompt-token estimators learned, per model and counting method:
//! one row of JSON samples, loaded before an investigation and written
//! after it.

use super::*;
use crate::investigate::tokens::{CALIBRATION_WINDOW, Sample};

impl crate::investigate::CalibrationStore for SqlStore {
    async fn load_calibration(
        &self,
        model: &str,
        method: &str,
    ) -> Result<Vec<Sample>, LedgerError> {
        let row = sqlx::query(
            "SELECT samples_json FROM token_calibration WHERE model = $1 AND method = $2",
        )
        .bind(model)
        .bind(method)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        let Some(row) = row else {
            return Ok(Vec::new());
        };
        let text: String = row
            .try_get("samples_json")
            .map_err(|e| LedgerError::Corrupt(e.to_string()))?;
        let mut samples: Vec<Sample> =
            serde_json::from_str(&text).map_err(|e| LedgerError::Corrupt(e.to_string()))?;
        // Bounded whatever was written.
        let skip = samples.len().saturating_sub(CALIBRATION_WINDOW);
        samples.drain(..skip);
        Ok(samples)
    }

    async fn save_calibration(
        &self,
        model: &str,
        method: &str,
        samples: &[Sample],
        now_ms: i64,
    ) -> Result<(), LedgerError> {
        let skip = samples.len().saturating_sub(CALIBRATION_WINDOW);
        let text = serde_json::to_string(&samples[skip..])
            .map_err(|e| LedgerError::Corrupt(e.to_string()))?;
        sqlx::query(
            "INSERT INTO token_calibration (model, method, samples_json, updated_ms) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (model, method) DO UPDATE \
             SET samples_json = excluded.samples_json, updated_ms = excluded.updated_ms",
        )
        .bind(model)
        .bind(method)
        .bind(text)
        .bind(now_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        Ok(())
    }
}
