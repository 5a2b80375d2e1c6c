//! The Linux sandbox.

pub mod cgroup;
pub mod seccomp;
mod sys;
