//! Descriptor-relative file operations. Everything inside a workspace goes through these, so
//! a name is always resolved in a directory we already hold open, and a symlink planted by
//! the sandboxed program is never followed (openat(2), O_NOFOLLOW).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, fchmod, fstat, fstatat, mkdirat};

use crate::sys;

/// The unprivileged host ids that own everything the sandboxed program may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub uid: u32,
    pub gid: u32,
}

/// Opens a directory by host path, refusing a symlink as the last component. Only used on
/// paths no untrusted code has been able to touch yet.
pub(crate) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    Ok(OwnedFd::from(file))
}

/// Opens the directory `name` in `parent`. Fails with ELOOP on a symlink and ENOTDIR on
/// anything else that is not a directory.
pub(crate) fn open_dir_at(parent: BorrowedFd<'_>, name: &CStr) -> nix::Result<OwnedFd> {
    sys::openat(parent, name, OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW, Mode::empty())
}

/// Opens `name` in `parent` for reading without following a symlink. O_NONBLOCK makes a FIFO
/// that was swapped in after we looked at it open at once instead of waiting for a writer;
/// O_NOCTTY keeps a terminal from becoming ours.
pub(crate) fn open_file_at(parent: BorrowedFd<'_>, name: &CStr) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_NOCTTY;
    sys::openat(parent, name, flags, Mode::empty())
}

/// Creates the new file `name` in `parent`. O_EXCL makes an existing entry, a symlink
/// included, an error (EEXIST) instead of something to write through.
pub(crate) fn create_file_at(parent: BorrowedFd<'_>, name: &CStr) -> nix::Result<OwnedFd> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
    // Created 0600; the final mode is set with fchmod so the process umask does not matter.
    sys::openat(parent, name, flags, Mode::from_bits_truncate(0o600))
}

/// Creates the directory `name` in `parent`; returns false when something named `name`
/// already exists (the caller then opens it with O_NOFOLLOW to see what it is).
pub(crate) fn make_dir_at(parent: BorrowedFd<'_>, name: &CStr) -> nix::Result<bool> {
    match mkdirat(Some(parent.as_raw_fd()), name, Mode::from_bits_truncate(0o700)) {
        Ok(()) => Ok(true),
        Err(Errno::EEXIST) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Gives an open file or directory to `owner` with exactly `mode`. The chown comes first
/// because chown(2) may clear mode bits.
pub(crate) fn set_owner_and_mode(fd: BorrowedFd<'_>, owner: Owner, mode: u32) -> io::Result<()> {
    std::os::unix::fs::fchown(fd, Some(owner.uid), Some(owner.gid))?;
    fchmod(fd.as_raw_fd(), Mode::from_bits_truncate(mode))?;
    Ok(())
}

/// lstat of `name` in `parent`: what the entry itself is, without opening it.
pub(crate) fn stat_at(parent: BorrowedFd<'_>, name: &CStr) -> nix::Result<FileStat> {
    fstatat(Some(parent.as_raw_fd()), name, AtFlags::AT_SYMLINK_NOFOLLOW)
}

pub(crate) fn stat_fd(fd: BorrowedFd<'_>) -> nix::Result<FileStat> {
    fstat(fd.as_raw_fd())
}

/// The names in `dir`, without `.` and `..`, sorted bytewise so walks are deterministic.
/// Reads through a fresh open of `.` so the caller's descriptor keeps its own position.
pub(crate) fn list_dir(dir: BorrowedFd<'_>) -> nix::Result<Vec<CString>> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut stream = Dir::openat(Some(dir.as_raw_fd()), c".", flags, Mode::empty())?;
    let mut names = Vec::new();
    for entry in stream.iter() {
        let entry = entry?;
        let name = entry.file_name();
        if name != c"." && name != c".." {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}
