//! Creating, measuring and tearing down workspaces against the real kernel.

mod common;

use std::io::Write;
use std::os::unix::fs::MetadataExt;

use common::{MIB, OWNER_GID, OWNER_UID, mount_options, mounts_under, spec, workspace};
use nix::mount::{MsFlags, mount};
use runbox_workspace::{Workspace, WorkspaceError, sweep_stale};

#[test]
fn create_makes_the_layout_on_a_capped_tmpfs() {
    let (state, ws) = workspace();
    let runs = state.path().canonicalize().unwrap().join("runs");
    assert_eq!(ws.run_dir(), runs.join("run-1"));
    for (dir, mode) in [(runs.as_path(), 0o700), (ws.run_dir(), 0o700)] {
        let meta = std::fs::metadata(dir).unwrap();
        assert_eq!((meta.mode() & 0o7777, meta.uid()), (mode, 0), "{}", dir.display());
    }
    let options = mount_options(ws.fs_dir()).expect("fs_dir is a mount point");
    for want in ["tmpfs", "size=4096k", "nr_inodes=1000", "mode=755", "uid=1000000123", "gid=1000000124"] {
        assert!(options.contains(want), "{want} missing from {options}");
    }
    assert_eq!(mounts_under(ws.run_dir()), vec![ws.fs_dir().to_owned()], "only fs/ is mounted");
    for dir in [ws.workspace_dir(), ws.tmp_dir(), ws.shm_dir()] {
        let meta = std::fs::symlink_metadata(dir).unwrap();
        assert!(meta.is_dir());
        assert_eq!((meta.mode() & 0o7777, meta.uid(), meta.gid()), (0o700, OWNER_UID, OWNER_GID), "{}", dir.display());
    }
    let root = std::fs::read_dir(ws.root_dir()).unwrap();
    assert_eq!(root.count(), 0, "root_dir is empty");
    ws.remove().unwrap();
}

#[test]
fn the_mount_has_nosuid_and_nodev() {
    let (_state, ws) = workspace();
    let st = nix::sys::statvfs::statvfs(ws.fs_dir()).unwrap();
    use nix::sys::statvfs::FsFlags;
    assert!(st.flags().contains(FsFlags::ST_NOSUID | FsFlags::ST_NODEV), "{:?}", st.flags());
    ws.remove().unwrap();
}

#[test]
fn writing_past_disk_bytes_is_enospc_and_disk_usage_says_full() {
    let state = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&spec(state.path(), "disk", MIB, 100)).unwrap();
    let mut file = std::fs::File::create(ws.workspace_dir().join("big")).unwrap();
    let chunk = vec![7u8; 64 << 10];
    let mut written = 0u64;
    let err = loop {
        match file.write_all(&chunk) {
            Ok(()) => written += chunk.len() as u64,
            Err(e) => break e,
        }
        assert!(written <= 2 * MIB, "wrote {written} bytes into a 1 MiB tmpfs");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    // Directories take no blocks on tmpfs, so the whole size is usable, and no more.
    assert!((MIB / 2..=MIB).contains(&written), "wrote {written}");
    let usage = ws.disk_usage().unwrap();
    assert!(usage.full, "{usage:?}");
    assert_eq!(usage.total_bytes, MIB);
    assert!(usage.used_bytes > MIB / 2, "{usage:?}");
    ws.remove().unwrap();
}

#[test]
fn the_inode_cap_is_enforced() {
    let state = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&spec(state.path(), "inodes", MIB, 10)).unwrap();
    let usage = ws.disk_usage().unwrap();
    assert_eq!((usage.total_inodes, usage.used_inodes, usage.full), (10, runbox_workspace::LAYOUT_INODES, false));
    let mut created = 0;
    let err = loop {
        match std::fs::File::create(ws.workspace_dir().join(format!("f{created}"))) {
            Ok(_) => created += 1,
            Err(e) => break e,
        }
        assert!(created <= 10, "created {created} files with 10 inodes");
    };
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    assert_eq!(created, 10 - runbox_workspace::LAYOUT_INODES);
    assert!(ws.disk_usage().unwrap().full);
    ws.remove().unwrap();
}

