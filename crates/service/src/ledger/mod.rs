//! The durable run ledger: one SQLite file in the state directory.
//!
//! A run is recorded as `queued` before it may start, as `running` before its sandbox is
//! spawned, and with its final status after. On start-up, [`Ledger::interrupt_unfinished`]
//! turns what a crash left `queued` or `running` into `interrupted`: never into a success,
//! and never into a second execution.

mod blobs;
mod sql;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::Sender;

use rusqlite::Connection;

pub use blobs::{AdoptArtifacts, PurgeReport, remove_incoming};

use crate::ServiceError;
use crate::api::ErrorBody;
use crate::config::Synchronous;
use crate::record::{RunRecord, RunStatus};

/// A handle on the ledger thread. Cheap to clone.
#[derive(Clone)]
pub struct Ledger {
    jobs: Arc<Sender<worker::Job>>,
    /// Mixed into request fingerprints, so a stored fingerprint reveals nothing about the
    /// request (secrets included) to someone who reads the file.
    salt: Arc<[u8]>,
}

/// A run as stored: its record, and what the service needs to compare a retry with it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub tenant: String,
    pub request_sha256: String,
    pub record: RunRecord,
}

#[derive(Debug, Clone)]
pub struct NewRun {
    pub run_id: String,
    pub tenant: String,
    pub idempotency_key: Option<String>,
    pub request_sha256: String,
    pub runtime: String,
    pub created_ms: i64,
}

pub enum Accept {
    Accepted,
    /// The tenant already used this idempotency key: here is that run.
    Existing(Box<Stored>),
}

/// A final status with what goes with it.
pub struct Final {
    pub status: RunStatus,
    pub at_ms: i64,
    /// The RunResult as JSON, for `finished`.
    pub result_json: Option<String>,
    pub error: Option<ErrorBody>,
    pub artifacts: Option<AdoptArtifacts>,
}

