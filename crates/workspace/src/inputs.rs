//! Writing the caller's input files into /workspace. Every step is relative to a directory
//! descriptor we hold, and no symlink is ever followed, so an entry that is not what we
//! expect is an error, never a way out of the workspace.

use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use nix::errno::Errno;
use runbox_contract::InputFile;

use crate::fd::{self, Owner};
use crate::{Workspace, WorkspaceError};

const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;
const EXECUTABLE_MODE: u32 = 0o755;

impl Workspace {
    /// Writes `files` under the workspace directory, creating parent directories (0755) as
    /// needed. Files are 0644, or 0755 when executable; everything is owned by the run's uid.
    /// Files that do not fit in the tmpfs give [`WorkspaceError::DiskFull`].
    pub fn write_inputs(&self, files: &[InputFile]) -> Result<(), WorkspaceError> {
        for file in files {
            write_one(self.workspace_fd().as_fd(), file, self.owner())?;
        }
        Ok(())
    }
}

fn write_one(root: BorrowedFd<'_>, file: &InputFile, owner: Owner) -> Result<(), WorkspaceError> {
    let path = file.path.as_str();
    let names = components(path)?;
    let Some((file_name, parents)) = names.split_last() else {
        return Err(invalid(path, "path is empty"));
    };
    // `dir` is None while we are still at the workspace root, which we only borrow.
    let mut dir: Option<OwnedFd> = None;
    for (depth, name) in parents.iter().enumerate() {
        let parent = dir.as_ref().map_or(root, |d| d.as_fd());
        let created = fd::make_dir_at(parent, name).map_err(|e| WorkspaceError::input("create directory", path, e))?;
        let child = fd::open_dir_at(parent, name).map_err(|e| match e {
            // O_NOFOLLOW gives ELOOP for a symlink, O_DIRECTORY gives ENOTDIR for the rest.
            Errno::ELOOP | Errno::ENOTDIR => WorkspaceError::InputPathBlocked {
                path: path.to_owned(),
                component: path.split('/').take(depth + 1).collect::<Vec<_>>().join("/"),
            },
            e => WorkspaceError::input("open directory", path, e),
        })?;
        if created {
            fd::set_owner_and_mode(child.as_fd(), owner, DIR_MODE)
                .map_err(|e| WorkspaceError::input("set owner and mode of directory for", path, e))?;
        }
        dir = Some(child);
    }
    let parent = dir.as_ref().map_or(root, |d| d.as_fd());
    let out = fd::create_file_at(parent, file_name).map_err(|e| match e {
        Errno::EEXIST => WorkspaceError::input(
            "create",
            path,
            std::io::Error::new(std::io::ErrorKind::AlreadyExists, "an entry with this name already exists"),
        ),
        e => WorkspaceError::input("create", path, e),
    })?;
    let mode = if file.executable { EXECUTABLE_MODE } else { FILE_MODE };
    fd::set_owner_and_mode(out.as_fd(), owner, mode)
        .map_err(|e| WorkspaceError::input("set owner and mode of", path, e))?;
    std::fs::File::from(out).write_all(&file.bytes).map_err(|e| WorkspaceError::input("write", path, e))
}

/// Splits a relative path into names. The contract already rejected `..`, `.`, empty parts
/// and NUL; checking again costs nothing and this is where a bad name would do harm.
fn components(path: &str) -> Result<Vec<CString>, WorkspaceError> {
    path.split('/')
        .map(|part| match part {
            "" | "." | ".." => Err(invalid(path, "path must be relative with plain names (no empty, . or .. parts)")),
            _ => CString::new(part).map_err(|_| invalid(path, "path contains a NUL byte")),
        })
        .collect()
}

fn invalid(path: &str, reason: &'static str) -> WorkspaceError {
    WorkspaceError::input("check", path, std::io::Error::new(std::io::ErrorKind::InvalidInput, reason))
}
