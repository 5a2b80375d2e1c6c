//! The one error type of the cgroup module.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Which cgroup version a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "cgroup_v1",
            CgroupVersion::V2 => "cgroup_v2",
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A controller the run needs is absent: we refuse to run rather than run unlimited.
    #[error("{version} controller {controller} is not available: {fix}")]
    MissingController { version: CgroupVersion, controller: &'static str, fix: String },
    /// The controller exists but the kernel lacks a file we rely on (too old, or built without it).
    #[error("{path} is missing or lacks {what}: {fix}")]
    MissingFeature { path: PathBuf, what: &'static str, fix: &'static str },
    /// cgroup v2's "no internal processes" rule: a cgroup namespace root that still
    /// holds processes cannot hand controllers to child groups.
    #[error(
        "cannot enable controllers below {path}: it holds processes; move them into a leaf \
         group first (mkdir {path}/init, then write each pid to {path}/init/cgroup.procs)"
    )]
    InternalProcesses { path: PathBuf },
    #[error("no cgroup v1 mount and no cgroup2 mount at {path}: {fix}")]
    NoCgroupFs { path: PathBuf, fix: &'static str },
    #[error("invalid run group name {name:?}: {reason}")]
    InvalidName { name: String, reason: &'static str },
    #[error("invalid cgroup limit {field}: {reason}")]
    InvalidLimit { field: &'static str, reason: &'static str },
    #[error("run group {path} already exists (a stale run? see sweep_stale)")]
    AlreadyExists { path: PathBuf },
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot parse {path}: {reason}")]
    Parse { path: PathBuf, reason: String },
    #[error("cannot send SIGKILL to pid {pid} of {path}: {source}")]
    Kill {
        pid: i32,
        path: PathBuf,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("{path} still has processes {pids:?} after {waited_ms} ms of killing")]
    StillPopulated { path: PathBuf, pids: Vec<i32>, waited_ms: u64 },
    /// The first error is what went wrong; the rest are what failed while undoing it.
    #[error("{}", join(.0))]
    Several(Vec<CgroupError>),
}

fn join(errors: &[CgroupError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; then: ")
}

impl CgroupError {
    pub(super) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        CgroupError::Io { op, path: path.into(), source }
    }

    /// Folds a list of errors into one result, keeping every error.
    pub(super) fn collect(mut errors: Vec<CgroupError>) -> Result<(), CgroupError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(CgroupError::Several(errors)),
        }
    }
}
