//! The day's investigation budget, shared by every replica.

use super::*;

impl crate::investigate::BudgetLedger for SqlStore {
    async fn reserve(
        &self,
        day: chrono::NaiveDate,
        usd: f64,
        cap: f64,
    ) -> Result<bool, LedgerError> {
        // One statement: the row lock (PostgreSQL) or the single writer
        // (SQLite) makes check-and-add atomic across replicas.
        let row = sqlx::query(
            "INSERT INTO investigation_budget (day, spent_usd) SELECT $1, $2 WHERE $2 <= $3 \
             ON CONFLICT (day) DO UPDATE SET spent_usd = investigation_budget.spent_usd + excluded.spent_usd \
             WHERE investigation_budget.spent_usd + excluded.spent_usd <= $3 \
             RETURNING spent_usd",
        )
        .bind(day.to_string())
        .bind(usd)
        .bind(cap)
        .fetch_optional(&self.pool)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        Ok(row.is_some())
    }

    async fn settle(
        &self,
        day: chrono::NaiveDate,
        reserved: f64,
        actual: f64,
    ) -> Result<(), LedgerError> {
        sqlx::query(
            "UPDATE investigation_budget SET spent_usd = spent_usd - $1 + $2 WHERE day = $3",
        )
        .bind(reserved)
        .bind(actual)
        .bind(day.to_string())
        .execute(&self.pool)
        .await
        .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        Ok(())
    }

    async fn spent(&self, day: chrono::NaiveDate) -> Result<f64, LedgerError> {
        let row = sqlx::query("SELECT spent_usd FROM investigation_budget WHERE day = $1")
            .bind(day.to_string())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| LedgerError::Unavailable(e.to_string()))?;
        match row {
            Some(r) => r
                .try_get::<f64, _>("spent_usd")
                .map_err(|e| LedgerError::Corrupt(e.to_string())),
            None => Ok(0.0),
        }
    }
}
