//! Writing input files: content, modes, owner, and refusing every symlink.

mod common;

use std::os::unix::fs::MetadataExt;

use common::{MIB, OWNER_GID, OWNER_UID, spec, workspace};
use runbox_contract::InputFile;
use runbox_workspace::{Workspace, WorkspaceError};

fn input(path: &str, bytes: &[u8], executable: bool) -> InputFile {
    InputFile { path: path.into(), bytes: bytes.to_vec(), executable }
}

fn mode_and_owner(path: &std::path::Path) -> (u32, u32, u32) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.mode() & 0o7777, meta.uid(), meta.gid())
}

#[test]
fn inputs_are_written_with_content_modes_and_owner() {
    let (_state, ws) = workspace();
    let files = [
        input("main.py", b"print('hi')\n", false),
        input("bin/run.sh", b"#!/bin/sh\n", true),
        input("bin/deep/data.bin", &[0, 1, 2, 255], false),
    ];
    ws.write_inputs(&files).unwrap();
    let root = ws.workspace_dir();
    assert_eq!(std::fs::read(root.join("main.py")).unwrap(), b"print('hi')\n");
    assert_eq!(std::fs::read(root.join("bin/run.sh")).unwrap(), b"#!/bin/sh\n");
    assert_eq!(std::fs::read(root.join("bin/deep/data.bin")).unwrap(), [0, 1, 2, 255]);
    assert_eq!(mode_and_owner(&root.join("main.py")), (0o644, OWNER_UID, OWNER_GID));
    assert_eq!(mode_and_owner(&root.join("bin/run.sh")), (0o755, OWNER_UID, OWNER_GID));
    assert_eq!(mode_and_owner(&root.join("bin/deep/data.bin")), (0o644, OWNER_UID, OWNER_GID));
    assert_eq!(mode_and_owner(&root.join("bin")), (0o755, OWNER_UID, OWNER_GID));
    assert_eq!(mode_and_owner(&root.join("bin/deep")), (0o755, OWNER_UID, OWNER_GID));
    ws.remove().unwrap();
}

#[test]
fn an_empty_file_is_written() {
    let (_state, ws) = workspace();
    ws.write_inputs(&[input("empty", b"", false)]).unwrap();
    assert_eq!(std::fs::metadata(ws.workspace_dir().join("empty")).unwrap().len(), 0);
    ws.remove().unwrap();
}

#[test]
fn a_symlinked_directory_in_the_path_is_not_followed() {
    let (_state, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.workspace_dir().join("lib")).unwrap();
    let err = ws.write_inputs(&[input("lib/evil.py", b"x", false)]).unwrap_err();
    match &err {
        WorkspaceError::InputPathBlocked { path, component } => {
            assert_eq!((path.as_str(), component.as_str()), ("lib/evil.py", "lib"))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing was written through the symlink");
    ws.remove().unwrap();
}

#[test]
fn a_symlink_deeper_in_the_path_is_not_followed() {
    let (_state, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.workspace_dir().join("a")).unwrap();
    std::os::unix::fs::symlink(outside.path(), ws.workspace_dir().join("a/b")).unwrap();
    let err = ws.write_inputs(&[input("a/b/c/d.txt", b"x", false)]).unwrap_err();
    assert!(matches!(&err, WorkspaceError::InputPathBlocked { component, .. } if component == "a/b"), "{err:?}");
    assert!(err.to_string().contains("symlinks are never followed"), "{err}");
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    ws.remove().unwrap();
}

#[test]
fn a_symlink_as_the_file_itself_is_not_written_through() {
    let (_state, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("target");
    std::fs::write(&target, "original").unwrap();
    std::os::unix::fs::symlink(&target, ws.workspace_dir().join("main.py")).unwrap();
    let err = ws.write_inputs(&[input("main.py", b"overwritten", false)]).unwrap_err();
    assert!(matches!(&err, WorkspaceError::Input { op: "create", path, .. } if path == "main.py"), "{err:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    ws.remove().unwrap();
}

#[test]
fn a_file_where_a_directory_is_needed_is_refused() {
    let (_state, ws) = workspace();
    std::fs::write(ws.workspace_dir().join("a"), "file").unwrap();
    let err = ws.write_inputs(&[input("a/b", b"x", false)]).unwrap_err();
    assert!(matches!(&err, WorkspaceError::InputPathBlocked { component, .. } if component == "a"), "{err:?}");
    ws.remove().unwrap();
}

#[test]
fn paths_the_contract_forbids_are_refused_here_too() {
    let (_state, ws) = workspace();
    for path in ["../escape", "/etc/passwd", "a//b", "a/./b", ""] {
        let err = ws.write_inputs(&[input(path, b"x", false)]).unwrap_err();
        assert!(matches!(&err, WorkspaceError::Input { op: "check", .. }), "{path:?}: {err:?}");
    }
    assert_eq!(std::fs::read_dir(ws.workspace_dir()).unwrap().count(), 0);
    ws.remove().unwrap();
}

#[test]
fn inputs_that_do_not_fit_are_disk_full() {
    let state = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&spec(state.path(), "small", MIB, 100)).unwrap();
    let err = ws.write_inputs(&[input("big.bin", &vec![1u8; 2 * MIB as usize], false)]).unwrap_err();
    assert!(matches!(&err, WorkspaceError::DiskFull { op: "write", path } if path == "big.bin"), "{err:?}");
    assert!(err.is_disk_full());
    assert!(err.to_string().contains("no space left"), "{err}");
    ws.remove().unwrap();
}

#[test]
fn inputs_past_the_inode_cap_are_disk_full() {
    let state = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&spec(state.path(), "few-inodes", MIB, runbox_workspace::LAYOUT_INODES + 2)).unwrap();
    // Two inodes are left after the layout: the directory and one file fit, the second does not.
    let err = ws.write_inputs(&[input("d/one", b"1", false), input("d/two", b"2", false)]).unwrap_err();
    assert!(matches!(&err, WorkspaceError::DiskFull { op: "create", path } if path == "d/two"), "{err:?}");
    ws.remove().unwrap();
}
