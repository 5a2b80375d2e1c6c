//! Start-up recovery, before any run begins: what a crash left unfinished becomes
//! `interrupted`, its sandbox processes are stopped, and its workspaces, cgroups and incoming
//! artifacts are removed.

mod orphans;

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use runbox_linux::cgroup::{CgroupLayout, list_run_groups_in, sweep_stale_in};

use crate::ServiceError;
use crate::ledger::Ledger;
use crate::record::now_ms;

/// How long a previous service's sandboxes get to cancel and clean up by themselves.
const ORPHAN_GRACE: Duration = Duration::from_secs(10);

pub struct Recovered {
    pub interrupted: usize,
    pub problems: usize,
}

pub async fn recover(ledger: &Ledger, sandbox_dir: &Path, incoming_dir: &Path) -> Result<Recovered, ServiceError> {
    let interrupted = ledger.interrupt_unfinished(now_ms()).await?;
    for run_id in &interrupted {
        tracing::warn!(run_id, "run interrupted by the previous stop of the service; its outcome is unknown");
    }
    let mut problems = 0;
    let orphans = orphans::find(sandbox_dir);
    if !orphans.is_empty() {
        tracing::info!(count = orphans.len(), "waiting for the previous service's sandboxes to clean up");
        let killed = orphans::stop(&orphans, ORPHAN_GRACE).await;
        if !killed.is_empty() {
            tracing::warn!(pids = ?killed, "sandbox processes did not end on SIGTERM and were killed");
        }
    }
    // Only our own state directory's workspaces: `runbox run` users elsewhere are not touched.
    for swept in runbox_workspace::sweep_stale(sandbox_dir) {
        match swept {
            Ok(path) => tracing::info!(path = %path.display(), "removed a leftover workspace"),
            Err(e) => {
                problems += 1;
                tracing::error!(error = %e, "could not remove a leftover workspace");
            }
        }
    }
    problems += sweep_cgroups(ledger).await?;
    match std::fs::remove_dir_all(incoming_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ServiceError::io("remove", incoming_dir, e)),
    }
    Ok(Recovered { interrupted: interrupted.len(), problems })
}

/// Removes the cgroups of this ledger's runs (`<run_id>` and `<run_id>-build`) that are still
/// there. Groups of runs this ledger does not know belong to someone else and stay.
async fn sweep_cgroups(ledger: &Ledger) -> Result<usize, ServiceError> {
    let layout = match CgroupLayout::detect() {
        Ok(layout) => layout,
        Err(e) => {
            tracing::warn!(error = %e, "no cgroups to sweep");
            return Ok(0);
        }
    };
    let names = list_run_groups_in(&layout).unwrap_or_default();
    let candidates: Vec<String> = names.iter().map(|n| base_id(n).to_string()).collect();
    let ours: HashSet<String> = ledger.known(candidates).await?.into_iter().collect();
    let mut problems = 0;
    for swept in sweep_stale_in(&layout, |name| ours.contains(base_id(name))) {
        match swept {
            Ok(name) => tracing::info!(cgroup = %name, "removed a leftover cgroup"),
            Err(e) => {
                problems += 1;
                tracing::error!(error = %e, "could not remove a leftover cgroup");
            }
        }
    }
    Ok(problems)
}

fn base_id(group: &str) -> &str {
    group.strip_suffix("-build").unwrap_or(group)
}
