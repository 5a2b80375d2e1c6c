//! The per-run directory: its layout, how it is made, measured and taken down.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::fd::{self, Owner};
use crate::{RUNS_DIR, WorkspaceError, mount, teardown};

/// Inodes the layout itself takes from `inodes`: the tmpfs root, workspace/, tmp/ and shm/.
pub const LAYOUT_INODES: u64 = 5;

/// What to create for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceSpec {
    /// Host directory holding `runs/`; created if missing.
    pub state_dir: PathBuf,
    /// Names the run directory, so it must be a plain name: ASCII letters, digits, `-`, `_`
    /// and `.`, not starting with `.`, at most 128 bytes.
    pub run_id: String,
    /// Size of the tmpfs, shared by workspace/, tmp/ and shm/. Must be non-zero (0 would
    /// mean an unlimited tmpfs). The kernel rounds it up to whole pages.
    pub disk_bytes: u64,
    /// Most inodes (files, directories, symlinks, ...) in the tmpfs, [`LAYOUT_INODES`]
    /// included. Must be greater than that.
    pub inodes: u64,
    /// Unprivileged host uid and gid the sandboxed program runs as; they own the tmpfs.
    pub owner_uid: u32,
    pub owner_gid: u32,
}

/// One run's filesystem. Layout under `<state_dir>/runs/<run_id>` (root only, 0700):
/// `fs/` is a tmpfs capped at `disk_bytes` holding `workspace/`, `tmp/` and `shm/`, each 0700
/// and owned by the run's uid; `root/` is an empty directory for the sandbox's new root.
///
/// Call [`Workspace::remove`] to tear it down and see any error, or [`Workspace::keep`] to
/// leave it for debugging. Dropping it tears it down too, but an error is then lost.
#[derive(Debug)]
pub struct Workspace {
    run_dir: PathBuf,
    fs_dir: PathBuf,
    workspace_dir: PathBuf,
    tmp_dir: PathBuf,
    shm_dir: PathBuf,
    root_dir: PathBuf,
    /// Held from creation on, so input writing and the artifact walk start from the directory
    /// we made even if the program renamed or replaced `fs/workspace` meanwhile.
    workspace_fd: OwnedFd,
    owner: Owner,
    /// Cleared by `remove` and `keep`, so `Drop` does nothing after them.
    armed: bool,
}

/// Space in the run's tmpfs, from fstatvfs(2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskUsage {
    pub used_bytes: u64,
    pub total_bytes: u64,
    pub used_inodes: u64,
    pub total_inodes: u64,
    /// No free block or no free inode is left: a write failing now failed for lack of space.
    pub full: bool,
}

impl Workspace {
    /// Creates the run directory and mounts its tmpfs. On failure everything made here is
    /// undone (except `<state_dir>/runs`, which is shared) and the error names the step.
    pub fn create(spec: &WorkspaceSpec) -> Result<Workspace, WorkspaceError> {
        check_spec(spec)?;
        let runs = ensure_runs_dir(&spec.state_dir)?;
        let run_dir = runs.join(&spec.run_id);
        match std::fs::DirBuilder::new().mode(0o700).create(&run_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(WorkspaceError::AlreadyExists { path: run_dir });
            }
            Err(e) => return Err(WorkspaceError::io("create run directory", &run_dir, e)),
        }
        // From here on the run directory is ours, so a failure removes it.
        Workspace::populate(spec, run_dir.clone()).map_err(|primary| match teardown::remove_run_dir(&run_dir) {
            Ok(()) => primary,
            Err(cleanup) => WorkspaceError::CleanupFailed { primary: Box::new(primary), cleanup: Box::new(cleanup) },
        })
    }

    fn populate(spec: &WorkspaceSpec, run_dir: PathBuf) -> Result<Workspace, WorkspaceError> {
        let owner = Owner { uid: spec.owner_uid, gid: spec.owner_gid };
        set_mode(&run_dir, 0o700)?;
        let fs_dir = run_dir.join("fs");
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&fs_dir)
            .map_err(|e| WorkspaceError::io("create directory", &fs_dir, e))?;
        mount::mount_tmpfs(&fs_dir, spec.disk_bytes, spec.inodes, owner.uid, owner.gid)
            .map_err(|e| WorkspaceError::io("mount tmpfs at", &fs_dir, e))?;
        let fs_fd = fd::open_dir_path(&fs_dir).map_err(|e| WorkspaceError::io("open", &fs_dir, e))?;
        let workspace_fd = make_owned_dir(&fs_fd, &fs_dir, c"workspace", owner)?;
        make_owned_dir(&fs_fd, &fs_dir, c"tmp", owner)?;
        make_owned_dir(&fs_fd, &fs_dir, c"shm", owner)?;
        // The sandbox's root skeleton lives on the tmpfs too: building it is cheap there, and
        // unmounting the tmpfs discards it without a single unlink. Root-owned, so the program
        // cannot change it; 0755, so it can traverse it once it is "/".
        let root_dir = fs_dir.join("root");
        make_dir_with(&fs_fd, &fs_dir, c"root", Owner { uid: 0, gid: 0 }, 0o755)?;
        Ok(Workspace {
            workspace_dir: fs_dir.join("workspace"),
            tmp_dir: fs_dir.join("tmp"),
            shm_dir: fs_dir.join("shm"),
            fs_dir,
            root_dir,
            run_dir,
            workspace_fd,
            owner,
            armed: true,
        })
    }

    /// `<state_dir>/runs/<run_id>`, with `state_dir` made canonical.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The tmpfs mount point.
    pub fn fs_dir(&self) -> &Path {
        &self.fs_dir
    }

    /// What the program sees as /workspace: its input files and its artifacts.
    pub fn workspace_dir(&self) -> &Path {
        &self.workspace_dir
    }

    pub fn tmp_dir(&self) -> &Path {
        &self.tmp_dir
    }

    pub fn shm_dir(&self) -> &Path {
        &self.shm_dir
    }

    /// An empty root-owned directory on the tmpfs, where the sandbox's root skeleton is built.
    pub fn root_dir(&self) -> &Path {
        &self.root_dir
    }

    /// A descriptor of the workspace directory, open for the workspace's whole life: the
    /// tmpfs it sits on can be sampled (fstatvfs) without any path lookup.
    pub fn workspace_fd(&self) -> &OwnedFd {
        &self.workspace_fd
    }

    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    /// How full the tmpfs is. Use `full` to tell "the program ran out of disk" from other
    /// write failures.
    pub fn disk_usage(&self) -> Result<DiskUsage, WorkspaceError> {
        let st = nix::sys::statvfs::fstatvfs(self.workspace_fd.as_fd())
            .map_err(|e| WorkspaceError::io("statvfs", &self.fs_dir, e))?;
        let block_bytes = st.fragment_size();
        let (blocks, blocks_free) = (st.blocks(), st.blocks_free());
        let (inodes, inodes_free) = (st.files(), st.files_free());
        Ok(DiskUsage {
            used_bytes: blocks.saturating_sub(blocks_free) * block_bytes,
            total_bytes: blocks * block_bytes,
            used_inodes: inodes.saturating_sub(inodes_free),
            total_inodes: inodes,
            full: blocks_free == 0 || inodes_free == 0,
        })
    }

    /// Unmounts the tmpfs (and anything else left mounted in the run directory) and deletes
    /// the run directory.
    pub fn remove(mut self) -> Result<(), WorkspaceError> {
        self.armed = false;
        teardown::remove_run_dir(&self.run_dir)
    }

    /// Leaves everything in place, still mounted, and returns the run directory. Clean it up
    /// later with [`crate::sweep_stale`].
    pub fn keep(mut self) -> PathBuf {
        self.armed = false;
        std::mem::take(&mut self.run_dir)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if self.armed {
            // Best effort: a leaked tmpfs holds up to disk_bytes of memory until the next
            // sweep. There is nowhere to report an error from here; `remove` reports it.
            let _ = teardown::remove_run_dir(&self.run_dir);
        }
    }
}

