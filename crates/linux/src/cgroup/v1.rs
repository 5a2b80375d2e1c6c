//! A run group on cgroup v1: one directory per hierarchy we need.
//!
//! Control files are written directly rather than through cgroups-rs (measured here:
//! both take about 0.3 ms per create+attach+remove, so speed is not the reason). Its
//! writes use `File::create`, which on a directory that is not a cgroup creates a
//! plain file and "sets" the limit; it reads a missing `oom_kill` line as 0 and
//! unwraps unexpected text; and it has no kill for v1. Here every missing file is an
//! error, so the limits fail closed.
//! See Documentation/admin-guide/cgroup-v1/memory.rst and pids.rst.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::files::{
    keyed_u64, kill_listed, kill_until_empty, make_dir, read_control, read_u64, remove_dir, require_counter,
    write_control,
};
use super::{CFS_PERIOD_US, CgroupError, CgroupLimits, CgroupStats, PARENT_GROUP, cfs_quota_us};

#[derive(Debug)]
pub(super) struct V1Group {
    memory: PathBuf,
    pids: PathBuf,
    cpuacct: PathBuf,
    cpu: Option<PathBuf>,
    /// Every distinct directory, in attach order. Co-mounted controllers
    /// (e.g. "cpu,cpuacct") share one directory, which we touch once.
    dirs: Vec<PathBuf>,
}

/// The mount points of the hierarchies a run uses.
pub(super) struct V1Mounts<'a> {
    pub memory: &'a Path,
    pub pids: &'a Path,
    pub cpuacct: &'a Path,
    pub cpu: Option<&'a Path>,
}

impl V1Mounts<'_> {
    fn distinct(&self) -> Vec<&Path> {
        let mut out: Vec<&Path> = Vec::new();
        for mount in [Some(self.memory), Some(self.pids), self.cpu, Some(self.cpuacct)].into_iter().flatten() {
            if !out.contains(&mount) {
                out.push(mount);
            }
        }
        out
    }
}

/// Makes sure `<mount>/runbox` exists in every hierarchy. Concurrent runs race to
/// create it, so an existing one is fine.
fn ensure_parents(mounts: &V1Mounts) -> Result<(), CgroupError> {
    for mount in mounts.distinct() {
        make_dir(&mount.join(PARENT_GROUP), true)?;
    }
    // With use_hierarchy=1 the parent accounts (and could cap) all runs together, and
    // anything nested under a run group counts against the run's limit. Children
    // inherit the flag; it can only change while the group has no children. Since
    // Linux 5.11 ("mm: memcg: deprecate the non-hierarchical mode") it is always 1.
    let flag = mounts.memory.join(PARENT_GROUP).join("memory.use_hierarchy");
    if flag.exists() && read_control(&flag)?.trim() != "1" {
        write_control(&flag, "1")?;
    }
    Ok(())
}

impl V1Group {
    /// Creates the run's directory in each hierarchy and sets the limits. On error,
    /// the directories made so far are removed and their errors reported too.
    pub(super) fn create(
        mounts: &V1Mounts,
        name: &str,
        limits: &CgroupLimits,
        notes: &mut Vec<String>,
    ) -> Result<V1Group, CgroupError> {
        ensure_parents(mounts)?;
        let at = |mount: &Path| mount.join(PARENT_GROUP).join(name);
        let mut group = V1Group {
            memory: at(mounts.memory),
            pids: at(mounts.pids),
            cpuacct: at(mounts.cpuacct),
            cpu: mounts.cpu.map(at),
            dirs: Vec::new(),
        };
        let result = mounts.distinct().into_iter().try_for_each(|mount| {
            make_dir(&at(mount), false)?;
            group.dirs.push(at(mount));
            Ok(())
        });
        match result.and_then(|()| group.apply(limits, notes)) {
            Ok(()) => Ok(group),
            Err(primary) => {
                let mut errors = vec![primary];
                errors.extend(group.dirs.iter().rev().filter_map(|d| remove_dir(d).err()));
                Err(CgroupError::collect(errors).expect_err("has the primary error"))
            }
        }
    }

