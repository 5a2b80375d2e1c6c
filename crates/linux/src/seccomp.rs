//! The seccomp filter, compiled from policy/seccomp.json.
