//! One cgroup per run, on cgroup v1 or v2.
//!
//! Each run gets `runbox/<name>` in every hierarchy it needs: on v1
//! `<mount>/{memory,pids,cpuacct[,cpu]}/runbox/<name>`, on v2 `<root>/runbox/<name>`.
//! Limits: memory without swap, a process count, and an optional CPU quota. What the run
//! used comes from the kernel's own counters (CPU time, peak memory, OOM kills, pids.max
//! refusals), never from guessing at exit signals.
//!
//! Missing controllers are errors, not warnings: a run never starts unlimited.
//! cgroups-rs detects the version and the v1 mounts; the control files are then written
//! directly (see v1.rs for why).

mod error;
mod files;
mod layout;
mod v1;
mod v2;

use std::fs::File;
use std::path::{Path, PathBuf};

pub use error::{CgroupError, CgroupVersion};
pub use layout::{
    CgroupLayout, CgroupSupport, ControllerSupport, Mountinfo, PARENT_GROUP, probe, survey_v1, survey_v2,
};

use v1::{V1Group, V1Mounts};
use v2::V2Group;

/// The CFS period for a CPU quota: the kernel's default, 100 ms.
const CFS_PERIOD_US: u64 = 100_000;
/// The kernel refuses quotas under 1 ms (`min_cfs_quota_period`, kernel/sched/core.c).
const MIN_CFS_QUOTA_US: u64 = 1_000;
const MAX_CPU_CORES: f64 = 4096.0;
/// A group name is one path component; this keeps it short and printable.
const MAX_NAME_BYTES: usize = 128;

/// The limits of one run. Every field applies to all processes of the run together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CgroupLimits {
    /// Memory, swap not allowed (v1 memory.limit_in_bytes + memsw, v2 memory.max + swap.max=0).
    pub memory_bytes: u64,
    /// Processes and threads alive at once (pids.max).
    pub processes: u64,
    /// CPU quota in cores' worth of time per 100 ms period; `None` leaves CPU unthrottled.
    pub cpu_cores: Option<f64>,
}

/// What a run used, read from the kernel's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupStats {
    pub cpu_time_ns: u64,
    /// `None` when the kernel does not track it (v2 before Linux 5.19).
    pub peak_memory_bytes: Option<u64>,
    /// Processes the OOM killer killed in the group (the kernel's `oom_kill` counter).
    pub oom_kills: u64,
    /// Forks and clones refused because pids.max was reached (pids.events `max`).
    pub pids_max_hits: u64,
}

#[derive(Debug)]
enum Group {
    V1(V1Group),
    V2(V2Group),
}

/// The cgroup of one run. Call [`RunCgroup::remove`] when the run ends: dropping it
/// leaves the group behind, for [`sweep_stale`] to find.
#[derive(Debug)]
pub struct RunCgroup {
    name: String,
    group: Group,
    cpu_quota: bool,
    /// Kept open so that `cpu_usage_ns`, polled every few ms, is a single pread(2).
    cpu_usage: File,
    cpu_usage_path: PathBuf,
    notes: Vec<String>,
}

fn validate(name: &str, limits: &CgroupLimits) -> Result<(), CgroupError> {
    let bad_name = |reason| Err(CgroupError::InvalidName { name: name.to_string(), reason });
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return bad_name("must be 1 to 128 bytes");
    }
    if name == "." || name == ".." {
        return bad_name("must not be . or ..");
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if !name.chars().all(allowed) {
        return bad_name("only ASCII letters, digits, '-', '_' and '.' are allowed");
    }
    let bad_limit = |field, reason| Err(CgroupError::InvalidLimit { field, reason });
    if limits.memory_bytes < 4096 {
        return bad_limit("memory_bytes", "must be at least one page (4096)");
    }
    if limits.processes == 0 {
        return bad_limit("processes", "must be at least 1");
    }
    if let Some(cores) = limits.cpu_cores {
        if !cores.is_finite() || cores > MAX_CPU_CORES {
            return bad_limit("cpu_cores", "must be a finite number up to 4096");
        }
        if cfs_quota_us(cores) < MIN_CFS_QUOTA_US {
            return bad_limit("cpu_cores", "must be at least 0.01 (a 1 ms quota per 100 ms)");
        }
    }
    Ok(())
}

fn cfs_quota_us(cores: f64) -> u64 {
    (cores * CFS_PERIOD_US as f64).round() as u64
}

