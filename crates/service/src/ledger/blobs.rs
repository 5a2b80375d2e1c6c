//! Artifact blobs: `<serve>/artifacts/<sha256>`, one file per distinct content, shared by every
//! run that produced it. A run's sandbox writes its copies into a private incoming directory;
//! the ledger thread moves them into the store when it records the run, and deletes a blob
//! when no kept run lists it. Both happen on the ledger thread, so they never race.

use std::path::{Path, PathBuf};

use rusqlite::Connection;

use super::sql;
use crate::ServiceError;

/// A finished run's artifacts, still in its incoming directory.
pub struct AdoptArtifacts {
    pub incoming: PathBuf,
    pub blobs: PathBuf,
    /// (path, sha256, size_bytes) of each listed artifact.
    pub artifacts: Vec<(String, String, u64)>,
}

impl AdoptArtifacts {
    pub(super) fn adopt(self, conn: &Connection, run_id: &str) -> Result<(), ServiceError> {
        for (path, sha256, size) in &self.artifacts {
            // Digests come from the sandbox's result: accept only the shape of one.
            let valid = sha256.len() == 64 && sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            if !valid {
                continue;
            }
            let target = self.blobs.join(sha256);
            if !target.exists() {
                let source = self.incoming.join(sha256);
                if let Err(e) = std::fs::rename(&source, &target) {
                    // Not in the store: the artifact stays listed in the result, and fetching
                    // it answers 404. Nothing else is lost.
                    tracing::warn!(run_id, path, error = %e, "artifact not stored");
                    continue;
                }
            }
            sql::insert_artifact(conn, run_id, path, sha256, *size)?;
        }
        remove_incoming(&self.incoming);
        Ok(())
    }
}

/// Removes a run's incoming directory (whatever is left in it is a duplicate or unlisted).
pub fn remove_incoming(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "remove incoming artifacts");
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PurgeReport {
    pub runs_deleted: usize,
    pub blobs_deleted: usize,
}

pub(super) fn purge(conn: &Connection, cutoff_ms: i64, blobs: &Path) -> Result<PurgeReport, ServiceError> {
    let runs_deleted = sql::delete_expired(conn, cutoff_ms)?;
    let mut blobs_deleted = 0;
    let entries = match std::fs::read_dir(blobs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(PurgeReport { runs_deleted, blobs_deleted }),
        Err(e) => return Err(ServiceError::io("list", blobs, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| ServiceError::io("list", blobs, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        // Temporary files of a store that was interrupted are garbage too.
        if !sql::blob_is_referenced(conn, &name)? {
            match std::fs::remove_file(entry.path()) {
                Ok(()) => blobs_deleted += 1,
                Err(e) => tracing::warn!(blob = %name, error = %e, "remove unreferenced blob"),
            }
        }
    }
    Ok(PurgeReport { runs_deleted, blobs_deleted })
}
