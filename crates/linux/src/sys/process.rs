//! Raw process syscalls the sandbox needs and nix does not wrap (or wraps with allocation).
//! Everything here may run in a freshly cloned child, so nothing allocates or locks.

use std::ffi::CStr;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::unistd::Pid;

/// Result of [`clone_process`], seen from each side.
pub enum CloneResult {
    Parent(Pid),
    Child,
}

/// clone(2) without a new stack, i.e. fork(2) with namespace flags.
///
/// # Contract
/// Only call from a single-threaded process: the child continues with a copy of this thread
/// alone, so a lock held by another thread (the allocator's, stdio's) would never be released.
pub fn clone_process(flags: libc::c_int) -> Result<CloneResult, Errno> {
    // SAFETY: a raw clone with a NULL stack behaves like fork: the child gets a copy-on-write
    // copy of the caller's stack. The caller guarantees the process is single-threaded, so no
    // lock can be held by a thread that does not exist in the child. SIGCHLD makes the child
    // reapable with waitpid like a forked one.
    let ret = unsafe {
        libc::syscall(libc::SYS_clone, (flags | libc::SIGCHLD) as libc::c_ulong, 0usize, 0usize, 0usize, 0usize)
    };
    match ret {
        -1 => Err(Errno::last()),
        0 => Ok(CloneResult::Child),
        pid => Ok(CloneResult::Parent(Pid::from_raw(pid as i32))),
    }
}

/// pidfd_open(2): a descriptor that becomes readable when the process exits, for poll.
pub fn pidfd_open(pid: Pid) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_open takes a pid and flags by value and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// close_range(2) for `[first, last]`: closes every inherited descriptor in one call.
pub fn close_range(first: u32, last: u32) -> Result<(), Errno> {
    if first > last {
        return Ok(());
    }
    // SAFETY: close_range only closes descriptors; the caller (a child about to exec) owns the
    // whole table and holds no Rust object that refers to the closed descriptors afterwards.
    let ret = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0) };
    if ret < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Empties the bounding and ambient sets, so no execve can ever grant a capability again.
/// Needs CAP_SETPCAP, so it comes before the uid switch.
pub fn drop_bounding_and_ambient_capabilities() -> Result<(), Errno> {
    for cap in 0..=HIGHEST_CAPABILITY_BOUND {
        // SAFETY: PR_CAPBSET_DROP takes a capability number by value. EINVAL means the kernel
        // does not know this capability, which leaves nothing to drop.
        let ret = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if ret < 0 && Errno::last() != Errno::EINVAL {
            return Err(Errno::last());
        }
    }
    // SAFETY: PR_CAP_AMBIENT_CLEAR_ALL takes no pointers.
    if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong, 0, 0, 0) } < 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// Empties the effective, permitted and inheritable sets. The uid switch alone may keep them:
/// the kernel clears them only when leaving uid 0 *of the namespace*, and our setup identity
/// (host root) is not mapped in it, so it is not that uid 0.
pub fn clear_capability_sets() -> Result<(), Errno> {
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let data = [CapData::default(); 2];
    // SAFETY: capset reads a version-3 header and two data structs, which both point to live,
    // correctly laid out (repr(C)) values on this stack frame.
    if unsafe { libc::syscall(libc::SYS_capset, &mut header as *mut CapHeader, data.as_ptr()) } < 0 {
        return Err(Errno::last());
    }
    Ok(())
}

/// Covers every capability a 64-bit capability set can name; the kernel answers EINVAL for
/// numbers it does not define, which leaves nothing to drop.
const HIGHEST_CAPABILITY_BOUND: u32 = 63;

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Reads the effective capability set of the calling thread, for tests and doctor.
pub fn effective_capabilities() -> Result<u64, Errno> {
    let mut header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two data structs into the array, which is large enough for
    // version 3, and reads the header; both are live repr(C) values.
    if unsafe { libc::syscall(libc::SYS_capget, &mut header as *mut CapHeader, data.as_mut_ptr()) } < 0 {
        return Err(Errno::last());
    }
    Ok(u64::from(data[0].effective) | (u64::from(data[1].effective) << 32))
}

/// prctl(PR_SET_NO_NEW_PRIVS): execve can never grant privileges again (setuid bits, file
/// capabilities), and unprivileged seccomp becomes possible.
pub fn set_no_new_privs() -> Result<(), Errno> {
    // SAFETY: takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// prctl(PR_SET_PDEATHSIG): the kernel sends `signal` when the parent thread exits.
pub fn set_parent_death_signal(signal: libc::c_int) -> Result<(), Errno> {
    // SAFETY: takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong, 0, 0, 0) } < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Puts every signal back to its default action and unblocks all of them. Dispositions set
/// to "ignore" and the blocked mask survive execve, and the program must not inherit ours
/// (Rust ignores SIGPIPE; the CLI blocks SIGINT and SIGTERM for its signalfd).
pub fn reset_signals() -> Result<(), Errno> {
    for signal in 1..libc::SIGRTMIN() {
        if signal == libc::SIGKILL || signal == libc::SIGSTOP {
            continue;
        }
        // SAFETY: installs the default disposition; SIG_DFL is not a function pointer that
        // could be called, and no handler of ours stays registered.
        unsafe { libc::signal(signal, libc::SIG_DFL) };
    }
    // SAFETY: sigset_t is plain data; sigemptyset initializes it before sigprocmask reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) < 0 {
            return Err(Errno::last());
        }
    }
    Ok(())
}