fn check_spec(spec: &WorkspaceSpec) -> Result<(), WorkspaceError> {
    let invalid = |field, reason: String| Err(WorkspaceError::InvalidSpec { field, reason });
    let id = &spec.run_id;
    let id_ok = !id.is_empty()
        && id.len() <= 128
        && !id.starts_with('.')
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if !id_ok {
        return invalid("run_id", format!("{id:?} must be 1 to 128 of [A-Za-z0-9._-], not starting with ."));
    }
    if spec.disk_bytes == 0 {
        return invalid("disk_bytes", "is 0, which tmpfs would take as unlimited".into());
    }
    if spec.inodes <= LAYOUT_INODES {
        return invalid(
            "inodes",
            format!("is {}; the layout alone takes {LAYOUT_INODES} and 0 would mean unlimited", spec.inodes),
        );
    }
    Ok(())
}

/// Creates `<state_dir>/runs` (root only) if missing and returns it in canonical form, the
/// form the mount table uses.
fn ensure_runs_dir(state_dir: &Path) -> Result<PathBuf, WorkspaceError> {
    std::fs::create_dir_all(state_dir).map_err(|e| WorkspaceError::io("create state directory", state_dir, e))?;
    let runs = state_dir.join(RUNS_DIR);
    match std::fs::DirBuilder::new().mode(0o700).create(&runs) {
        Ok(()) => set_mode(&runs, 0o700)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(WorkspaceError::io("create directory", &runs, e)),
    }
    runs.canonicalize().map_err(|e| WorkspaceError::io("resolve", &runs, e))
}

/// Sets an exact mode; DirBuilder's mode is narrowed by the process umask.
fn set_mode(path: &Path, mode: u32) -> Result<(), WorkspaceError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| WorkspaceError::io("chmod", path, e))
}

/// Creates `name` in the tmpfs root, 0700 and owned by the run's uid, and returns it open.
fn make_owned_dir(fs_fd: &OwnedFd, fs_dir: &Path, name: &CStr, owner: Owner) -> Result<OwnedFd, WorkspaceError> {
    make_dir_with(fs_fd, fs_dir, name, owner, 0o700)
}

fn make_dir_with(
    fs_fd: &OwnedFd,
    fs_dir: &Path,
    name: &CStr,
    owner: Owner,
    mode: u32,
) -> Result<OwnedFd, WorkspaceError> {
    let path = fs_dir.join(name.to_string_lossy().as_ref());
    fd::make_dir_at(fs_fd.as_fd(), name).map_err(|e| WorkspaceError::io("create directory", &path, e))?;
    let dir = fd::open_dir_at(fs_fd.as_fd(), name).map_err(|e| WorkspaceError::io("open", &path, e))?;
    fd::set_owner_and_mode(dir.as_fd(), owner, mode)
        .map_err(|e| WorkspaceError::io("set owner and mode of", &path, e))?;
    Ok(dir)
}
