//! A run group on cgroup v2: one directory in the unified hierarchy.
//!
//! Control files are written directly, as in v1 (see v1.rs for why).
//! See Documentation/admin-guide/cgroup-v2.rst.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::files::{
    keyed_u64, kill_listed, kill_until_empty, make_dir, read_control, read_u64, remove_dir, require_counter,
    wait_until_empty, write_control,
};
use super::{CFS_PERIOD_US, CgroupError, CgroupLimits, CgroupStats, CgroupVersion, PARENT_GROUP, cfs_quota_us};

#[derive(Debug)]
pub(super) struct V2Group {
    dir: PathBuf,
}

/// Enables `controllers` for the children of `dir`, writing only what is missing.
///
/// "No internal processes" rule (cgroup-v2.rst): a non-root group that hands controllers
/// to its children must hold no processes itself. `runbox` never does; a cgroup
/// namespace root that still holds processes fails here with EBUSY.
fn enable_subtree(dir: &Path, controllers: &[&str]) -> Result<(), CgroupError> {
    let file = dir.join("cgroup.subtree_control");
    let enabled = read_control(&file)?;
    let missing: Vec<String> =
        controllers.iter().filter(|c| !enabled.split_whitespace().any(|e| e == **c)).map(|c| format!("+{c}")).collect();
    if missing.is_empty() {
        return Ok(());
    }
    write_control(&file, &missing.join(" ")).map_err(|e| match e {
        CgroupError::Io { source, .. } if source.raw_os_error() == Some(libc::EBUSY) => {
            CgroupError::InternalProcesses { path: dir.to_path_buf() }
        }
        other => other,
    })
}

impl V2Group {
    /// Creates `<root>/runbox/<name>` and sets the limits; on error the new
    /// directory is removed and that error reported too.
    pub(super) fn create(
        root: &Path,
        cpu_available: bool,
        name: &str,
        limits: &CgroupLimits,
        notes: &mut Vec<String>,
    ) -> Result<V2Group, CgroupError> {
        if limits.cpu_cores.is_some() && !cpu_available {
            return Err(CgroupError::MissingController {
                version: CgroupVersion::V2,
                controller: "cpu",
                fix: format!("cpu_cores needs the cpu controller in {}/cgroup.controllers", root.display()),
            });
        }
        let mut controllers = vec!["memory", "pids"];
        if cpu_available {
            controllers.push("cpu");
        }
        // Concurrent runs race here; enabling an enabled controller and an existing
        // parent directory are both fine.
        enable_subtree(root, &controllers)?;
        let parent = root.join(PARENT_GROUP);
        make_dir(&parent, true)?;
        enable_subtree(&parent, &controllers)?;

        let group = V2Group { dir: parent.join(name) };
        make_dir(&group.dir, false)?;
        group.apply(limits, notes).map_err(|primary| match remove_dir(&group.dir) {
            Ok(()) => primary,
            Err(cleanup) => CgroupError::Several(vec![primary, cleanup]),
        })?;
        Ok(group)
    }

    fn apply(&self, limits: &CgroupLimits, notes: &mut Vec<String>) -> Result<(), CgroupError> {
        let dir = &self.dir;
        write_control(&dir.join("memory.max"), &limits.memory_bytes.to_string())?;
        let swap = dir.join("memory.swap.max");
        if swap.exists() {
            write_control(&swap, "0")?;
        } else {
            // Only absent when the kernel has no swap support (or swapaccount=0 on
            // old kernels): nothing to cap.
            notes.push("cgroup_v2: no memory.swap.max, swap not capped".into());
        }
        // memory.oom.group stays 0: like v1, the kernel kills the biggest process
        // and the run's own code sees it; the runner kills the rest at the end.
        let events = dir.join("memory.events");
        // The OOM verdict must come from the kernel's counter; fail closed without it.
        require_counter(&events, "oom_kill", "an oom_kill counter", "needs Linux 4.13 or later")?;
        if !dir.join("memory.peak").exists() {
            notes.push("cgroup_v2: no memory.peak (Linux before 5.19), peak memory unknown".into());
        }

        write_control(&dir.join("pids.max"), &limits.processes.to_string())?;
        let pids_events = dir.join("pids.events");
        require_counter(&pids_events, "max", "a max counter", "needs Linux 4.7 or later")?;

        if let Some(cores) = limits.cpu_cores {
            let value = format!("{} {CFS_PERIOD_US}", cfs_quota_us(cores));
            write_control(&dir.join("cpu.max"), &value)?;
        }
        Ok(())
    }

    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file `cpu_usage_ns` keeps open; its first line is `usage_usec N`.
    pub(super) fn cpu_usage_file(&self) -> PathBuf {
        self.dir.join("cpu.stat")
    }