#[test]
fn a_bad_spec_is_refused_before_anything_is_made() {
    let state = tempfile::tempdir().unwrap();
    for (run_id, disk_bytes, inodes, field) in [
        ("../escape", MIB, 100, "run_id"),
        ("a/b", MIB, 100, "run_id"),
        ("", MIB, 100, "run_id"),
        ("ok", 0, 100, "disk_bytes"),
        ("ok", MIB, 0, "inodes"),
        ("ok", MIB, 4, "inodes"),
    ] {
        match Workspace::create(&spec(state.path(), run_id, disk_bytes, inodes)) {
            Err(WorkspaceError::InvalidSpec { field: got, .. }) => {
                assert_eq!(got, field, "{run_id:?}")
            }
            other => panic!("{run_id:?} {disk_bytes} {inodes}: {other:?}"),
        }
    }
    assert!(!state.path().join("runs").exists(), "nothing was created");
}

#[test]
fn a_failed_mount_is_undone_and_named() {
    let state = tempfile::tempdir().unwrap();
    // uid -1 is no valid uid, so the kernel refuses the tmpfs option.
    let mut bad = spec(state.path(), "badmount", MIB, 100);
    bad.owner_uid = u32::MAX;
    let err = Workspace::create(&bad).unwrap_err();
    let message = err.to_string();
    assert!(message.starts_with("mount tmpfs at ") && message.contains("badmount/fs"), "{message}");
    let runs = state.path().join("runs");
    assert_eq!(std::fs::read_dir(&runs).unwrap().count(), 0, "no half-made run directory");
    assert!(mounts_under(&runs.canonicalize().unwrap()).is_empty());
}

#[test]
fn an_existing_run_dir_is_left_alone() {
    let (state, ws) = workspace();
    let again = Workspace::create(&spec(state.path(), "run-1", MIB, 100));
    assert!(matches!(again, Err(WorkspaceError::AlreadyExists { .. })), "{again:?}");
    assert!(mount_options(ws.fs_dir()).is_some(), "the first run's tmpfs is still mounted");
    ws.remove().unwrap();
}

#[test]
fn remove_leaves_no_mount_and_no_directory() {
    let (state, ws) = workspace();
    std::fs::write(ws.workspace_dir().join("out.txt"), "x").unwrap();
    let run_dir = ws.run_dir().to_owned();
    ws.remove().unwrap();
    assert!(mounts_under(&run_dir).is_empty(), "{:?}", mounts_under(&run_dir));
    assert!(!run_dir.exists());
    assert!(state.path().join("runs").exists(), "runs/ is shared and stays");
}

#[test]
fn dropping_a_workspace_tears_it_down() {
    let (_state, ws) = workspace();
    let run_dir = ws.run_dir().to_owned();
    drop(ws);
    assert!(mounts_under(&run_dir).is_empty());
    assert!(!run_dir.exists());
}

#[test]
fn sweep_stale_cleans_kept_workspaces_without_deleting_through_mounts() {
    let state = tempfile::tempdir().unwrap();
    let kept = Workspace::create(&spec(state.path(), "crashed", MIB, 100)).unwrap();
    std::fs::write(kept.workspace_dir().join("left.txt"), "x").unwrap();
    // A crashed sandbox left a bind mount of a host directory on root/; sweeping must unmount
    // it, not empty the host directory.
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("precious"), "keep me").unwrap();
    mount(Some(host.path()), kept.root_dir(), None::<&str>, MsFlags::MS_BIND, None::<&str>).unwrap();
    let run_dir = kept.keep();
    assert_eq!(mounts_under(&run_dir).len(), 2);

    let stray = state.path().join("runs").join("stray-file");
    std::fs::write(&stray, "").unwrap();
    let mut results: Vec<_> = sweep_stale(state.path()).into_iter().map(Result::unwrap).collect();
    results.sort();
    assert_eq!(results, vec![run_dir.clone(), run_dir.with_file_name("stray-file")]);
    assert!(!stray.exists());
    assert!(mounts_under(&run_dir).is_empty());
    assert!(!run_dir.exists());
    assert_eq!(std::fs::read_to_string(host.path().join("precious")).unwrap(), "keep me");
    assert!(sweep_stale(state.path()).is_empty(), "nothing left to sweep");
}

#[test]
fn sweep_stale_of_a_missing_state_dir_does_nothing() {
    let state = tempfile::tempdir().unwrap();
    assert!(sweep_stale(&state.path().join("never-made")).is_empty());
}
