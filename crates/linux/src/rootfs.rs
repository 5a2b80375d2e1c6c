//! The sandbox's root, in two halves. On the host, before the clone, the skeleton (dirs,
//! synthesized files, symlinks, empty mount points) is made on the run's own tmpfs, where
//! host root may create files freely. In the child, [`MountOp`]s then bind host paths onto it;
//! the child only mounts, because a process in a fresh user namespace whose uid is unmapped
//! cannot create files (may_create() answers EOVERFLOW).

use std::ffi::CString;
use std::fs;
use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, symlink};
use std::path::{Path, PathBuf};

use runbox_plan::{RootEntry, RunDir};

/// Host directories of the run's filesystem that appear read-write in the sandbox.
#[derive(Debug, Clone)]
pub struct RunDirs {
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub shm: PathBuf,
}

/// A mount the child performs, with its paths as C strings made before the clone.
#[derive(Debug)]
pub enum MountOp {
    /// Bind then remount read-only, nosuid and nodev.
    BindReadOnly {
        source: CString,
        target: CString,
    },
    /// Bind keeping the source mount's flags (device nodes, the run's directories).
    Bind {
        source: CString,
        target: CString,
    },
    Proc {
        target: CString,
    },
}

/// The skeleton is made; these mounts complete the root.
#[derive(Debug)]
pub struct PreparedRoot {
    pub root: CString,
    pub mounts: Vec<MountOp>,
}

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("create {path} in the sandbox root: {source}")]
    Create { path: PathBuf, source: std::io::Error },
    #[error("image path {path} is missing on this host; install it or mark it optional")]
    MissingMirror { path: String },
    #[error("path {0} cannot be passed to the kernel (contains NUL)")]
    Nul(PathBuf),
}

/// Makes the skeleton in `root_dir`, an empty directory that only root can write and everyone
/// can traverse (it becomes "/"), and returns the mounts that complete it.
pub fn prepare_root(root_dir: &Path, entries: &[RootEntry], dirs: &RunDirs) -> Result<PreparedRoot, RootError> {
    let mut mounts = Vec::new();
    for entry in entries {
        match entry {
            RootEntry::Dir { path } => mkdir(&inside(root_dir, path))?,
            RootEntry::File { path, contents } => write_file(&inside(root_dir, path), contents.as_bytes())?,
            RootEntry::Symlink { path, target } => make_symlink(Path::new(target), &inside(root_dir, path))?,
            RootEntry::Mirror { path, optional } => mirror(root_dir, path, *optional, &mut mounts)?,
            RootEntry::Device { path } => {
                let target = inside(root_dir, path);
                write_file(&target, b"")?;
                mounts.push(MountOp::Bind { source: c_path(Path::new(path))?, target: c_path(&target)? });
            }
            RootEntry::Proc { path } => {
                let target = inside(root_dir, path);
                mkdir(&target)?;
                mounts.push(MountOp::Proc { target: c_path(&target)? });
            }
            RootEntry::RunDir { dir, path } => {
                let target = inside(root_dir, path);
                mkdir(&target)?;
                let source = match dir {
                    RunDir::Workspace => &dirs.workspace,
                    RunDir::Tmp => &dirs.tmp,
                    RunDir::Shm => &dirs.shm,
                };
                mounts.push(MountOp::Bind { source: c_path(source)?, target: c_path(&target)? });
            }
        }
    }
    Ok(PreparedRoot { root: c_path(root_dir)?, mounts })
}

/// Reproduces a host path: a symlink as the same symlink, anything else as a read-only bind.
fn mirror(root_dir: &Path, path: &str, optional: bool, mounts: &mut Vec<MountOp>) -> Result<(), RootError> {
    let host = Path::new(path);
    let target = inside(root_dir, path);
    let meta = match fs::symlink_metadata(host) {
        Ok(meta) => meta,
        Err(_) if optional => return Ok(()),
        Err(_) => return Err(RootError::MissingMirror { path: path.into() }),
    };
    if meta.file_type().is_symlink() {
        let link = fs::read_link(host).map_err(|e| RootError::Create { path: host.into(), source: e })?;
        return make_symlink(&link, &target);
    }
    if meta.is_dir() {
        mkdir(&target)?
    } else {
        write_file(&target, b"")?
    }
    mounts.push(MountOp::BindReadOnly { source: c_path(host)?, target: c_path(&target)? });
    Ok(())
}

fn inside(root_dir: &Path, path: &str) -> PathBuf {
    root_dir.join(path.trim_start_matches('/'))
}

/// Parents come first in the plan's order, so one mkdir per directory is enough.
fn mkdir(path: &Path) -> Result<(), RootError> {
    match fs::DirBuilder::new().mode(0o755).create(path) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(RootError::Create { path: path.into(), source: e }),
        _ => Ok(()),
    }
}

fn write_file(path: &Path, contents: &[u8]) -> Result<(), RootError> {
    let err = |e| RootError::Create { path: path.into(), source: e };
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true).mode(0o444).custom_flags(libc::O_NOFOLLOW);
    let mut file = options.open(path).map_err(err)?;
    std::io::Write::write_all(&mut file, contents).map_err(err)
}

fn make_symlink(target: &Path, link: &Path) -> Result<(), RootError> {
    match symlink(target, link) {
        Err(e) if e.kind() != ErrorKind::AlreadyExists => Err(RootError::Create { path: link.into(), source: e }),
        _ => Ok(()),
    }
}

fn c_path(path: &Path) -> Result<CString, RootError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| RootError::Nul(path.into()))
}