/// execve(2) with NULL-terminated pointer arrays prepared before the clone.
/// Returns only on failure.
pub fn execve(path: &CStr, argv: &[*const libc::c_char], envp: &[*const libc::c_char]) -> Errno {
    debug_assert!(argv.last().is_some_and(|p| p.is_null()) && envp.last().is_some_and(|p| p.is_null()));
    // SAFETY: `argv` and `envp` are NULL-terminated arrays of pointers into CStrings that the
    // caller keeps alive until exec replaces the process image (see ExecArgs).
    unsafe { libc::execve(path.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    Errno::last()
}

/// _exit(2): leaves the child without running destructors or atexit handlers of the parent's
/// copy of the address space.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no user-space state.
    unsafe { libc::_exit(code) }
}

/// Brings the loopback interface of the current network namespace up (SIOCSIFFLAGS).
pub fn loopback_up() -> Result<(), Errno> {
    // SAFETY: a plain socket call; the descriptor is closed below on every path.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(Errno::last());
    }
    // SAFETY: ifreq is plain data; we fill its name, then the kernel reads and writes it.
    let result = unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *dst = *src as libc::c_char;
        }
        if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) < 0 {
            Err(Errno::last())
        } else {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) < 0 { Err(Errno::last()) } else { Ok(()) }
        }
    };
    // SAFETY: `sock` is ours and not used after this.
    unsafe { libc::close(sock) };
    result
}

/// setrlimit with the same soft and hard value: the program can lower it, never raise it.
pub fn set_rlimit(resource: libc::__rlimit_resource_t, value: u64) -> Result<(), Errno> {
    let limit = libc::rlimit { rlim_cur: value, rlim_max: value };
    // SAFETY: setrlimit reads one rlimit struct that lives on this stack frame.
    if unsafe { libc::setrlimit(resource, &limit) } < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// waitpid(-1): the next child to end, with its raw wait status.
pub fn wait_any() -> Result<(libc::pid_t, i32), Errno> {
    let mut status = 0;
    // SAFETY: waitpid writes one int through a pointer to a live local.
    let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
    if pid < 0 { Err(Errno::last()) } else { Ok((pid, status)) }
}

/// Borrows a raw descriptor the child side holds for its whole life.
pub fn borrow_fd(fd: RawFd) -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: the descriptors the child borrows (setup socket, status pipe) are opened by the
    // supervisor before the clone and are only closed by the child's exit or execve.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
}

/// poll(2) on a slice of pollfd structs.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> Result<usize, Errno> {
    // SAFETY: the kernel reads and writes `fds.len()` pollfd structs in the slice we own.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if n < 0 { Err(Errno::last()) } else { Ok(n as usize) }
}

/// Number of threads of the calling process. The sandbox refuses to clone from a
/// multi-threaded process (see clone_process).
pub fn thread_count() -> std::io::Result<usize> {
    Ok(std::fs::read_dir("/proc/thread-self/..")?.count())
}

/// prctl(PR_SET_DUMPABLE, 0): /proc/<pid>/{mem,environ,fd,...} of this process become
/// root-only, whatever the host's fs.suid_dumpable says.
pub fn set_not_dumpable() -> Result<(), Errno> {
    // SAFETY: takes integers only.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// Overwrites this process's argv and environment strings in place, so that
/// /proc/<pid>/cmdline and environ show `name` instead of the supervisor's command line.
/// `areas` are the `[start, end)` ranges from /proc/self/stat (fields 48 to 51).
///
/// # Contract
/// Nothing may read argv or the environment afterwards (std::env, getenv): their strings
/// are gone. Only for a process that will never exec, i.e. the sandbox's init.
pub fn scrub_command_line(areas: [(usize, usize); 2], name: &[u8]) {
    for (start, end) in areas {
        if start == 0 || end <= start {
            continue;
        }
        // SAFETY: the kernel reports these ranges as this process's argv and environment
        // strings, which live on the initial stack, mapped readable and writable for the whole
        // life of the process. std and libc keep pointers into them but, per the contract
        // above, nothing dereferences those pointers again.
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    }
    let (start, end) = areas[0];
    if start != 0 && end > start + name.len() {
        // SAFETY: as above; `name` fits in the argv range with room for its terminating NUL.
        unsafe { std::ptr::copy_nonoverlapping(name.as_ptr(), start as *mut u8, name.len()) };
    }
}

/// Reads the argv and environment ranges of this process from /proc/self/stat.
pub fn command_line_areas() -> Option<[(usize, usize); 2]> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // Field 3 (state) is index 0 here, so field N is index N - 3 (proc_pid_stat(5)).
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    Some([(field(48)?, field(49)?), (field(50)?, field(51)?)])
}

/// Takes ownership of a descriptor a syscall wrapper just returned as a raw number.
pub fn own_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: callers pass a descriptor fresh from open(2) that nothing else refers to, so
    // the OwnedFd is its only owner and closes it exactly once.
    unsafe { OwnedFd::from_raw_fd(fd) }
}
