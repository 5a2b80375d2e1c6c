//! The sandbox's root. On the host, before the clone, [`prepare_root`] turns the plan's root
//! entries into ready-made operations (host mirrors resolved, every path a C string). In the
//! child, [`build_root`] makes the skeleton (dirs, synthesized files, symlinks, empty mount
//! points) on the run's tmpfs and then mounts onto it, while the supervisor writes the id maps
//! and sets up the cgroup in parallel.
//!
//! The child may create files there although its uid is not mapped in its new user namespace:
//! the tmpfs belongs to the host's user namespace, where the child's credentials (host root)
//! are mapped (may_create() only refuses ids the filesystem's namespace cannot represent).

use std::ffi::{CStr, CString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::mount::{MsFlags, mount};
use nix::sys::stat::Mode;
use runbox_plan::{RootEntry, RunDir};

/// Host directories of the run's filesystem that appear read-write in the sandbox.
#[derive(Debug, Clone)]
pub struct RunDirs {
    pub workspace: PathBuf,
    pub tmp: PathBuf,
    pub shm: PathBuf,
}

/// One piece of the root skeleton. Making it again is not an error: a run's build step and
/// program share one skeleton, and nothing in the sandbox can write to it.
#[derive(Debug)]
pub enum SkeletonOp {
    Dir(CString),
    /// A read-only (0444) file; empty for a file mount point.
    File {
        path: CString,
        contents: Vec<u8>,
    },
    Symlink {
        target: CString,
        link: CString,
    },
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

/// Everything the child does to build its root, in order.
#[derive(Debug)]
pub struct PreparedRoot {
    pub root: CString,
    pub skeleton: Vec<SkeletonOp>,
    pub mounts: Vec<MountOp>,
}

#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("read image path {path} on the host: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("image path {path} is missing on this host; install it or mark it optional")]
    MissingMirror { path: String },
    #[error("path {0} cannot be passed to the kernel (contains NUL)")]
    Nul(PathBuf),
}

/// Plans the root in `root_dir`, an empty directory that only root can write and everyone can
/// traverse (it becomes "/"). Reads the host (for mirrors) but writes nothing.
pub fn prepare_root(root_dir: &Path, entries: &[RootEntry], dirs: &RunDirs) -> Result<PreparedRoot, RootError> {
    let mut root = PreparedRoot { root: c_path(root_dir)?, skeleton: Vec::new(), mounts: Vec::new() };
    for entry in entries {
        match entry {
            RootEntry::Dir { path } => root.skeleton.push(SkeletonOp::Dir(inside(root_dir, path)?)),
            RootEntry::File { path, contents } => root.file(inside(root_dir, path)?, contents.as_bytes()),
            RootEntry::Symlink { path, target } => root.symlink(Path::new(target), inside(root_dir, path)?)?,
            RootEntry::Mirror { path, optional } => root.mirror(root_dir, path, *optional)?,
            RootEntry::Device { path } => {
                let target = inside(root_dir, path)?;
                root.file(target.clone(), b"");
                root.mounts.push(MountOp::Bind { source: c_path(Path::new(path))?, target });
            }
            RootEntry::Proc { path } => {
                let target = inside(root_dir, path)?;
                root.skeleton.push(SkeletonOp::Dir(target.clone()));
                root.mounts.push(MountOp::Proc { target });
            }
            RootEntry::RunDir { dir, path } => {
                let target = inside(root_dir, path)?;
                root.skeleton.push(SkeletonOp::Dir(target.clone()));
                let source = match dir {
                    RunDir::Workspace => &dirs.workspace,
                    RunDir::Tmp => &dirs.tmp,
                    RunDir::Shm => &dirs.shm,
                };
                root.mounts.push(MountOp::Bind { source: c_path(source)?, target });
            }
        }
    }
    Ok(root)
}

impl PreparedRoot {
    fn file(&mut self, path: CString, contents: &[u8]) {
        self.skeleton.push(SkeletonOp::File { path, contents: contents.to_vec() });
    }

    fn symlink(&mut self, target: &Path, link: CString) -> Result<(), RootError> {
        self.skeleton.push(SkeletonOp::Symlink { target: c_path(target)?, link });
        Ok(())
    }

    /// Reproduces a host path: a symlink as the same symlink, anything else as a read-only bind.
    fn mirror(&mut self, root_dir: &Path, path: &str, optional: bool) -> Result<(), RootError> {
        let host = Path::new(path);
        let target = inside(root_dir, path)?;
        let meta = match fs::symlink_metadata(host) {
            Ok(meta) => meta,
            Err(_) if optional => return Ok(()),
            Err(_) => return Err(RootError::MissingMirror { path: path.into() }),
        };
        if meta.file_type().is_symlink() {
            let link = fs::read_link(host).map_err(|e| RootError::Read { path: host.into(), source: e })?;
            return self.symlink(&link, target);
        }
        if meta.is_dir() {
            self.skeleton.push(SkeletonOp::Dir(target.clone()));
        } else {
            self.file(target.clone(), b"");
        }
        self.mounts.push(MountOp::BindReadOnly { source: c_path(host)?, target });
        Ok(())
    }

    /// The path a skeleton step or mount works on, for error messages.
    pub fn describe(&self, skeleton_index: Option<usize>, mount_index: Option<usize>) -> String {
        let path = match (skeleton_index, mount_index) {
            (Some(i), _) => self.skeleton.get(i).map(|op| match op {
                SkeletonOp::Dir(path) | SkeletonOp::File { path, .. } | SkeletonOp::Symlink { link: path, .. } => path,
            }),
            (None, Some(i)) => self.mounts.get(i).map(|op| match op {
                MountOp::BindReadOnly { target, .. } | MountOp::Bind { target, .. } | MountOp::Proc { target } => {
                    target
                }
            }),
            (None, None) => None,
        };
        path.map(|p| format!(" ({})", p.to_string_lossy())).unwrap_or_default()
    }
}

/// Makes the skeleton, in the child. Returns the failing step's index with the errno.
pub(crate) fn build_skeleton(root: &PreparedRoot) -> Result<(), (usize, Errno)> {
    for (index, op) in root.skeleton.iter().enumerate() {
        make(op).map_err(|errno| (index, errno))?;
    }
    Ok(())
}

fn make(op: &SkeletonOp) -> Result<(), Errno> {
    let made = match op {
        SkeletonOp::Dir(path) => nix::unistd::mkdir(path.as_c_str(), Mode::from_bits_truncate(0o755)),
        SkeletonOp::Symlink { target, link } => nix::unistd::symlinkat(target.as_c_str(), None, link.as_c_str()),
        SkeletonOp::File { path, contents } => write_file(path, contents),
    };
    match made {
        Err(Errno::EEXIST) | Ok(()) => Ok(()),
        Err(errno) => Err(errno),
    }
}

fn write_file(path: &CStr, contents: &[u8]) -> Result<(), Errno> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::open(path, flags, Mode::from_bits_truncate(0o444))?;
    let fd = crate::sys::process::own_fd(fd);
    let mut written = 0;
    while written < contents.len() {
        written += nix::unistd::write(&fd, &contents[written..])?;
    }
    Ok(())
}

