//! Taking a run directory apart: unmount everything under it, then delete it. Shared by
//! `Workspace::remove`, the undo path of `Workspace::create`, and `sweep_stale`.

use std::io;
use std::path::{Path, PathBuf};

use crate::{WorkspaceError, mount};

/// How many times a path may be mounted over and still be cleaned up. Each round detaches the
/// top mount of every mount point; more than this means something keeps mounting.
const MAX_UNMOUNT_ROUNDS: usize = 8;

/// Unmounts everything at or under `run_dir`, then deletes it. Nothing is deleted while
/// anything is still mounted below it, so a bind mount left by a crashed sandbox can never
/// make us delete files outside the run.
pub(crate) fn remove_run_dir(run_dir: &Path) -> Result<(), WorkspaceError> {
    unmount_all_under(run_dir)?;
    // std's remove_dir_all opens each directory with O_NOFOLLOW and unlinks relative to it,
    // so a symlink inside is removed, never followed (fixed for CVE-2022-21658).
    match std::fs::remove_dir_all(run_dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::io("remove", run_dir, e)),
    }
}

fn unmount_all_under(run_dir: &Path) -> Result<(), WorkspaceError> {
    let table_error = |e| WorkspaceError::io("read mount table for", run_dir, e);
    for _ in 0..MAX_UNMOUNT_ROUNDS {
        let points = mount::mount_points_under(run_dir).map_err(table_error)?;
        if points.is_empty() {
            return Ok(());
        }
        // Deepest first: a mount below another must go before the one that hides it.
        for point in points {
            mount::detach(&point).map_err(|e| WorkspaceError::io("unmount", &point, e))?;
        }
    }
    match mount::mount_points_under(run_dir).map_err(table_error)?.into_iter().next() {
        None => Ok(()),
        Some(mount_point) => Err(WorkspaceError::StillMounted { path: run_dir.to_owned(), mount_point }),
    }
}

/// Removes what crashed runs left under `<state_dir>/runs`: every entry is unmounted and
/// deleted. Returns one result per entry, naming the path that was removed or why it was not.
/// Call it at start-up, before any run of this state directory begins: a live run's
/// workspace would be removed too.
pub fn sweep_stale(state_dir: &Path) -> Vec<Result<PathBuf, WorkspaceError>> {
    let runs = state_dir.join(crate::RUNS_DIR);
    // Mount points in the table are canonical paths; compare like with like.
    let runs = match runs.canonicalize() {
        Ok(runs) => runs,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => return vec![Err(WorkspaceError::io("resolve", runs, e))],
    };
    let entries = match std::fs::read_dir(&runs) {
        Ok(entries) => entries,
        Err(e) => return vec![Err(WorkspaceError::io("list", runs, e))],
    };
    entries
        .map(|entry| {
            let entry = entry.map_err(|e| WorkspaceError::io("list", &runs, e))?;
            let path = entry.path();
            let is_dir = entry.file_type().map_err(|e| WorkspaceError::io("stat", &path, e))?.is_dir();
            if is_dir {
                remove_run_dir(&path)?;
            } else {
                // A stray file or symlink: unlink removes the entry itself, never a target.
                std::fs::remove_file(&path).map_err(|e| WorkspaceError::io("remove", &path, e))?;
            }
            Ok(path)
        })
        .collect()
}