impl Ledger {
    /// Opens (or creates) the ledger at `path` and starts its thread.
    pub fn open(path: &Path, synchronous: Synchronous) -> Result<Ledger, ServiceError> {
        let err = |source| ServiceError::Ledger { path: path.to_path_buf(), source };
        let conn = Connection::open(path).map_err(err)?;
        let sync = match synchronous {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        };
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; PRAGMA foreign_keys = ON; \
             PRAGMA busy_timeout = 5000;"
        ))
        .map_err(err)?;
        conn.execute_batch(sql::SCHEMA).map_err(err)?;
        let salt = match sql::meta(&conn, "request_salt").map_err(err)? {
            Some(hex_salt) => hex::decode(hex_salt).unwrap_or_default(),
            None => {
                let mut salt = [0u8; 32];
                getrandom::fill(&mut salt).map_err(|e| ServiceError::Refused(format!("read random bytes: {e}")))?;
                sql::set_meta(&conn, "request_salt", &hex::encode(salt)).map_err(err)?;
                salt.to_vec()
            }
        };
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("runbox-ledger".into())
            .spawn(move || worker::run(conn, receiver))
            .map_err(|e| ServiceError::io("start the ledger thread for", path, e))?;
        Ok(Ledger { jobs: Arc::new(sender), salt: salt.into() })
    }

    /// The fingerprint of a request (its canonical JSON), to tell a retry from a new request.
    pub fn fingerprint(&self, canonical_request: &[u8]) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(&self.salt);
        hasher.update(canonical_request);
        hex::encode(hasher.finalize())
    }

    /// Runs `op` on the ledger thread, in the current batch's transaction; returns once the
    /// transaction is committed.
    async fn call<T: Send + 'static>(
        &self,
        op: impl FnOnce(&Connection) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: worker::Job = Box::new(move |conn| {
            let outcome = op(conn);
            if outcome.is_err() {
                worker::undo_job(conn);
            }
            Box::new(move |committed| {
                let _ = tx.send(committed.map_err(ServiceError::LedgerWrite).and(outcome));
            })
        });
        let gone = || ServiceError::LedgerClosed("the ledger thread has stopped".into());
        self.jobs.send(job).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }

    pub async fn get(&self, run_id: &str) -> Result<Option<Stored>, ServiceError> {
        let run_id = run_id.to_string();
        self.call(move |conn| Ok(sql::by_id(conn, &run_id)?)).await
    }

    pub async fn find_by_key(&self, tenant: &str, key: &str) -> Result<Option<Stored>, ServiceError> {
        let (tenant, key) = (tenant.to_string(), key.to_string());
        self.call(move |conn| Ok(sql::by_key(conn, &tenant, &key)?)).await
    }

    /// Records a new run as `queued`, unless its idempotency key is taken: then the run that
    /// holds it is returned and nothing is written. Checked and written in one step on the
    /// ledger thread, so concurrent retries cannot both be accepted.
    pub async fn accept(&self, run: NewRun) -> Result<Accept, ServiceError> {
        self.call(move |conn| {
            if let Some(key) = &run.idempotency_key
                && let Some(existing) = sql::by_key(conn, &run.tenant, key)?
            {
                return Ok(Accept::Existing(Box::new(existing)));
            }
            sql::insert(conn, &run)?;
            Ok(Accept::Accepted)
        })
        .await
    }

    pub async fn mark_running(&self, run_id: &str, at_ms: i64) -> Result<(), ServiceError> {
        let run_id = run_id.to_string();
        self.call(move |conn| sql::mark_running(conn, &run_id, at_ms).map(drop).map_err(Into::into)).await
    }

    /// Records the final status; with artifacts, moves them from the run's incoming directory
    /// into the blob store and lists them (in the same step as retention, so a blob is never
    /// deleted between the two).
    pub async fn finish(&self, run_id: &str, done: Final) -> Result<(), ServiceError> {
        let run_id = run_id.to_string();
        self.call(move |conn| {
            let error = done.error.as_ref().map(|e| serde_json::to_string(e).expect("serializes"));
            sql::finish(conn, &run_id, done.status, done.at_ms, done.result_json.as_deref(), error.as_deref())?;
            if let Some(artifacts) = done.artifacts {
                artifacts.adopt(conn, &run_id)?;
            }
            Ok(())
        })
        .await
    }

    pub async fn artifact(&self, run_id: &str, path: &str) -> Result<Option<(String, u64)>, ServiceError> {
        let (run_id, path) = (run_id.to_string(), path.to_string());
        self.call(move |conn| Ok(sql::artifact(conn, &run_id, &path)?)).await
    }

    /// Start-up only: every run a previous process left `queued` or `running` becomes
    /// `interrupted`. Returns their ids.
    pub async fn interrupt_unfinished(&self, at_ms: i64) -> Result<Vec<String>, ServiceError> {
        self.call(move |conn| {
            let unfinished = sql::unfinished(conn)?;
            for (run_id, status) in &unfinished {
                let message = if *status == RunStatus::Queued {
                    "the service stopped before this run started; it did not run"
                } else {
                    "the service stopped while this run was in progress; its outcome is unknown"
                };
                let error = ErrorBody { code: "interrupted".into(), message: message.into(), field: None };
                let error = serde_json::to_string(&error).expect("serializes");
                sql::finish(conn, run_id, RunStatus::Interrupted, at_ms, None, Some(&error))?;
            }
            Ok(unfinished.into_iter().map(|(id, _)| id).collect())
        })
        .await
    }

    /// Which of `ids` are runs of this ledger.
    pub async fn known(&self, ids: Vec<String>) -> Result<Vec<String>, ServiceError> {
        self.call(move |conn| {
            let mut known = Vec::new();
            for id in ids {
                if sql::exists(conn, &id)? {
                    known.push(id);
                }
            }
            Ok(known)
        })
        .await
    }

    /// Drops the runs that finished before `cutoff_ms` and every blob no kept run references.
    pub async fn purge(&self, cutoff_ms: i64, blobs_dir: PathBuf) -> Result<PurgeReport, ServiceError> {
        self.call(move |conn| blobs::purge(conn, cutoff_ms, &blobs_dir)).await
    }
}

#[cfg(test)]
mod tests;