/// Mounts one operation, in the child.
pub(crate) fn apply_mount(op: &MountOp) -> Result<(), Errno> {
    let none = None::<&CStr>;
    match op {
        MountOp::BindReadOnly { source, target } => {
            mount(Some(source.as_c_str()), target.as_c_str(), none, MsFlags::MS_BIND, none)?;
            remount_read_only(target)
        }
        MountOp::Bind { source, target } => {
            mount(Some(source.as_c_str()), target.as_c_str(), none, MsFlags::MS_BIND, none)
        }
        MountOp::Proc { target } => {
            let flags = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
            mount(Some(c"proc"), target.as_c_str(), Some(c"proc"), flags, none)
        }
    }
}

/// Remounts a bind mount read-only, nosuid and nodev. Flags the source mount already has are
/// locked in a user namespace and must be repeated, or the kernel answers EPERM
/// (mount_namespaces(7), "restrictions on mount namespaces").
pub(crate) fn remount_read_only(target: &CStr) -> Result<(), Errno> {
    let current = nix::sys::statvfs::statvfs(target)?.flags();
    use nix::sys::statvfs::FsFlags;
    let mut flags =
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV;
    for (have, keep) in [
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ] {
        if current.contains(have) {
            flags |= keep;
        }
    }
    mount(None::<&CStr>, target, None::<&CStr>, flags, None::<&CStr>)
}

fn inside(root_dir: &Path, path: &str) -> Result<CString, RootError> {
    c_path(&root_dir.join(path.trim_start_matches('/')))
}

fn c_path(path: &Path) -> Result<CString, RootError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| RootError::Nul(path.into()))
}
