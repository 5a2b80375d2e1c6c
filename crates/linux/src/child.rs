//! Code that runs after the clone, inside the new namespaces. It runs in a copy of a
//! single-threaded supervisor, and it only makes syscalls on data prepared before the clone.
//!
//! pid 1 of the new pid namespace ("init") builds the root and drops privileges, then forks
//! the program as pid 2 and reaps. When the program ends, init reports its wait status and
//! exits, and the kernel kills whatever else is left in the namespace (pid_namespaces(7)), so
//! no daemonized child outlives a run.

use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{Gid, Uid, chdir, dup2, pivot_root, sethostname, setresgid, setresuid, setsid};

use crate::protocol::{SetupFailure, Step};
use crate::rootfs::{PreparedRoot, apply_mount, build_skeleton, remount_read_only};
use crate::seccomp::SeccompFilter;
use crate::sys::process::{self, CloneResult};

/// Everything the child needs, prepared by the supervisor before the clone.
pub struct ChildPlan<'a> {
    pub root: &'a PreparedRoot,
    pub hostname: &'a str,
    pub cwd: CString,
    pub uid: u32,
    pub gid: u32,
    pub exec: &'a ExecArgs,
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    pub seccomp: &'a SeccompFilter,
    /// Where the supervisor's argv and environment strings are, to scrub them in init.
    pub command_line_areas: Option<[(usize, usize); 2]>,
}

/// The child's ends of the channels to the supervisor.
#[derive(Clone, Copy)]
pub struct ChildFds {
    /// Setup socket: one byte in to start, failures out, close-on-exec.
    pub setup: RawFd,
    /// Write end of the pipe init reports the program's wait status on.
    pub status: RawFd,
    pub stdin: RawFd,
    pub stdout: RawFd,
    pub stderr: RawFd,
}

/// argv and envp as C strings plus the NULL-terminated pointer arrays execve wants.
pub struct ExecArgs {
    pub path: CString,
    _strings: Vec<CString>,
    pub argv: Vec<*const libc::c_char>,
    pub envp: Vec<*const libc::c_char>,
}

impl ExecArgs {
    pub fn new(argv: &[String], env: &[(String, String)]) -> Result<ExecArgs, std::ffi::NulError> {
        let args: Vec<CString> = argv.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>()?;
        let vars: Vec<CString> = env.iter().map(|(k, v)| CString::new(format!("{k}={v}"))).collect::<Result<_, _>>()?;
        let path = args.first().cloned().unwrap_or_default();
        let pointers =
            |v: &[CString]| v.iter().map(|s| s.as_ptr()).chain(std::iter::once(std::ptr::null())).collect::<Vec<_>>();
        let (argv, envp) = (pointers(&args), pointers(&vars));
        let mut strings = args;
        strings.extend(vars);
        // The pointers stay valid: moving a CString moves its handle, not its heap buffer.
        Ok(ExecArgs { path, _strings: strings, argv, envp })
    }
}

type StepResult = Result<(), (Step, Errno, u32)>;

fn at(step: Step) -> impl Fn(Errno) -> (Step, Errno, u32) {
    move |errno| (step, errno, 0)
}

/// Entry point of pid 1. Never returns.
pub fn init_main(plan: &ChildPlan, fds: ChildFds) -> ! {
    // init is a copy of the supervisor that never execs: it must not keep the supervisor's
    // descriptors, and its command line and environment must not show through /proc/1.
    if let Err(errno) = close_all_but(&[fds.setup, fds.status, fds.stdin, fds.stdout, fds.stderr]) {
        report_and_exit(fds.setup, Step::CloseFds, errno, 0);
    }
    if let Some(areas) = plan.command_line_areas {
        process::scrub_command_line(areas, b"runbox-init");
    }
    if let Err((step, errno, detail)) = setup_namespaces(plan, fds) {
        report_and_exit(fds.setup, step, errno, detail);
    }
    let program = match process::clone_process(0) {
        Ok(CloneResult::Child) => program_main(plan, fds),
        Ok(CloneResult::Parent(pid)) => pid,
        Err(errno) => report_and_exit(fds.setup, Step::ForkProgram, errno, 0),
    };
    // Only the program keeps these: the setup socket's end-of-file then means "exec done",
    // and the output pipes close as soon as the program's processes are gone.
    for fd in [fds.setup, fds.stdin, fds.stdout, fds.stderr] {
        let _ = nix::unistd::close(fd);
    }
    reap_until(program.as_raw(), fds.status)
}

