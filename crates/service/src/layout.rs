//! The service's files, all under `<state_dir>/serve/`:
//!
//! ```text
//! config.toml       tenants, hashed API keys, admission, retention (default --config)
//! ledger.sqlite3    the run ledger (plus its -wal and -shm files)
//! lock              flock'ed by the running service: one service per state directory
//! artifacts/        artifact blobs, named by SHA-256
//! incoming/<id>/    a run's artifacts until its outcome is recorded
//! sandboxes/        the state directory of the runs (`runs/<id>` workspaces)
//! ```
//!
//! Keeping runs in their own state directory means the service's start-up sweep never touches
//! the workspaces of `runbox run` commands that use `<state_dir>` directly.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::ServiceError;

pub struct Layout {
    pub dir: PathBuf,
    pub default_config: PathBuf,
    pub ledger: PathBuf,
    pub artifacts: PathBuf,
    pub incoming: PathBuf,
    pub sandboxes: PathBuf,
}

impl Layout {
    /// Creates the directories (0700: the ledger holds results, the blobs hold outputs).
    pub fn create(state_dir: &Path) -> Result<Layout, ServiceError> {
        let make = |dir: &Path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| ServiceError::io("create", dir, e))
        };
        let dir = state_dir.join("serve");
        make(&dir)?;
        // Absolute, so that children and the orphan search see one spelling of it.
        let dir = dir.canonicalize().map_err(|e| ServiceError::io("resolve", &dir, e))?;
        let layout = Layout {
            default_config: dir.join("config.toml"),
            ledger: dir.join("ledger.sqlite3"),
            artifacts: dir.join("artifacts"),
            incoming: dir.join("incoming"),
            sandboxes: dir.join("sandboxes"),
            dir,
        };
        make(&layout.artifacts)?;
        make(&layout.sandboxes)?;
        Ok(layout)
    }

    /// Takes the state directory for this process; refused while another service holds it.
    pub fn lock(&self) -> Result<Flock<File>, ServiceError> {
        let path = self.dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| ServiceError::io("open", &path, e))?;
        Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, errno)| match errno {
            Errno::EWOULDBLOCK => ServiceError::StateDirLocked { path: self.dir.clone() },
            other => ServiceError::io("lock", &path, other.into()),
        })
    }
}
