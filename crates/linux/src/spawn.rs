//! The supervisor's half of starting a sandbox: channels, clone, id maps, cgroup, go.

use std::os::fd::{AsRawFd, OwnedFd};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
use nix::unistd::{Pid, pipe2};

use crate::cgroup::{CgroupLimits, RunCgroup};
use crate::child::{ChildFds, ChildPlan, init_main};
use crate::sys::process::{self, CloneResult};
use crate::{SandboxFailure, failure};

/// Namespaces of every run. The user namespace comes first in the kernel's own order, so the
/// others are owned by it and the child holds capabilities over them for its setup.
const NAMESPACES: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWNET;

/// The supervisor's ends of a started sandbox.
pub struct Started {
    pub init: Pid,
    pub pidfd: OwnedFd,
    pub setup: OwnedFd,
    pub status: OwnedFd,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

struct Channels {
    setup: (OwnedFd, OwnedFd),
    status: (OwnedFd, OwnedFd),
    stdin: (OwnedFd, OwnedFd),
    stdout: (OwnedFd, OwnedFd),
    stderr: (OwnedFd, OwnedFd),
}

fn channels() -> Result<Channels, Errno> {
    let cloexec = OFlag::O_CLOEXEC;
    let setup = socketpair(AddressFamily::Unix, SockType::SeqPacket, None, SockFlag::SOCK_CLOEXEC)?;
    let status = pipe2(cloexec)?;
    let (stdin_r, stdin_w) = pipe2(cloexec)?;
    let stdout = pipe2(cloexec)?;
    let stderr = pipe2(cloexec)?;
    Ok(Channels { setup, status, stdin: (stdin_w, stdin_r), stdout, stderr })
}

/// Clones the sandbox's init, then, while init builds its root, maps its ids, creates the
/// run's cgroup `name`, moves init into it and lets it go on.
/// On any failure the child is killed and reaped before returning.
pub fn start(
    plan: &ChildPlan,
    name: &str,
    limits: &CgroupLimits,
    host_uid: u32,
    host_gid: u32,
) -> Result<(Started, RunCgroup), SandboxFailure> {
    let ch = channels().map_err(|e| failure("channels", format!("create pipes: {e}")))?;
    let fds = ChildFds {
        setup: ch.setup.1.as_raw_fd(),
        status: ch.status.1.as_raw_fd(),
        stdin: ch.stdin.1.as_raw_fd(),
        stdout: ch.stdout.1.as_raw_fd(),
        stderr: ch.stderr.1.as_raw_fd(),
    };
    let init = match process::clone_process(NAMESPACES) {
        // init closes everything but its own ends first (an open stdin write end would keep
        // the program from ever seeing end-of-file).
        Ok(CloneResult::Child) => init_main(plan, fds),
        Ok(CloneResult::Parent(pid)) => pid,
        Err(e) => {
            return Err(failure(
                "namespaces",
                format!("clone with user, pid, mount, ipc, uts and net namespaces: {e}; run `runbox doctor`"),
            ));
        }
    };
    let Channels { setup, status, stdin, stdout, stderr } = ch;
    let started = Started {
        init,
        pidfd: open_pidfd(init)?,
        setup: setup.0,
        status: status.0,
        stdin: stdin.0,
        stdout: stdout.0,
        stderr: stderr.0,
    };
    let cgroup = RunCgroup::create(name, limits).map_err(|e| failure("cgroup", format!("{e}; run `runbox doctor`")));
    match cgroup.and_then(|cgroup| admit(&started, &cgroup, host_uid, host_gid).map(|()| cgroup)) {
        Ok(cgroup) => Ok((started, cgroup)),
        Err(e) => {
            kill_and_reap(init);
            Err(e)
        }
    }
}

fn open_pidfd(init: Pid) -> Result<OwnedFd, SandboxFailure> {
    process::pidfd_open(init).map_err(|e| {
        kill_and_reap(init);
        failure("pidfd", format!("pidfd_open: {e}"))
    })
}

/// What the child waits for before its setup: id maps, cgroup membership, then one byte.
fn admit(started: &Started, cgroup: &RunCgroup, host_uid: u32, host_gid: u32) -> Result<(), SandboxFailure> {
    let pid = started.init.as_raw();
    let sandbox = (runbox_plan::SANDBOX_UID, runbox_plan::SANDBOX_GID);
    // Only one id is mapped: the program's. uid 0 stays unmapped, so nothing in the sandbox
    // is root of its user namespace after setup (user_namespaces(7)).
    std::fs::write(format!("/proc/{pid}/uid_map"), format!("{} {host_uid} 1\n", sandbox.0))
        .map_err(|e| failure("user_namespace", format!("write uid_map: {e}")))?;
    std::fs::write(format!("/proc/{pid}/gid_map"), format!("{} {host_gid} 1\n", sandbox.1))
        .map_err(|e| failure("user_namespace", format!("write gid_map: {e}")))?;
    cgroup.add_process(pid).map_err(|e| failure("cgroup", format!("move the sandbox into its cgroup: {e}")))?;
    nix::unistd::write(&started.setup, &[1]).map_err(|e| failure("setup_channel", format!("start the child: {e}")))?;
    Ok(())
}

pub fn kill_and_reap(pid: Pid) {
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::wait::waitpid(pid, None);
}
