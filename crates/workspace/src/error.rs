use std::io;
use std::path::PathBuf;

/// A workspace operation that failed. Host-side failures name the host path; failures while
/// writing inputs name the input path as the caller gave it.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// The spec cannot be turned into a safe workspace; nothing was touched.
    #[error("invalid workspace spec: {field} {reason}")]
    InvalidSpec { field: &'static str, reason: String },

    /// Another run (or a crashed one) already owns this run id; it was left alone.
    #[error("create run directory {path}: it already exists")]
    AlreadyExists { path: PathBuf },

    /// A host-side step of create, remove or sweep failed.
    #[error("{op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, source: io::Error },

    /// Something is still mounted under a run directory after unmounting, so it was not
    /// deleted: deleting through a mount could reach files outside the run.
    #[error("remove {path}: {mount_point} is still mounted after unmounting; not deleting through it")]
    StillMounted { path: PathBuf, mount_point: PathBuf },

    /// The inputs do not fit in the tmpfs (`disk_bytes` or `inodes`).
    #[error("{op} input {path}: no space left in the workspace (disk_bytes or inode limit reached)")]
    DiskFull { op: &'static str, path: String },

    /// A component of an input path exists and is not a plain directory (for example a
    /// symlink). It is never followed.
    #[error("write input {path}: {component} exists and is not a directory; symlinks are never followed")]
    InputPathBlocked { path: String, component: String },

    /// Any other failure while writing one input file.
    #[error("{op} input {path}: {source}")]
    Input { op: &'static str, path: String, source: io::Error },

    /// A step failed and undoing what was done also failed; both are kept.
    #[error("{primary}; cleanup also failed: {cleanup}")]
    CleanupFailed { primary: Box<WorkspaceError>, cleanup: Box<WorkspaceError> },
}

impl WorkspaceError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: impl Into<io::Error>) -> Self {
        WorkspaceError::Io { op, path: path.into(), source: source.into() }
    }

    /// Maps a failure while writing input `path`; running out of blocks or inodes gets its own
    /// variant so the caller can tell the user that their files do not fit.
    pub(crate) fn input(op: &'static str, path: &str, source: impl Into<io::Error>) -> Self {
        let source = source.into();
        match source.raw_os_error() {
            Some(libc::ENOSPC | libc::EDQUOT) => WorkspaceError::DiskFull { op, path: path.to_owned() },
            _ => WorkspaceError::Input { op, path: path.to_owned(), source },
        }
    }

    /// True when the error means the workspace's tmpfs is full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            WorkspaceError::DiskFull { .. } => true,
            WorkspaceError::CleanupFailed { primary, .. } => primary.is_disk_full(),
            _ => false,
        }
    }
}
