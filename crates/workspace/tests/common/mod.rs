//! Shared by the integration tests. They need root: they mount tmpfs and chown.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use runbox_workspace::{Workspace, WorkspaceSpec};

/// An unprivileged host uid/gid like the ones runs get.
pub const OWNER_UID: u32 = 1_000_000_123;
pub const OWNER_GID: u32 = 1_000_000_124;
pub const MIB: u64 = 1 << 20;

pub fn spec(state_dir: &Path, run_id: &str, disk_bytes: u64, inodes: u64) -> WorkspaceSpec {
    assert!(nix::unistd::geteuid().is_root(), "these tests mount tmpfs and need root");
    WorkspaceSpec {
        state_dir: state_dir.to_owned(),
        run_id: run_id.into(),
        disk_bytes,
        inodes,
        owner_uid: OWNER_UID,
        owner_gid: OWNER_GID,
    }
}

/// A 4 MiB, 1000-inode workspace in a fresh state directory. Keep the TempDir alive.
pub fn workspace() -> (tempfile::TempDir, Workspace) {
    let state = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&spec(state.path(), "run-1", 4 * MIB, 1000)).unwrap();
    (state, ws)
}

/// Mount points at or under `dir`, read straight from the kernel's table.
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|point| point.starts_with(dir))
        .collect()
}

/// The mount options of the filesystem mounted at `point` (the super options after ` - `).
pub fn mount_options(point: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table
        .lines()
        .find(|line| line.split(' ').nth(4) == point.to_str())
        .map(|line| line.split(" - ").nth(1).unwrap().to_owned())
}