    pub(super) fn open_cpu_usage(&self) -> Result<File, CgroupError> {
        let path = self.cpu_usage_file();
        File::open(&path).map_err(|e| CgroupError::io("open control file", path, e))
    }

    pub(super) fn layers(&self, cpu_quota: bool) -> Vec<String> {
        let mut layers = vec!["cgroup_v2:memory", "cgroup_v2:pids"];
        if cpu_quota {
            layers.push("cgroup_v2:cpu");
        }
        layers.into_iter().map(String::from).collect()
    }

    pub(super) fn add_process(&self, pid: i32) -> Result<(), CgroupError> {
        write_control(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    pub(super) fn processes(&self) -> Result<Vec<i32>, CgroupError> {
        super::files::procs(&self.dir)
    }

    pub(super) fn stats(&self) -> Result<CgroupStats, CgroupError> {
        let stat = self.cpu_usage_file();
        let mem_events = self.dir.join("memory.events");
        let pids_events = self.dir.join("pids.events");
        let peak = self.dir.join("memory.peak");
        let usage_usec = keyed_u64(&stat, &read_control(&stat)?, "usage_usec")?;
        Ok(CgroupStats {
            cpu_time_ns: usage_usec.saturating_mul(1000),
            peak_memory_bytes: if peak.exists() { Some(read_u64(&peak)?) } else { None },
            oom_kills: keyed_u64(&mem_events, &read_control(&mem_events)?, "oom_kill")?,
            pids_max_hits: keyed_u64(&pids_events, &read_control(&pids_events)?, "max")?,
        })
    }

    pub(super) fn kill_all(&self) -> Result<(), CgroupError> {
        kill_group(&self.dir)
    }

    /// `cgroup.kill` where the kernel has it, else SIGKILL once what the group lists;
    /// without waiting either way.
    pub(super) fn signal_all(&self) -> Result<(), CgroupError> {
        let kill_file = self.dir.join("cgroup.kill");
        if kill_file.exists() { write_control(&kill_file, "1") } else { kill_listed(&self.dir) }
    }

    pub(super) fn remove_dirs(&self) -> Vec<CgroupError> {
        remove_dir(&self.dir).err().into_iter().collect()
    }
}

/// `cgroup.kill` (Linux 5.14) kills the whole subtree at once, with no pid-reuse window
/// and no race with forks; before it, fall back to the v1 loop.
fn kill_group(dir: &Path) -> Result<(), CgroupError> {
    let kill_file = dir.join("cgroup.kill");
    if kill_file.exists() {
        write_control(&kill_file, "1")?;
        wait_until_empty(dir)
    } else {
        kill_until_empty(dir)
    }
}

/// Kills and removes `<root>/runbox/<name>`.
pub(super) fn sweep(root: &Path, name: &str) -> Result<(), CgroupError> {
    let dir = root.join(PARENT_GROUP).join(name);
    kill_group(&dir).and_then(|()| remove_dir(&dir))
}

pub(super) fn run_names(root: &Path) -> Result<Vec<String>, CgroupError> {
    super::files::child_groups(&root.join(PARENT_GROUP))
}
