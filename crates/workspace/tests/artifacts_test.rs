//! The artifact walk against hostile workspaces: symlinks, FIFOs, sockets, devices, huge
//! sparse files, deep trees and odd names.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{MIB, spec, workspace};
use nix::sys::stat::{Mode, SFlag};
use runbox_contract::{Artifact, SkippedArtifact};
use runbox_workspace::{ArtifactCaps, ArtifactReport, ArtifactStore, MAX_WALK_DEPTH, Workspace, reason};

const HELLO_SHA256: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const ROOMY: ArtifactCaps = ArtifactCaps { max_count: 100, max_total_bytes: 64 * MIB };

fn skipped(path: &str, why: &str, size_bytes: Option<u64>) -> SkippedArtifact {
    SkippedArtifact { path: path.into(), reason: why.into(), size_bytes }
}

/// Walks on another thread so a walk that hangs (on a FIFO, say) fails the test instead of
/// blocking it forever. On a hang the tmpfs is detached by path, since the stuck thread still
/// owns the workspace, and the test panics.
fn collect_within(ws: Workspace, caps: ArtifactCaps, limit: Duration) -> (Workspace, ArtifactReport) {
    let fs_dir = ws.fs_dir().to_owned();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let report = ws.collect_artifacts(&caps);
        let _ = tx.send((ws, report));
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| {
        let _ = nix::mount::umount2(&fs_dir, nix::mount::MntFlags::MNT_DETACH);
        panic!("collect_artifacts took longer than {limit:?}")
    })
}

#[test]
fn regular_files_are_listed_sorted_with_sha256() {
    let (_state, ws) = workspace();
    let root = ws.workspace_dir();
    std::fs::create_dir_all(root.join("out/sub")).unwrap();
    std::fs::write(root.join("out/sub/hello.txt"), "hello\n").unwrap();
    std::fs::write(root.join("out.txt"), "hello\n").unwrap();
    std::fs::write(root.join("empty"), "").unwrap();
    std::fs::create_dir(root.join("empty-dir")).unwrap();
    let report = ws.collect_artifacts(&ROOMY);
    let artifact = |path: &str, size_bytes, sha: &str| Artifact { path: path.into(), size_bytes, sha256: sha.into() };
    assert_eq!(
        report.artifacts,
        vec![
            artifact("empty", 0, EMPTY_SHA256),
            artifact("out.txt", 6, HELLO_SHA256),
            artifact("out/sub/hello.txt", 6, HELLO_SHA256)
        ]
    );
    assert_eq!((report.skipped, report.truncated), (vec![], false));
    ws.remove().unwrap();
}