/// The ordered setup of pid 1. The order is part of the security: see each step's comment.
fn setup_namespaces(plan: &ChildPlan, fds: ChildFds) -> StepResult {
    // First: if the supervisor dies from here on, so do we (and, as pid 1, the whole
    // namespace with us).
    process::set_parent_death_signal(libc::SIGKILL).map_err(at(Step::ParentDeathSignal))?;
    // The root is built while the supervisor writes our id maps and sets up the cgroup: none
    // of it needs either, and none of it runs code of the program.
    build_root(plan)?;
    sethostname(plan.hostname).map_err(at(Step::Hostname))?;
    process::loopback_up().map_err(at(Step::Loopback))?;
    // The supervisor has written our uid/gid maps and put us in the run's cgroup.
    wait_for_parent(fds.setup).map_err(at(Step::WaitForParent))?;
    // After the cgroup move, so the namespace's root is the run's own cgroup.
    unshare(CloneFlags::CLONE_NEWCGROUP).map_err(at(Step::CgroupNamespace))?;
    drop_privileges(plan)?;
    // As the program's uid, now that it is mapped: the workspace is 0700 and its own.
    chdir(plan.cwd.as_c_str()).map_err(at(Step::Chdir))?;
    // Setting the uid cleared the parent-death signal (prctl(2)); set it again, then make
    // sure the supervisor did not die in between.
    process::set_parent_death_signal(libc::SIGKILL).map_err(at(Step::ParentDeathSignal))?;
    if supervisor_gone(fds.setup) {
        process::exit_now(1);
    }
    Ok(())
}

fn build_root(plan: &ChildPlan) -> StepResult {
    build_skeleton(plan.root).map_err(|(index, errno)| (Step::BuildRoot, errno, index as u32))?;
    let root = plan.root.root.as_c_str();
    // pivot_root needs the new root to be a mount point.
    mount(Some(root), root, None::<&CStr>, MsFlags::MS_BIND, None::<&CStr>).map_err(at(Step::BindRoot))?;
    // Before mounting into it: the new root receives no mount events from the host, and sends
    // none back. Only this subtree survives pivot_root, so making the whole copied table
    // private (dozens of mounts) would be wasted work. The host's shared mounts are already
    // slaves in a namespace owned by a less privileged user namespace (mount_namespaces(7)),
    // so pivot_root's "no shared parent" rule holds either way.
    let private = MsFlags::MS_REC | MsFlags::MS_PRIVATE;
    mount(None::<&CStr>, root, None::<&CStr>, private, None::<&CStr>).map_err(at(Step::PrivateMounts))?;
    for (index, op) in plan.root.mounts.iter().enumerate() {
        apply_mount(op).map_err(|errno| (Step::MountEntry, errno, index as u32))?;
    }
    enter_root(root)
}

/// pivot_root(".", ".") stacks the old root under the new one; detaching it leaves no path
/// back to the host (the sequence from pivot_root(2)'s NOTES).
fn enter_root(root: &CStr) -> StepResult {
    chdir(root).map_err(at(Step::PivotRoot))?;
    pivot_root(c".", c".").map_err(at(Step::PivotRoot))?;
    umount2(c".", MntFlags::MNT_DETACH).map_err(at(Step::PivotRoot))?;
    chdir(c"/").map_err(at(Step::PivotRoot))?;
    remount_read_only(c"/").map_err(at(Step::ReadOnlyRoot))
}

