//! The crate's only unsafe code: taking ownership of descriptors that nix 0.29 hands back as
//! bare `RawFd`s, so every other module works with `OwnedFd` and never leaks or double-closes.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// openat(2) relative to `dir`, always with O_CLOEXEC so no descriptor into a workspace leaks
/// into a sandboxed program through exec.
pub(crate) fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: OFlag, mode: Mode) -> nix::Result<OwnedFd> {
    let raw = nix::fcntl::openat(Some(dir.as_raw_fd()), name, flags | OFlag::O_CLOEXEC, mode)?;
    // SAFETY: `raw` was returned by a successful openat(2) just above, so it is an open
    // descriptor, and no other object has been given it: the new OwnedFd is its sole owner and
    // closes it exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}
