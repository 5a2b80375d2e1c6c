//! Fail-closed detection: missing controllers and bad roots give errors that name the
//! controller and the fix. Only `probe_on_this_host` and `create_outside_cgroupfs_*`
//! touch the real system.

use std::path::{Path, PathBuf};

use runbox_linux::cgroup::{CgroupError, CgroupLayout, CgroupLimits, CgroupVersion, Mountinfo, RunCgroup, probe};

fn mount(point: &str, opts: &str) -> Mountinfo {
    Mountinfo {
        mount_root: PathBuf::from("/"),
        mount_point: PathBuf::from(point),
        fs_type: ("cgroup".to_string(), None),
        super_opts: opts.split(',').map(String::from).collect(),
    }
}

fn hybrid_without(missing: &str) -> Vec<Mountinfo> {
    ["memory", "pids", "cpu", "cpuacct", "freezer", "name=systemd"]
        .into_iter()
        .filter(|c| *c != missing)
        .map(|c| mount(&format!("/sys/fs/cgroup/{c}"), &format!("rw,{c}")))
        .collect()
}

#[test]
fn v1_layout_uses_each_controllers_mount_point() {
    let layout = CgroupLayout::from_v1_mounts(&hybrid_without("none")).unwrap();
    assert_eq!(
        layout,
        CgroupLayout::V1 {
            memory: "/sys/fs/cgroup/memory".into(),
            pids: "/sys/fs/cgroup/pids".into(),
            cpuacct: "/sys/fs/cgroup/cpuacct".into(),
            cpu: Some("/sys/fs/cgroup/cpu".into()),
        }
    );
}

#[test]
fn v1_co_mounted_cpu_and_cpuacct_share_a_mount() {
    let mut mounts = hybrid_without("cpu");
    mounts.retain(|m| !m.super_opts.contains(&"cpuacct".to_string()));
    mounts.push(mount("/sys/fs/cgroup/cpu,cpuacct", "rw,cpu,cpuacct"));
    let CgroupLayout::V1 { cpu, cpuacct, .. } = CgroupLayout::from_v1_mounts(&mounts).unwrap() else {
        panic!("expected v1")
    };
    assert_eq!(cpu.as_deref(), Some(Path::new("/sys/fs/cgroup/cpu,cpuacct")));
    assert_eq!(cpuacct, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
}

#[test]
fn each_missing_v1_controller_is_named_with_its_fix() {
    for controller in ["memory", "pids", "cpuacct"] {
        let err = CgroupLayout::from_v1_mounts(&hybrid_without(controller)).unwrap_err();
        let CgroupError::MissingController { controller: named, version, .. } = &err else {
            panic!("{controller}: unexpected {err}")
        };
        assert_eq!((*named, *version), (controller, CgroupVersion::V1));
        let message = err.to_string();
        assert!(message.contains(&format!("mount -t cgroup -o {controller}")), "{message}");
    }
}

#[test]
fn missing_v1_cpu_is_fine_until_a_quota_is_asked_for() {
    let CgroupLayout::V1 { cpu, .. } = CgroupLayout::from_v1_mounts(&hybrid_without("cpu")).unwrap() else {
        panic!("expected v1")
    };
    assert_eq!(cpu, None);
}

#[test]
fn no_cgroup_mounts_at_all_is_an_error() {
    let err = CgroupLayout::from_v1_mounts(&[]).unwrap_err();
    assert!(matches!(err, CgroupError::NoCgroupFs { .. }), "{err}");
}

#[test]
fn v2_root_that_is_not_cgroup2_is_an_error() {
    let err = CgroupLayout::from_v2_root(Path::new("/nonexistent/cgroup")).unwrap_err();
    assert!(matches!(err, CgroupError::NoCgroupFs { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/cgroup"), "{err}");
}

#[test]
fn v2_root_without_memory_names_memory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cgroup.controllers"), "cpuset cpu io pids\n").unwrap();
    let err = CgroupLayout::from_v2_root(dir.path()).unwrap_err();
    assert!(
        matches!(err, CgroupError::MissingController { controller: "memory", version: CgroupVersion::V2, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("cgroup.controllers"), "{err}");
}

#[test]
fn v2_root_with_memory_and_pids_is_usable_without_cpu() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("cgroup.controllers"), "memory pids\n").unwrap();
    let layout = CgroupLayout::from_v2_root(dir.path()).unwrap();
    assert_eq!(layout, CgroupLayout::V2 { root: dir.path().to_path_buf(), cpu: false });
}

/// On a hybrid host the cgroup2 mount has no controllers: v2 must be refused there.
#[test]
fn empty_unified_hierarchy_is_refused() {
    let unified = Path::new("/sys/fs/cgroup/unified");
    let Ok(text) = std::fs::read_to_string(unified.join("cgroup.controllers")) else {
        eprintln!("no {}: nothing to check", unified.display());
        return;
    };
    if !text.trim().is_empty() {
        eprintln!("{} has controllers {text:?}: nothing to check", unified.display());
        return;
    }
    let err = CgroupLayout::from_v2_root(unified).unwrap_err();
    assert!(matches!(err, CgroupError::MissingController { controller: "memory", .. }), "{err}");
}

#[test]
fn probe_on_this_host() {
    let support = probe();
    eprintln!("{support:#?}");
    assert!(support.is_usable(), "{:?}", support.problem);
    assert!(support.controllers.iter().all(|c| c.path.is_some() == c.fix.is_none()));
}

/// A layout whose "mount points" are plain directories: creating the group directory
/// works, but the first limit must fail (we never create control files) and the
/// directories we made must be removed.
#[test]
fn create_outside_cgroupfs_fails_and_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    let sub = |name: &str| {
        let p = dir.path().join(name);
        std::fs::create_dir(&p).unwrap();
        p
    };
    let layout = CgroupLayout::V1 { memory: sub("memory"), pids: sub("pids"), cpuacct: sub("cpuacct"), cpu: None };
    let limits = CgroupLimits { memory_bytes: 64 << 20, processes: 8, cpu_cores: None };
    let err = RunCgroup::create_in(&layout, "not-a-cgroup", &limits).unwrap_err();
    let CgroupError::Io { path, .. } = &err else { panic!("unexpected {err}") };
    assert!(path.ends_with("memory/runbox/not-a-cgroup/memory.limit_in_bytes"), "{err}");
    assert!(!path.exists(), "a control file was created on a plain filesystem");
    for ctrl in ["memory", "pids", "cpuacct"] {
        assert!(!dir.path().join(ctrl).join("runbox/not-a-cgroup").exists(), "{ctrl} left behind");
    }
}
