//! Where the controllers a run needs are mounted, and what is missing.
//!
//! cgroups-rs tells us the version and the v1 mount table; the decisions are pure
//! functions of that table, so the fail-closed rules can be tested without root.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

pub use cgroups_rs::fs::hierarchies::Mountinfo;
use cgroups_rs::fs::hierarchies::{UNIFIED_MOUNTPOINT, is_cgroup2_unified_mode, mountinfo_self};

use super::error::{CgroupError, CgroupVersion};

/// The group, in each hierarchy, under which every run gets its own group.
pub const PARENT_GROUP: &str = "runbox";

/// Where to create run groups. Build it once at start-up ([`CgroupLayout::detect`]) and
/// reuse it: each run then skips parsing the mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLayout {
    /// Each controller is its own (or a co-mounted) v1 hierarchy; these are mount points.
    V1 {
        memory: PathBuf,
        pids: PathBuf,
        cpuacct: PathBuf,
        /// Only needed for a CPU quota (`cpu_cores`).
        cpu: Option<PathBuf>,
    },
    /// The unified hierarchy. `cpu` says whether the cpu controller (for `cpu.max`) is
    /// available; CPU time accounting (`cpu.stat`) is core and always there.
    V2 { root: PathBuf, cpu: bool },
}

/// One controller as `runbox doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSupport {
    pub name: &'static str,
    /// Its mount point (v1) or the cgroup2 root (v2); `None` when it is missing.
    pub path: Option<PathBuf>,
    /// A missing required controller makes every run fail.
    pub required: bool,
    pub purpose: &'static str,
    /// How to make it available, when it is missing.
    pub fix: Option<String>,
}

/// What `runbox doctor` shows about cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupSupport {
    /// `None` when no cgroup filesystem was found at all.
    pub version: Option<CgroupVersion>,
    pub controllers: Vec<ControllerSupport>,
    /// Why runs cannot start, with the fix; `None` when they can.
    pub problem: Option<String>,
}

struct Need {
    name: &'static str,
    required: bool,
    purpose: &'static str,
}

const V1_NEEDS: [Need; 4] = [
    Need { name: "memory", required: true, purpose: "memory limit, peak memory, OOM-kill count" },
    Need { name: "pids", required: true, purpose: "process limit and its hit count" },
    Need { name: "cpuacct", required: true, purpose: "CPU time of the run" },
    Need { name: "cpu", required: false, purpose: "CPU quota, only when cpu_cores is set" },
];

const V2_NEEDS: [Need; 3] = [
    Need { name: "memory", required: true, purpose: "memory limit, peak memory, OOM-kill count" },
    Need { name: "pids", required: true, purpose: "process limit and its hit count" },
    Need { name: "cpu", required: false, purpose: "CPU quota, only when cpu_cores is set" },
];

fn v1_fix(controller: &str) -> String {
    format!(
        "mount its v1 hierarchy (mkdir -p /sys/fs/cgroup/{controller} && mount -t cgroup -o \
         {controller} cgroup /sys/fs/cgroup/{controller}); if /proc/cgroups shows it disabled, \
         boot with cgroup_enable={controller}"
    )
}

fn v2_fix(controller: &str, root: &Path) -> String {
    format!(
        "{controller} is not in {}/cgroup.controllers: it is bound to a v1 hierarchy or \
         disabled; boot with systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all, or give the \
         container a delegated cgroup2 subtree",
        root.display()
    )
}

/// Which of the needed v1 controllers the mount table has. Pure.
pub fn survey_v1(mounts: &[Mountinfo]) -> Vec<ControllerSupport> {
    V1_NEEDS
        .iter()
        .map(|need| {
            // A controller is a mount option of its hierarchy ("rw,memory" or
            // "rw,cpu,cpuacct"); the first mount wins, later ones are bind mounts.
            let path = mounts
                .iter()
                .find(|m| m.fs_type.0 == "cgroup" && m.super_opts.iter().any(|o| o == need.name))
                .map(|m| m.mount_point.clone());
            ControllerSupport {
                name: need.name,
                fix: path.is_none().then(|| v1_fix(need.name)),
                path,
                required: need.required,
                purpose: need.purpose,
            }
        })
        .collect()
}

/// Which of the needed v2 controllers `cgroup.controllers` of `root` lists. Pure.
pub fn survey_v2(root: &Path, controllers: &str) -> Vec<ControllerSupport> {
    V2_NEEDS
        .iter()
        .map(|need| {
            let present = controllers.split_whitespace().any(|c| c == need.name);
            ControllerSupport {
                name: need.name,
                path: present.then(|| root.to_path_buf()),
                required: need.required,
                purpose: need.purpose,
                fix: (!present).then(|| v2_fix(need.name, root)),
            }
        })
        .collect()
}

/// The first missing required controller, as the error `create` fails with.
fn first_missing(version: CgroupVersion, survey: &[ControllerSupport]) -> Result<(), CgroupError> {
    match survey.iter().find(|c| c.required && c.path.is_none()) {
        None => Ok(()),
        Some(c) => {
            Err(CgroupError::MissingController { version, controller: c.name, fix: c.fix.clone().unwrap_or_default() })
        }
    }
}