impl RunCgroup {
    /// Detects the host's cgroups, then creates the run's group (see [`RunCgroup::create_in`]).
    pub fn create(name: &str, limits: &CgroupLimits) -> Result<RunCgroup, CgroupError> {
        RunCgroup::create_in(&CgroupLayout::detect()?, name, limits)
    }

    /// Creates `runbox/<name>` in every needed hierarchy of `layout` and sets `limits`.
    ///
    /// The shared `runbox` parent is created on first use; several runs may race to
    /// create it. `name` must be unique among live runs: an existing group is an error.
    /// On failure nothing is left behind, or the cleanup error is reported too.
    pub fn create_in(layout: &CgroupLayout, name: &str, limits: &CgroupLimits) -> Result<RunCgroup, CgroupError> {
        validate(name, limits)?;
        let mut notes = Vec::new();
        let group = match layout {
            CgroupLayout::V1 { memory, pids, cpuacct, cpu } => {
                let mounts = V1Mounts {
                    memory,
                    pids,
                    cpuacct,
                    // Attaching costs time per hierarchy: join cpu only for a quota.
                    cpu: limits.cpu_cores.and(cpu.as_deref()),
                };
                Group::V1(V1Group::create(&mounts, name, limits, &mut notes)?)
            }
            CgroupLayout::V2 { root, cpu } => Group::V2(V2Group::create(root, *cpu, name, limits, &mut notes)?),
        };
        let (opened, cpu_usage_path) = match &group {
            Group::V1(g) => (g.open_cpu_usage(), g.cpu_usage_file()),
            Group::V2(g) => (g.open_cpu_usage(), g.cpu_usage_file()),
        };
        let cpu_usage = match opened {
            Ok(file) => file,
            Err(primary) => {
                let mut errors = vec![primary];
                errors.extend(remove_group(&group));
                return Err(CgroupError::collect(errors).expect_err("has the primary error"));
            }
        };
        Ok(RunCgroup {
            name: name.to_string(),
            group,
            cpu_quota: limits.cpu_cores.is_some(),
            cpu_usage,
            cpu_usage_path,
            notes,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Limits the host could only approximate (e.g. swap without swap accounting).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Moves a process, with all its threads, into the group in every hierarchy.
    ///
    /// Call it while the process is still held before exec, so that it allocates and
    /// forks only inside the group: memory charged earlier is not moved with it.
    ///
    /// Latency: a migration write-locks the global `cgroup_threadgroup_rwsem`, a percpu
    /// rwsem whose writer waits for an RCU grace period unless another migration ran
    /// moments before (kernel/locking/percpu-rwsem.c, kernel/rcu/sync.c). Measured on
    /// v1 here: about 40 us back to back, 7 to 40 ms after 100 ms of quiet. Overlap it
    /// with other setup; on v2, clone3(CLONE_INTO_CGROUP) into [`RunCgroup::v2_dir`]
    /// places the child at birth and skips the migration, and the `favordynmods` mount
    /// option removes the wait at the cost of slower forks and exits.
    pub fn add_process(&self, pid: i32) -> Result<(), CgroupError> {
        match &self.group {
            Group::V1(g) => g.add_process(pid),
            Group::V2(g) => g.add_process(pid),
        }
    }

    /// The run's directory on cgroup v2, for clone3(CLONE_INTO_CGROUP); `None` on v1,
    /// which has no such flag.
    pub fn v2_dir(&self) -> Option<&Path> {
        match &self.group {
            Group::V1(_) => None,
            Group::V2(g) => Some(g.dir()),
        }
    }

    /// The processes in the group (thread-group ids, in our pid namespace).
    pub fn processes(&self) -> Result<Vec<i32>, CgroupError> {
        match &self.group {
            Group::V1(g) => g.processes(),
            Group::V2(g) => g.processes(),
        }
    }

    /// CPU time of all processes of the run, in ns. One pread(2) on a file kept open.
    pub fn cpu_usage_ns(&self) -> Result<u64, CgroupError> {
        match &self.group {
            Group::V1(_) => files::pread_keyed_u64(&self.cpu_usage, &self.cpu_usage_path, None),
            Group::V2(_) => files::pread_keyed_u64(&self.cpu_usage, &self.cpu_usage_path, Some("usage_usec"))
                .map(|usec| usec.saturating_mul(1000)),
        }
    }

    pub fn stats(&self) -> Result<CgroupStats, CgroupError> {
        match &self.group {
            Group::V1(g) => g.stats(),
            Group::V2(g) => g.stats(),
        }
    }

    /// Kills every process of the run and waits, bounded, until the group is empty.
    /// Processes cannot leave the group on their own, and their forks land in it too.
    pub fn kill_all(&self) -> Result<(), CgroupError> {
        kill_group(&self.group)
    }

    /// Sends SIGKILL to every process of the group and returns at once; [`Self::remove`]
    /// waits for them. On v1 a process forked between the listing and the kill survives
    /// this call (not `remove`); in a sandbox, the pid namespace's end takes it anyway.
    pub fn signal_all(&self) -> Result<(), CgroupError> {
        match &self.group {
            Group::V1(g) => g.signal_all(),
            Group::V2(g) => g.signal_all(),
        }
    }

    /// Kills what is left, then removes the group from every hierarchy. Every failure
    /// is reported; after a failed kill the directories are left for [`sweep_stale`].
    pub fn remove(self) -> Result<(), CgroupError> {
        kill_group(&self.group)?;
        CgroupError::collect(remove_group(&self.group))
    }

    /// The isolation layers this group applied, in order, for the run's result.
    pub fn layers(&self) -> Vec<String> {
        match &self.group {
            Group::V1(g) => g.layers(self.cpu_quota),
            Group::V2(g) => g.layers(self.cpu_quota),
        }
    }
}

fn kill_group(group: &Group) -> Result<(), CgroupError> {
    match group {
        Group::V1(g) => g.kill_all(),
        Group::V2(g) => g.kill_all(),
    }
}

fn remove_group(group: &Group) -> Vec<CgroupError> {
    match group {
        Group::V1(g) => g.remove_dirs(),
        Group::V2(g) => g.remove_dirs(),
    }
}

/// Names of the run groups under `runbox/` (in any hierarchy, on v1).
pub fn list_run_groups() -> Result<Vec<String>, CgroupError> {
    list_run_groups_in(&CgroupLayout::detect()?)
}

pub fn list_run_groups_in(layout: &CgroupLayout) -> Result<Vec<String>, CgroupError> {
    match layout {
        CgroupLayout::V1 { memory, pids, cpuacct, cpu } => {
            v1::run_names(&V1Mounts { memory, pids, cpuacct, cpu: cpu.as_deref() })
        }
        CgroupLayout::V2 { root, .. } => v2::run_names(root),
    }
}

/// Kills the processes of every run group and removes the groups: the leftovers of
/// runs whose runbox process crashed. Call it only when no other runbox process is
/// running (at service start-up): it does not know which groups are still live.
/// Returns one entry per group: its name, or why it could not be removed.
pub fn sweep_stale() -> Vec<Result<String, CgroupError>> {
    match CgroupLayout::detect() {
        Ok(layout) => sweep_stale_in(&layout, |_| true),
        Err(e) => vec![Err(e)],
    }
}

/// [`sweep_stale`] restricted to the groups whose name `select` accepts.
pub fn sweep_stale_in(layout: &CgroupLayout, select: impl Fn(&str) -> bool) -> Vec<Result<String, CgroupError>> {
    let names = match list_run_groups_in(layout) {
        Ok(names) => names,
        Err(e) => return vec![Err(e)],
    };
    names
        .into_iter()
        .filter(|name| select(name))
        .map(|name| {
            let swept = match layout {
                CgroupLayout::V1 { memory, pids, cpuacct, cpu } => {
                    v1::sweep(&V1Mounts { memory, pids, cpuacct, cpu: cpu.as_deref() }, &name)
                }
                CgroupLayout::V2 { root, .. } => v2::sweep(root, &name),
            };
            swept.map(|()| name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> CgroupLimits {
        CgroupLimits { memory_bytes: 64 << 20, processes: 16, cpu_cores: Some(0.5) }
    }

    #[test]
    fn names_are_single_safe_components() {
        for bad in ["", ".", "..", "a/b", "../x", "a b", "é"] {
            assert!(validate(bad, &limits()).is_err(), "{bad:?} accepted");
        }
        assert!(validate("run-1_a.b", &limits()).is_ok());
    }

    #[test]
    fn limits_are_checked_before_touching_the_kernel() {
        let with = |f: fn(&mut CgroupLimits)| {
            let mut l = limits();
            f(&mut l);
            validate("ok", &l)
        };
        assert!(with(|l| l.memory_bytes = 0).is_err());
        assert!(with(|l| l.processes = 0).is_err());
        assert!(with(|l| l.cpu_cores = Some(f64::NAN)).is_err());
        assert!(with(|l| l.cpu_cores = Some(0.001)).is_err());
        assert!(with(|l| l.cpu_cores = Some(-1.0)).is_err());
        assert_eq!(cfs_quota_us(1.5), 150_000);
    }
}