#[test]
fn listed_files_are_kept_once_each_in_the_store_by_digest() {
    let (state, ws) = workspace();
    let root = ws.workspace_dir();
    std::fs::write(root.join("a.txt"), "hello\n").unwrap();
    std::fs::write(root.join("b.txt"), "hello\n").unwrap();
    std::fs::write(root.join("empty"), "").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
    let store = ArtifactStore::open(state.path().join("store")).unwrap();
    let report = ws.collect_artifacts_into(&ROOMY, Some(&store));
    assert_eq!(report.artifacts.len(), 3);
    let mut stored: Vec<String> = std::fs::read_dir(state.path().join("store"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    stored.sort();
    assert_eq!(stored, vec![HELLO_SHA256.to_string(), EMPTY_SHA256.to_string()], "one file per digest, no temp files");
    assert_eq!(std::fs::read(store.path_of(HELLO_SHA256).unwrap()).unwrap(), b"hello\n");
    assert_eq!(store.path_of("../etc/passwd"), None, "only digests name stored files");
    ws.remove().unwrap();
}

#[test]
fn a_symlink_to_etc_passwd_is_skipped_and_not_hashed() {
    let (_state, ws) = workspace();
    let root = ws.workspace_dir();
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc")).unwrap();
    let report = ws.collect_artifacts(&ROOMY);
    assert_eq!(report.artifacts, vec![], "nothing behind a symlink is listed");
    assert_eq!(report.skipped, vec![skipped("etc", reason::SYMLINK, None), skipped("passwd", reason::SYMLINK, None)]);
    assert!(!report.truncated);
    ws.remove().unwrap();
}

#[test]
fn a_fifo_does_not_hang_and_is_reported() {
    let (_state, ws) = workspace();
    nix::unistd::mkfifo(&ws.workspace_dir().join("pipe"), Mode::from_bits_truncate(0o644)).unwrap();
    let (ws, report) = collect_within(ws, ROOMY, Duration::from_secs(5));
    assert_eq!(report.skipped, vec![skipped("pipe", reason::FIFO, None)]);
    assert_eq!(report.artifacts, vec![]);
    ws.remove().unwrap();
}

#[test]
fn sockets_and_devices_are_reported() {
    let (_state, ws) = workspace();
    let root = ws.workspace_dir();
    let _listener = std::os::unix::net::UnixListener::bind(root.join("sock")).unwrap();
    // /dev/null's numbers; the tmpfs is nodev, so it could not be opened anyway.
    nix::sys::stat::mknod(
        &root.join("null"),
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o666),
        nix::sys::stat::makedev(1, 3),
    )
    .unwrap();
    let (ws, report) = collect_within(ws, ROOMY, Duration::from_secs(5));
    assert_eq!(report.skipped, vec![skipped("null", reason::DEVICE, None), skipped("sock", reason::SOCKET, None)]);
    ws.remove().unwrap();
}

#[test]
fn a_sparse_terabyte_file_is_too_large_and_costs_nothing() {
    let (_state, ws) = workspace();
    let file = std::fs::File::create(ws.workspace_dir().join("huge")).unwrap();
    file.set_len(1 << 40).unwrap();
    std::fs::write(ws.workspace_dir().join("small"), "hello\n").unwrap();
    let started = Instant::now();
    let (ws, report) = collect_within(ws, ROOMY, Duration::from_secs(5));
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    assert_eq!(report.skipped, vec![skipped("huge", reason::TOO_LARGE, Some(1 << 40))]);
    assert_eq!(report.artifacts.len(), 1);
    assert!(report.truncated);
    ws.remove().unwrap();
}

#[test]
fn the_count_cap_leaves_files_over_count() {
    let (_state, ws) = workspace();
    for name in ["a", "b", "c", "d"] {
        std::fs::write(ws.workspace_dir().join(name), "hello\n").unwrap();
    }
    let report = ws.collect_artifacts(&ArtifactCaps { max_count: 2, max_total_bytes: MIB });
    let listed: Vec<_> = report.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(listed, ["a", "b"]);
    assert_eq!(
        report.skipped,
        vec![skipped("c", reason::OVER_COUNT, Some(6)), skipped("d", reason::OVER_COUNT, Some(6))]
    );
    assert!(report.truncated);
    ws.remove().unwrap();
}

#[test]
fn the_byte_budget_is_shared_and_never_overrun() {
    let (_state, ws) = workspace();
    let root = ws.workspace_dir();
    std::fs::write(root.join("1-first"), vec![b'x'; 600]).unwrap();
    std::fs::write(root.join("2-second"), vec![b'y'; 600]).unwrap();
    std::fs::write(root.join("3-third"), vec![b'z'; 400]).unwrap();
    let report = ws.collect_artifacts(&ArtifactCaps { max_count: 10, max_total_bytes: 1000 });
    let listed: Vec<_> = report.artifacts.iter().map(|a| (a.path.as_str(), a.size_bytes)).collect();
    assert_eq!(listed, [("1-first", 600), ("3-third", 400)]);
    assert_eq!(report.skipped, vec![skipped("2-second", reason::OVER_TOTAL_BYTES, Some(600))]);
    assert!(report.truncated);
    ws.remove().unwrap();
}

#[test]
fn a_tree_deeper_than_the_bound_is_cut_and_reported() {
    let (_state, ws) = workspace();
    let mut deepest = ws.workspace_dir().to_owned();
    for _ in 0..MAX_WALK_DEPTH + 3 {
        deepest.push("d");
    }
    std::fs::create_dir_all(&deepest).unwrap();
    std::fs::write(deepest.join("lost.txt"), "x").unwrap();
    let shallow = ws.workspace_dir().join(["d"; MAX_WALK_DEPTH].join("/"));
    std::fs::write(shallow.join("found.txt"), "hello\n").unwrap();

    let report = ws.collect_artifacts(&ROOMY);
    let found = format!("{}/found.txt", ["d"; MAX_WALK_DEPTH].join("/"));
    assert_eq!(report.artifacts.iter().map(|a| a.path.as_str()).collect::<Vec<_>>(), [found.as_str()]);
    assert_eq!(report.skipped, vec![skipped(&["d"; MAX_WALK_DEPTH + 1].join("/"), reason::TOO_DEEP, None)]);
    ws.remove().unwrap();
}

#[test]
fn non_utf8_names_are_reported_lossily() {
    let (_state, ws) = workspace();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    std::fs::write(ws.workspace_dir().join(name), "x").unwrap();
    let report = ws.collect_artifacts(&ROOMY);
    assert_eq!(report.skipped, vec![skipped("bad\u{fffd}name", reason::NON_UTF8_NAME, None)]);
    assert_eq!(report.artifacts, vec![]);
    ws.remove().unwrap();
}

#[test]
fn a_renamed_workspace_dir_does_not_redirect_the_walk() {
    // The walk starts from the descriptor taken at create, not from the path, so replacing
    // fs/workspace with a symlink to / cannot make us hash host files.
    let state = tempfile::tempdir().unwrap();
    let ws = Workspace::create(&spec(state.path(), "swap", MIB, 100)).unwrap();
    std::fs::write(ws.workspace_dir().join("mine.txt"), "hello\n").unwrap();
    std::fs::rename(ws.workspace_dir(), ws.fs_dir().join("moved")).unwrap();
    std::os::unix::fs::symlink(Path::new("/etc"), ws.workspace_dir()).unwrap();
    let report = ws.collect_artifacts(&ROOMY);
    assert_eq!(report.artifacts.iter().map(|a| a.path.as_str()).collect::<Vec<_>>(), ["mine.txt"]);
    assert_eq!(report.artifacts[0].sha256, HELLO_SHA256);
    ws.remove().unwrap();
}
