//! Each run's filesystem: a fresh directory with a size- and inode-capped tmpfs, the caller's
//! input files written into it without ever following a symlink, and after the run a walk of
//! what the program left there, with SHA-256, that trusts nothing the program made.
//!
//! ```text
//! <state_dir>/runs/<run_id>/      root only, 0700
//!     fs/                         tmpfs: size=disk_bytes, nr_inodes=inodes, nosuid, nodev
//!         workspace/  tmp/  shm/  0700, owned by the run's uid
//!         root/                   0755 root: the sandbox's root skeleton
//! ```
//!
//! All of it needs root (mount(2), chown(2)).

mod artifacts;
mod error;
mod fd;
mod inputs;
mod mount;
mod store;
mod sys;
mod teardown;
mod workspace;

pub use artifacts::{ArtifactCaps, ArtifactReport, MAX_WALK_DEPTH, reason};
pub use error::WorkspaceError;
pub use store::ArtifactStore;
pub use teardown::sweep_stale;
pub use workspace::{DiskUsage, LAYOUT_INODES, Workspace, WorkspaceSpec};

/// The directory under `state_dir` that holds one directory per run.
const RUNS_DIR: &str = "runs";