    fn apply(&self, limits: &CgroupLimits, notes: &mut Vec<String>) -> Result<(), CgroupError> {
        let mem = &self.memory;
        let bytes = limits.memory_bytes.to_string();
        // memory first: memsw.limit must never be below limit, and both start unlimited.
        write_control(&mem.join("memory.limit_in_bytes"), &bytes)?;
        let memsw = mem.join("memory.memsw.limit_in_bytes");
        if memsw.exists() {
            // memory+swap equal to memory: the run gets no swap at all.
            write_control(&memsw, &bytes)?;
        } else {
            // Without swap accounting (swapaccount=0 or no CONFIG_MEMCG_SWAP) we cannot
            // cap swap; swappiness 0 keeps the group's anonymous memory out of swap.
            write_control(&mem.join("memory.swappiness"), "0")?;
            notes.push("cgroup_v1: no swap accounting, swap kept off by memory.swappiness=0".into());
        }
        // oom_kill_disable is inherited from the parent. With it set, a run at its limit
        // would hang instead of being killed, so we make sure the OOM killer is on.
        let oom = mem.join("memory.oom_control");
        write_control(&oom, "0")?;
        // The OOM verdict must come from the kernel's counter, not from guessing at
        // SIGKILLs; fail closed where it is missing.
        require_counter(&oom, "oom_kill", "an oom_kill counter", "needs Linux 4.13 or later")?;

        write_control(&self.pids.join("pids.max"), &limits.processes.to_string())?;
        let pids_events = self.pids.join("pids.events");
        require_counter(&pids_events, "max", "a max counter", "needs Linux 4.7 or later")?;

        if let Some(cores) = limits.cpu_cores {
            let cpu = self.cpu.as_ref().ok_or(CgroupError::MissingController {
                version: super::CgroupVersion::V1,
                controller: "cpu",
                fix: "cpu_cores needs the v1 cpu hierarchy: mount -t cgroup -o cpu cgroup \
                      /sys/fs/cgroup/cpu"
                    .into(),
            })?;
            write_control(&cpu.join("cpu.cfs_period_us"), &CFS_PERIOD_US.to_string())?;
            write_control(&cpu.join("cpu.cfs_quota_us"), &cfs_quota_us(cores).to_string())?;
        }
        Ok(())
    }

    /// The file `cpu_usage_ns` keeps open: a single number of nanoseconds.
    pub(super) fn cpu_usage_file(&self) -> PathBuf {
        self.cpuacct.join("cpuacct.usage")
    }

    pub(super) fn open_cpu_usage(&self) -> Result<File, CgroupError> {
        let path = self.cpu_usage_file();
        File::open(&path).map_err(|e| CgroupError::io("open control file", path, e))
    }

    pub(super) fn layers(&self, cpu_quota: bool) -> Vec<String> {
        let mut layers = vec!["cgroup_v1:memory", "cgroup_v1:pids"];
        if cpu_quota {
            layers.push("cgroup_v1:cpu");
        }
        layers.push("cgroup_v1:cpuacct");
        layers.into_iter().map(String::from).collect()
    }

    pub(super) fn add_process(&self, pid: i32) -> Result<(), CgroupError> {
        // cgroup.procs moves the whole thread group; `tasks` would move one thread.
        let pid = pid.to_string();
        self.dirs.iter().try_for_each(|dir| write_control(&dir.join("cgroup.procs"), &pid))
    }

    pub(super) fn processes(&self) -> Result<Vec<i32>, CgroupError> {
        super::files::procs(&self.memory)
    }

    pub(super) fn stats(&self) -> Result<CgroupStats, CgroupError> {
        let oom = self.memory.join("memory.oom_control");
        let pids_events = self.pids.join("pids.events");
        Ok(CgroupStats {
            cpu_time_ns: read_u64(&self.cpu_usage_file())?,
            peak_memory_bytes: Some(read_u64(&self.memory.join("memory.max_usage_in_bytes"))?),
            oom_kills: keyed_u64(&oom, &read_control(&oom)?, "oom_kill")?,
            pids_max_hits: keyed_u64(&pids_events, &read_control(&pids_events)?, "max")?,
        })
    }

    /// SIGKILL once what the pids hierarchy lists (every process of the run is in each of
    /// the group's hierarchies), without waiting.
    pub(super) fn signal_all(&self) -> Result<(), CgroupError> {
        kill_listed(&self.pids)
    }

    /// v1 has no cgroup.kill: SIGKILL what each hierarchy lists until all are empty.
    pub(super) fn kill_all(&self) -> Result<(), CgroupError> {
        self.dirs.iter().try_for_each(|dir| kill_until_empty(dir))
    }

    /// Removes every directory, reporting each failure.
    pub(super) fn remove_dirs(&self) -> Vec<CgroupError> {
        self.dirs.iter().rev().filter_map(|d| remove_dir(d).err()).collect()
    }
}

/// Kills and removes `runbox/<name>` in every hierarchy where it exists.
pub(super) fn sweep(mounts: &V1Mounts, name: &str) -> Result<(), CgroupError> {
    let mut errors = Vec::new();
    for mount in mounts.distinct() {
        let dir = mount.join(PARENT_GROUP).join(name);
        if !dir.exists() {
            continue;
        }
        if let Err(e) = kill_until_empty(&dir).and_then(|()| remove_dir(&dir)) {
            errors.push(e);
        }
    }
    CgroupError::collect(errors)
}

/// Run names found in any hierarchy (a crashed creation may have left only some).
pub(super) fn run_names(mounts: &V1Mounts) -> Result<Vec<String>, CgroupError> {
    let mut names = Vec::new();
    for mount in mounts.distinct() {
        for name in super::files::child_groups(&mount.join(PARENT_GROUP))? {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names.sort();
    Ok(names)
}
