//! The Linux sandbox. One step (one program) runs per call to [`run_step`]:
//! a fresh user, pid, mount, ipc, uts, net and cgroup namespace; a read-only root built by
//! pivot_root from [`PreparedRoot`]; its own cgroup; rlimits; no capabilities; no_new_privs;
//! and a seccomp filter installed right before execve. Every layer is required: when one
//! cannot be applied the step fails as a sandbox failure and the program never runs.
//!
//! The supervisor must be **single-threaded** when it calls [`run_step`]: the child of a
//! clone only has a copy of the calling thread (see `sys::process::clone_process`).

pub mod cgroup;
pub mod seccomp;

mod capture;
mod child;
mod protocol;
mod rootfs;
mod spawn;
mod step;
mod supervise;
mod sys;

pub use capture::{Capture, Captured};
pub use protocol::Step;
pub use rootfs::{PreparedRoot, RootError, RunDirs, prepare_root};
pub use step::{Exit, StepOutcome, StepSpec, Teardown, run_step};
pub use supervise::{KillReason, OutputStream, OutputTap};
pub use sys::process::effective_capabilities;

/// A failure of runbox itself, never of the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxFailure {
    /// Stable machine code, e.g. `namespaces`, `cgroup`, `setup`.
    pub code: &'static str,
    pub message: String,
}

pub(crate) fn failure(code: &'static str, message: impl Into<String>) -> SandboxFailure {
    SandboxFailure { code, message: message.into() }
}
