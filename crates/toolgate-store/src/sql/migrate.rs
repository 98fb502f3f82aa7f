//! Versioned migrations, the same text for both databases, applied under a
//! lock so that two processes starting together never both apply one:
//! PostgreSQL takes a session advisory lock, SQLite one `BEGIN IMMEDIATE`
//! transaction around the whole run (its DDL is transactional).
//!
//! Not sqlx's migrator: on SQLite it takes no lock, so two toolgates
//! opening a new file at once would both try to apply version 1.

use sha2::{Digest, Sha256};
use sqlx::{PgPool, Row, SqlitePool};

use crate::error::StoreError;

/// Every migration, in order. A released migration is never edited: the
/// checksum check below refuses a database whose applied text differs.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "approvals and audit",
        include_str!("../../migrations/0001_approvals_and_audit.sql"),
    ),
    (
        2,
        "tool pins",
        include_str!("../../migrations/0002_tool_pins.sql"),
    ),
    (
        3,
        "catalogue",
        include_str!("../../migrations/0003_catalog.sql"),
    ),
];

/// The advisory lock key of toolgate's migrations (any constant; this one
/// spells "tgmigr" in ASCII).
const PG_LOCK_KEY: i64 = 0x7467_6d69_6772;

const CREATE_LEDGER: &str = "CREATE TABLE IF NOT EXISTS toolgate_migrations (
    version BIGINT PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL, applied_ms BIGINT NOT NULL)";

fn checksum(sql: &str) -> String {
    toolgate_core::text::hex(&Sha256::digest(sql.as_bytes()))
}

/// Compares what the database has applied with what this build knows and
/// says which migrations are still to apply.
fn to_apply(
    applied: &[(i64, String)],
) -> Result<Vec<&'static (i64, &'static str, &'static str)>, StoreError> {
    for (version, sum) in applied {
        match MIGRATIONS.iter().find(|(v, _, _)| v == version) {
            None => {
                return Err(StoreError::Schema(format!(
                    "it has migration {version}, which this toolgate does not know: it was written by a newer toolgate; upgrade this one"
                )));
            }
            Some((_, name, sql)) if checksum(sql) != *sum => {
                return Err(StoreError::Schema(format!(
                    "migration {version} ({name}) differs from the one applied to this database"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(MIGRATIONS
        .iter()
        .filter(|(v, _, _)| !applied.iter().any(|(a, _)| a == v))
        .collect())
}

pub(crate) async fn sqlite(pool: &SqlitePool, now_ms: i64) -> Result<(), StoreError> {
    // The write lock from the first statement on: a second process waits
    // (busy timeout, then our retry) and then finds everything applied.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::raw_sql(CREATE_LEDGER).execute(&mut *tx).await?;
    let applied: Vec<(i64, String)> =
        sqlx::query_as("SELECT version, checksum FROM toolgate_migrations ORDER BY version")
            .fetch_all(&mut *tx)
            .await?;
    for (version, name, sql) in to_apply(&applied)? {
        sqlx::raw_sql(*sql).execute(&mut *tx).await?;
        sqlx::query("INSERT INTO toolgate_migrations (version, name, checksum, applied_ms) VALUES ($1, $2, $3, $4)")
            .bind(version)
            .bind(*name)
            .bind(checksum(sql))
            .bind(now_ms)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub(crate) async fn postgres(pool: &PgPool, now_ms: i64) -> Result<(), StoreError> {
    let mut conn = pool.acquire().await?;
    // Session lock: held across the migrations' own transactions, released
    // below or, if this process dies, by the server with the session.
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(PG_LOCK_KEY)
        .execute(&mut *conn)
        .await?;
    let result = async {
        sqlx::raw_sql(CREATE_LEDGER).execute(&mut *conn).await?;
        let rows = sqlx::query("SELECT version, checksum FROM toolgate_migrations ORDER BY version")
            .fetch_all(&mut *conn)
            .await?;
        let mut applied = Vec::with_capacity(rows.len());
        for row in rows {
            applied.push((row.try_get::<i64, _>(0)?, row.try_get::<String, _>(1)?));
        }
        for (version, name, sql) in to_apply(&applied)? {
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            sqlx::raw_sql(*sql).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO toolgate_migrations (version, name, checksum, applied_ms) VALUES ($1, $2, $3, $4)")
                .bind(version)
                .bind(*name)
                .bind(checksum(sql))
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
        }
        Ok::<(), StoreError>(())
    }
    .await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(PG_LOCK_KEY)
        .execute(&mut *conn)
        .await;
    result?;
    unlocked?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_what_is_missing_and_refuses_a_newer_or_changed_schema() {
        assert_eq!(to_apply(&[]).unwrap().len(), MIGRATIONS.len());
        let all: Vec<(i64, String)> = MIGRATIONS
            .iter()
            .map(|(v, _, sql)| (*v, checksum(sql)))
            .collect();
        assert!(to_apply(&all).unwrap().is_empty());

        let mut newer = all.clone();
        newer.push((999, "x".to_owned()));
        let err = to_apply(&newer).unwrap_err().to_string();
        assert!(
            err.contains("migration 999") && err.contains("newer toolgate"),
            "{err}"
        );

        let changed = vec![(1, checksum("something else"))];
        let err = to_apply(&changed).unwrap_err().to_string();
        assert!(
            err.contains("migration 1 (approvals and audit) differs"),
            "{err}"
        );
    }
}
