//! Every unsafe block of this crate lives under this module.

pub mod process;
pub mod seccomp;
