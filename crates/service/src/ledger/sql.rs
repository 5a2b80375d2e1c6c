//! The ledger's tables and the statements on them. Everything here runs on the ledger thread,
//! inside the transaction of the current batch (see `worker.rs`).

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{NewRun, Stored};
use crate::api::ErrorBody;
use crate::record::{RunRecord, RunStatus};

/// Version 1. `runs` has one row per accepted run; `artifacts` lists the blobs each finished
/// run references, so retention can drop a blob when no kept run needs it.
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    idempotency_key TEXT,
    request_sha256 TEXT NOT NULL,
    runtime TEXT NOT NULL,
    status TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    started_ms INTEGER,
    finished_ms INTEGER,
    result TEXT,
    error TEXT,
    UNIQUE (tenant, idempotency_key)
);
CREATE INDEX IF NOT EXISTS runs_by_status ON runs (status);
CREATE INDEX IF NOT EXISTS runs_by_finish ON runs (finished_ms);
CREATE TABLE IF NOT EXISTS artifacts (
    run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
    path TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    PRIMARY KEY (run_id, path)
);
CREATE INDEX IF NOT EXISTS artifacts_by_blob ON artifacts (sha256);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', '1');
";

const COLUMNS: &str = "run_id, tenant, idempotency_key, request_sha256, runtime, status, created_ms, started_ms, \
                       finished_ms, result, error";

pub fn insert(conn: &Connection, run: &NewRun) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO runs (run_id, tenant, idempotency_key, request_sha256, runtime, status, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6)",
    )?
    .execute(params![
        run.run_id,
        run.tenant,
        run.idempotency_key,
        run.request_sha256,
        run.runtime,
        run.created_ms
    ])?;
    Ok(())
}

pub fn by_id(conn: &Connection, run_id: &str) -> rusqlite::Result<Option<Stored>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM runs WHERE run_id = ?1"))?
        .query_row(params![run_id], stored)
        .optional()
}

pub fn by_key(conn: &Connection, tenant: &str, key: &str) -> rusqlite::Result<Option<Stored>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM runs WHERE tenant = ?1 AND idempotency_key = ?2"))?
        .query_row(params![tenant, key], stored)
        .optional()
}

pub fn mark_running(conn: &Connection, run_id: &str, at_ms: i64) -> rusqlite::Result<usize> {
    conn.prepare_cached("UPDATE runs SET status = 'running', started_ms = ?2 WHERE run_id = ?1 AND status = 'queued'")?
        .execute(params![run_id, at_ms])
}

/// Sets a final status. Only a run that is not final yet changes: a final record is never
/// rewritten.
pub fn finish(
    conn: &Connection,
    run_id: &str,
    status: RunStatus,
    at_ms: i64,
    result: Option<&str>,
    error: Option<&str>,
) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "UPDATE runs SET status = ?2, finished_ms = ?3, result = ?4, error = ?5
         WHERE run_id = ?1 AND status IN ('queued', 'running')",
    )?
    .execute(params![run_id, status.as_str(), at_ms, result, error])
}

pub fn insert_artifact(conn: &Connection, run_id: &str, path: &str, sha256: &str, size: u64) -> rusqlite::Result<()> {
    conn.prepare_cached("INSERT OR REPLACE INTO artifacts (run_id, path, sha256, size_bytes) VALUES (?1, ?2, ?3, ?4)")?
        .execute(params![run_id, path, sha256, i64::try_from(size).unwrap_or(i64::MAX)])?;
    Ok(())
}

pub fn artifact(conn: &Connection, run_id: &str, path: &str) -> rusqlite::Result<Option<(String, u64)>> {
    conn.prepare_cached("SELECT sha256, size_bytes FROM artifacts WHERE run_id = ?1 AND path = ?2")?
        .query_row(params![run_id, path], |row| Ok((row.get(0)?, row.get::<_, i64>(1)?.max(0) as u64)))
        .optional()
}

pub fn blob_is_referenced(conn: &Connection, sha256: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM artifacts WHERE sha256 = ?1 LIMIT 1")?.exists(params![sha256])
}

/// Ids of the runs that are not final.
pub fn unfinished(conn: &Connection) -> rusqlite::Result<Vec<(String, RunStatus)>> {
    let mut statement = conn.prepare("SELECT run_id, status FROM runs WHERE status IN ('queued', 'running')")?;
    let rows = statement.query_map([], |row| {
        let status: String = row.get(1)?;
        Ok((row.get(0)?, RunStatus::parse(&status).unwrap_or(RunStatus::Running)))
    })?;
    rows.collect()
}

pub fn exists(conn: &Connection, run_id: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM runs WHERE run_id = ?1")?.exists(params![run_id])
}

/// Deletes the final runs that finished before `cutoff_ms` (their artifact rows go with them).
pub fn delete_expired(conn: &Connection, cutoff_ms: i64) -> rusqlite::Result<usize> {
    conn.execute(
        "DELETE FROM runs WHERE finished_ms IS NOT NULL AND finished_ms < ?1 AND status NOT IN ('queued', 'running')",
        params![cutoff_ms],
    )
}

pub fn meta(conn: &Connection, key: &str) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", params![key], |row| row.get(0)).optional()
}

pub fn set_meta(conn: &Connection, key: &str, value: &str) -> rusqlite::Result<()> {
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![key, value])?;
    Ok(())
}

fn stored(row: &Row) -> rusqlite::Result<Stored> {
    let status: String = row.get(5)?;
    let result: Option<String> = row.get(9)?;
    let error: Option<String> = row.get(10)?;
    let corrupt = |what: &str, e: &dyn std::fmt::Display| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("{what} of a stored run cannot be read: {e}").into(),
        )
    };
    let status = RunStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?;
    let result = result.map(|text| serde_json::from_str(&text).map_err(|e| corrupt("result", &e))).transpose()?;
    let error: Option<ErrorBody> =
        error.map(|text| serde_json::from_str(&text).map_err(|e| corrupt("error", &e))).transpose()?;
    Ok(Stored {
        tenant: row.get(1)?,
        request_sha256: row.get(3)?,
        record: RunRecord {
            run_id: row.get(0)?,
            status,
            runtime: row.get(4)?,
            idempotency_key: row.get(2)?,
            created_at_ms: row.get(6)?,
            started_at_ms: row.get(7)?,
            finished_at_ms: row.get(8)?,
            result,
            error,
        },
    })
}