/// The uid/gid switch drops our capabilities in the user namespace; the explicit drop also
/// empties the bounding set so no file capability can come back on execve.
fn drop_privileges(plan: &ChildPlan) -> StepResult {
    nix::unistd::setgroups(&[]).map_err(at(Step::DropGroups))?;
    let (uid, gid) = (Uid::from_raw(plan.uid), Gid::from_raw(plan.gid));
    setresgid(gid, gid, gid).map_err(at(Step::SetGid))?;
    process::drop_bounding_and_ambient_capabilities().map_err(at(Step::DropCapabilities))?;
    setresuid(uid, uid, uid).map_err(at(Step::SetUid))?;
    process::clear_capability_sets().map_err(at(Step::DropCapabilities))?;
    process::set_no_new_privs().map_err(at(Step::NoNewPrivs))?;
    // The uid switch made us dumpable or not according to the host's fs.suid_dumpable; a
    // dumpable init would let the program read /proc/1/mem, environ and fd. The program
    // itself becomes dumpable again at execve, as any process of its own uid.
    process::set_not_dumpable().map_err(at(Step::NotDumpable))
}

/// Closes every descriptor except `keep`.
fn close_all_but(keep: &[RawFd]) -> Result<(), Errno> {
    let mut keep: Vec<u32> = keep.iter().map(|&fd| fd as u32).collect();
    keep.sort_unstable();
    let mut next = 0u32;
    for fd in keep {
        if fd > next {
            process::close_range(next, fd - 1)?;
        }
        next = fd + 1;
    }
    process::close_range(next, u32::MAX)
}

fn wait_for_parent(setup: RawFd) -> Result<(), Errno> {
    let mut byte = [0u8; 1];
    match nix::unistd::read(setup, &mut byte)? {
        1 => Ok(()),
        _ => process::exit_now(1),
    }
}

fn supervisor_gone(setup: RawFd) -> bool {
    let mut pfd = libc::pollfd { fd: setup, events: 0, revents: 0 };
    // SAFETY: poll reads and writes one pollfd that lives on this stack frame.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    n > 0 && pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0
}

/// pid 2: the program. Never returns.
fn program_main(plan: &ChildPlan, fds: ChildFds) -> ! {
    match prepare_program(plan, fds) {
        Err((step, errno, detail)) => report_and_exit(fds.setup, step, errno, detail),
        Ok(()) => {
            let errno = process::execve(&plan.exec.path, &plan.exec.argv, &plan.exec.envp);
            report_and_exit(fds.setup, Step::Exec, errno, 0)
        }
    }
}

fn prepare_program(plan: &ChildPlan, fds: ChildFds) -> StepResult {
    // A new session with no controlling terminal: the program cannot reach a tty (TIOCSTI).
    setsid().map_err(at(Step::NewSession))?;
    process::reset_signals().map_err(at(Step::Signals))?;
    for (from, to) in [(fds.stdin, 0), (fds.stdout, 1), (fds.stderr, 2)] {
        dup2(from, to).map_err(at(Step::Stdio))?;
    }
    for &(resource, value) in &plan.rlimits {
        process::set_rlimit(resource, value).map_err(|e| (Step::Rlimits, e, resource))?;
    }
    // Everything but stdio and the setup socket (close-on-exec: it reports a failed exec).
    close_all_but(&[0, 1, 2, fds.setup]).map_err(at(Step::CloseFds))?;
    // Last before execve: the filter forbids syscalls the steps above need.
    plan.seccomp.install().map_err(at(Step::Seccomp))
}

fn reap_until(program: libc::pid_t, status_fd: RawFd) -> ! {
    loop {
        match process::wait_any() {
            Ok((pid, status)) if pid == program => {
                let _ = nix::unistd::write(fd_ref(status_fd), &status.to_le_bytes());
                process::exit_now(0);
            }
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => process::exit_now(2),
        }
    }
}

fn report_and_exit(setup: RawFd, step: Step, errno: Errno, detail: u32) -> ! {
    let message = SetupFailure { step, errno, detail }.encode();
    let _ = nix::unistd::write(fd_ref(setup), &message);
    process::exit_now(126)
}

fn fd_ref(fd: RawFd) -> std::os::fd::BorrowedFd<'static> {
    process::borrow_fd(fd)
}