fn path_of(survey: &[ControllerSupport], name: &str) -> Option<PathBuf> {
    survey.iter().find(|c| c.name == name)?.path.clone()
}

impl CgroupLayout {
    /// Finds the controllers on this host: v2 when /sys/fs/cgroup is cgroup2, else v1.
    /// A hybrid host (v1 controllers plus an empty /sys/fs/cgroup/unified) is v1.
    pub fn detect() -> Result<CgroupLayout, CgroupError> {
        if is_cgroup2_unified_mode() {
            CgroupLayout::from_v2_root(Path::new(UNIFIED_MOUNTPOINT))
        } else if let Some(layout) = CgroupLayout::v1_at_usual_places() {
            Ok(layout)
        } else {
            CgroupLayout::from_v1_mounts(&mountinfo_self())
        }
    }

    /// The v1 hierarchies where distributions mount them, recognized by a control file
    /// that only their controller creates. Every run detects the layout, and this costs a
    /// few stat calls where parsing the mount table costs a tenth of a millisecond or more;
    /// anything unusual falls back to the mount table.
    fn v1_at_usual_places() -> Option<CgroupLayout> {
        let root = Path::new(UNIFIED_MOUNTPOINT);
        let controller = |dir: &str, file: &str| {
            let dir = root.join(dir);
            dir.join(file).exists().then_some(dir)
        };
        Some(CgroupLayout::V1 {
            memory: controller("memory", "memory.limit_in_bytes")?,
            pids: controller("pids", "pids.max")?,
            cpuacct: controller("cpuacct", "cpuacct.usage").or_else(|| controller("cpu,cpuacct", "cpuacct.usage"))?,
            cpu: controller("cpu", "cpu.cfs_quota_us").or_else(|| controller("cpu,cpuacct", "cpu.cfs_quota_us")),
        })
    }

    /// Fails closed: a missing memory, pids or cpuacct hierarchy is an error. Pure.
    pub fn from_v1_mounts(mounts: &[Mountinfo]) -> Result<CgroupLayout, CgroupError> {
        if !mounts.iter().any(|m| m.fs_type.0 == "cgroup") {
            return Err(CgroupError::NoCgroupFs {
                path: PathBuf::from(UNIFIED_MOUNTPOINT),
                fix: "mount cgroup2 on /sys/fs/cgroup, or the v1 memory, pids and cpuacct \
                      hierarchies under it",
            });
        }
        let survey = survey_v1(mounts);
        first_missing(CgroupVersion::V1, &survey)?;
        let required = |name| path_of(&survey, name).expect("checked by first_missing");
        Ok(CgroupLayout::V1 {
            memory: required("memory"),
            pids: required("pids"),
            cpuacct: required("cpuacct"),
            cpu: path_of(&survey, "cpu"),
        })
    }

    /// Fails closed: `root` must be a cgroup2 directory offering memory and pids.
    pub fn from_v2_root(root: &Path) -> Result<CgroupLayout, CgroupError> {
        let survey = survey_v2(root, &read_v2_controllers(root)?);
        first_missing(CgroupVersion::V2, &survey)?;
        Ok(CgroupLayout::V2 { root: root.to_path_buf(), cpu: path_of(&survey, "cpu").is_some() })
    }

    pub fn version(&self) -> CgroupVersion {
        match self {
            CgroupLayout::V1 { .. } => CgroupVersion::V1,
            CgroupLayout::V2 { .. } => CgroupVersion::V2,
        }
    }
}

fn read_v2_controllers(root: &Path) -> Result<String, CgroupError> {
    let path = root.join("cgroup.controllers");
    std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        ErrorKind::NotFound => CgroupError::NoCgroupFs {
            path: root.to_path_buf(),
            fix: "point the cgroup2 root at a mounted cgroup2 filesystem (mount -t cgroup2 \
                  none /sys/fs/cgroup)",
        },
        _ => CgroupError::io("read control file", path, e),
    })
}

/// Reports the cgroup version and, for each needed controller, where it is or how to get it.
pub fn probe() -> CgroupSupport {
    let (version, controllers) = if is_cgroup2_unified_mode() {
        let root = Path::new(UNIFIED_MOUNTPOINT);
        match read_v2_controllers(root) {
            Ok(text) => (Some(CgroupVersion::V2), survey_v2(root, &text)),
            Err(e) => return CgroupSupport::broken(e),
        }
    } else {
        let mounts = mountinfo_self();
        if mounts.is_empty() {
            return CgroupSupport::broken(CgroupLayout::from_v1_mounts(&mounts).expect_err("no mounts is an error"));
        }
        (Some(CgroupVersion::V1), survey_v1(&mounts))
    };
    let problem = first_missing(version.unwrap_or(CgroupVersion::V1), &controllers).err().map(|e| e.to_string());
    CgroupSupport { version, controllers, problem }
}

impl CgroupSupport {
    fn broken(error: CgroupError) -> CgroupSupport {
        CgroupSupport { version: None, controllers: Vec::new(), problem: Some(error.to_string()) }
    }

    /// Whether runs can get their cgroup limits on this host.
    pub fn is_usable(&self) -> bool {
        self.problem.is_none()
    }
}
