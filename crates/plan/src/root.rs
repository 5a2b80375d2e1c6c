use runbox_runtimes::Image;

use crate::{HOSTNAME, SANDBOX_GID, SANDBOX_UID, SANDBOX_USER, WORKSPACE_PATH};

/// A directory of the run's own size-capped filesystem, bound read-write into the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunDir {
    Workspace,
    Tmp,
    Shm,
}

/// One step of building the sandbox's root. Paths are absolute inside the sandbox.
/// The root itself is an empty directory that ends up read-only; only `RunDir`s are writable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootEntry {
    Dir {
        path: String,
    },
    /// A synthesized file such as /etc/passwd.
    File {
        path: String,
        contents: String,
    },
    /// A host path at the same place: a symlink is copied as a symlink, anything else is bound
    /// read-only and nosuid.
    Mirror {
        path: String,
        optional: bool,
    },
    /// A host device node bound at the same path.
    Device {
        path: String,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// procfs of the run's pid namespace.
    Proc {
        path: String,
    },
    RunDir {
        dir: RunDir,
        path: String,
    },
}

/// Device nodes the sandbox gets; no tty, no block device, nothing that reaches hardware.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// The root for `image`, in build order. /sys is never mounted.
pub fn root_entries(image: &Image) -> Vec<RootEntry> {
    let dir = |p: &str| RootEntry::Dir { path: p.into() };
    let file = |p: &str, c: String| RootEntry::File { path: p.into(), contents: c };
    let link = |p: &str, t: &str| RootEntry::Symlink { path: p.into(), target: t.into() };
    let mut entries = vec![
        dir("/etc"),
        file(
            "/etc/passwd",
            format!(
                "{SANDBOX_USER}:x:{SANDBOX_UID}:{SANDBOX_GID}:{SANDBOX_USER}:{WORKSPACE_PATH}:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
            ),
        ),
        file("/etc/group", format!("{SANDBOX_USER}:x:{SANDBOX_GID}:\nnogroup:x:65534:\n")),
        file("/etc/hosts", format!("127.0.0.1\tlocalhost {HOSTNAME}\n::1\tlocalhost ip6-localhost\n")),
        file("/etc/hostname", format!("{HOSTNAME}\n")),
        file("/etc/nsswitch.conf", "passwd: files\ngroup: files\nhosts: files\n".into()),
    ];
    entries.extend(image.mirrors.iter().map(|m| RootEntry::Mirror { path: m.path.clone(), optional: m.optional }));
    entries.push(RootEntry::Proc { path: "/proc".into() });
    entries.push(dir("/dev"));
    entries.extend(DEVICES.iter().map(|d| RootEntry::Device { path: d.to_string() }));
    entries.extend([
        link("/dev/fd", "/proc/self/fd"),
        link("/dev/stdin", "/proc/self/fd/0"),
        link("/dev/stdout", "/proc/self/fd/1"),
        link("/dev/stderr", "/proc/self/fd/2"),
        RootEntry::RunDir { dir: RunDir::Shm, path: "/dev/shm".into() },
        RootEntry::RunDir { dir: RunDir::Tmp, path: "/tmp".into() },
        RootEntry::RunDir { dir: RunDir::Workspace, path: WORKSPACE_PATH.into() },
    ]);
    entries
}
