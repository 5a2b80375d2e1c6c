//! The built-in seccomp filter against the real kernel.
//!
//! seccomp filters are per thread unless installed with TSYNC, so each test installs the
//! filter in a thread of its own (or a forked child, where the action kills) and the test
//! process stays unfiltered. Every denied call also runs in an unfiltered thread, built to
//! fail harmlessly there with another errno: a passing probe proves the filter, not the
//! environment.

use std::ffi::CStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;

use libc::{c_int, c_long, c_ulong};
use nix::errno::Errno;
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;
use runbox_linux::seccomp::SeccompFilter;

const NAMESPACE_FLAGS: [(&str, c_int); 8] = [
    ("CLONE_NEWNS", libc::CLONE_NEWNS),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC),
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER),
    ("CLONE_NEWPID", libc::CLONE_NEWPID),
    ("CLONE_NEWNET", libc::CLONE_NEWNET),
    ("CLONE_NEWTIME", libc::CLONE_NEWTIME),
];

/// Runs `body` in a new thread, under the built-in filter if `filtered`.
fn in_thread<T: Send + 'static>(filtered: bool, body: impl FnOnce() -> T + Send + 'static) -> T {
    let filter = SeccompFilter::default_policy().expect("the built-in policy compiles");
    let thread = std::thread::spawn(move || {
        if filtered {
            // SAFETY: PR_SET_NO_NEW_PRIVS only sets a flag on this thread; it touches no memory.
            let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
            assert_eq!(rc, 0, "prctl(PR_SET_NO_NEW_PRIVS): {}", Errno::last());
            filter.install().expect("installing the filter");
        }
        body()
    });
    thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A raw syscall, as the sandboxed program would make it: `Ok(return value)` or the errno.
///
/// # Safety
/// Pointer arguments must be null or point to memory valid for what `nr` does with them.
unsafe fn sys(nr: c_long, args: [c_ulong; 5]) -> Result<c_long, Errno> {
    let [a, b, c, d, e] = args;
    // SAFETY: forwarded from the caller's contract on `args`.
    let rc = unsafe { libc::syscall(nr, a, b, c, d, e) };
    if rc == -1 { Err(Errno::last()) } else { Ok(rc) }
}

fn ptr(s: &'static CStr) -> c_ulong {
    s.as_ptr() as c_ulong
}

/// A call the policy denies, with arguments that make it fail harmlessly without the filter.
struct Probe {
    name: String,
    nr: c_long,
    args: [c_ulong; 5],
    denied_with: Errno,
}

/// The denied calls, one per line; `fd` is a pipe end, not a terminal, so the ioctls fail
/// with ENOTTY when unfiltered.
#[rustfmt::skip]
fn probes(fd: c_ulong) -> Vec<Probe> {
    use libc::*;
    let missing = ptr(c"/nonexistent/runbox-seccomp-test");
    let no_such_pid = 0x3fff_ffff; // above any pid_max
    let (tiocsti, tioclinux) = (TIOCSTI as c_ulong, TIOCLINUX as c_ulong); // 0x5412, 0x541C
    let garbage = 0xdead_0000_0000_0000; // above bit 31, where the kernel does not look
    let no_aslr = ADDR_NO_RANDOMIZE as c_ulong;
    let thread_without_sighand = CLONE_THREAD as c_ulong; // EINVAL before any other check
    let eperm: [(&str, c_long, [c_ulong; 5]); 24] = [
        ("ptrace(PTRACE_ATTACH)", SYS_ptrace, [PTRACE_ATTACH as c_ulong, no_such_pid, 0, 0, 0]),
        ("unshare(CLONE_NEWUSER)", SYS_unshare, [CLONE_NEWUSER as c_ulong, 0, 0, 0, 0]),
        ("mount", SYS_mount, [ptr(c"none"), missing, ptr(c"tmpfs"), 0, 0]),
        ("umount2", SYS_umount2, [missing, 0, 0, 0, 0]),
        ("pivot_root", SYS_pivot_root, [missing, missing, 0, 0, 0]),
        ("chroot", SYS_chroot, [missing, 0, 0, 0, 0]),
        ("setns", SYS_setns, [c_ulong::MAX, 0, 0, 0, 0]),
        ("fsopen", SYS_fsopen, [ptr(c"no-such-fs"), 0, 0, 0, 0]),
        ("open_tree", SYS_open_tree, [c_ulong::MAX, missing, 0, 0, 0]),
        ("open_tree_attr (by number)", 467, [c_ulong::MAX, missing, 0, 0, 0]),
        ("keyctl", SYS_keyctl, [9999, 0, 0, 0, 0]),
        ("add_key", SYS_add_key, [0, 0, 0, 0, 0]),
        ("bpf", SYS_bpf, [9999, 0, 0, 0, 0]),
        ("perf_event_open", SYS_perf_event_open, [0, 0, c_ulong::MAX, c_ulong::MAX, 0]),
        ("io_uring_setup", SYS_io_uring_setup, [0, 0, 0, 0, 0]),
        ("userfaultfd", SYS_userfaultfd, [c_ulong::from(u32::MAX), 0, 0, 0, 0]),
        ("process_vm_readv", SYS_process_vm_readv, [no_such_pid, 0, 0, 0, 0]),
        ("pidfd_getfd", SYS_pidfd_getfd, [c_ulong::MAX, 0, 0, 0, 0]),
        ("ioctl(TIOCSTI)", SYS_ioctl, [fd, tiocsti, 0, 0, 0]),
        ("ioctl(garbage << 32 | TIOCSTI)", SYS_ioctl, [fd, garbage | tiocsti, 0, 0, 0]),
        ("ioctl(TIOCLINUX)", SYS_ioctl, [fd, tioclinux, 0, 0, 0]),
        ("personality(ADDR_NO_RANDOMIZE)", SYS_personality, [no_aslr, 0, 0, 0, 0]),
        ("personality(garbage << 32 | ADDR_NO_RANDOMIZE)", SYS_personality, [garbage | no_aslr, 0, 0, 0, 0]),
        // clone(2) reads its flags from the low 32 bits only, so garbage above must not help.
        ("clone(garbage << 32 | CLONE_NEWUSER)", SYS_clone, [garbage | CLONE_NEWUSER as c_ulong | thread_without_sighand, 0, 0, 0, 0]),
    ];
    let namespaces = NAMESPACE_FLAGS.map(|(flag, bits)| {
        (format!("clone({flag})"), SYS_clone, [bits as c_ulong | thread_without_sighand, 0, 0, 0, 0])
    });
    let eperm = eperm.map(|(name, nr, args)| (name.to_owned(), nr, args)).into_iter().chain(namespaces);
    let mut probes: Vec<Probe> = eperm.map(|(name, nr, args)| Probe { name, nr, args, denied_with: Errno::EPERM }).collect();
    probes.push(Probe { name: "clone3".to_owned(), nr: SYS_clone3, args: [0; 5], denied_with: Errno::ENOSYS });
    probes
}

fn run_probes(filtered: bool, fd: c_ulong) -> Vec<(Probe, Result<c_long, Errno>)> {
    in_thread(filtered, move || {
        probes(fd)
            .into_iter()
            .map(|p| {
                // SAFETY: the probes pass null pointers, pointers to 'static C strings, or
                // lengths of 0, and every call is built to fail before it acts (see `probes`).
                let result = unsafe { sys(p.nr, p.args) };
                (p, result)
            })
            .collect()
    })
}

fn pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().expect("pipe")
}

#[test]
fn denied_calls_fail_with_the_policy_errno_and_only_under_the_filter() {
    let (read_end, _write_end) = pipe();
    let fd = read_end.as_raw_fd() as c_ulong;
    let filtered = run_probes(true, fd);
    let unfiltered = run_probes(false, fd);

    let mut failures = Vec::new();
    for ((probe, with), (_, without)) in filtered.iter().zip(&unfiltered) {
        if *with != Err(probe.denied_with) {
            failures.push(format!("{}: {with:?} under the filter, expected {:?}", probe.name, probe.denied_with));
        }
        if *without == Err(probe.denied_with) {
            failures.push(format!(
                "{}: already {:?} without the filter, so the probe proves nothing",
                probe.name, probe.denied_with
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn ordinary_calls_still_work_under_the_filter() {
    let (read_pipe, write_pipe) = pipe();
    let (read_end, write_end) = (read_pipe.as_raw_fd(), write_pipe.as_raw_fd());
    in_thread(true, move || {
        // SAFETY: getpid takes no arguments.
        let pid = unsafe { sys(libc::SYS_getpid, [0; 5]) };
        assert_eq!(pid, Ok(std::process::id() as c_long));
        let message = b"still here";
        // SAFETY: write reads `message.len()` bytes from `message`, which lives across the call.
        let wrote = unsafe {
            sys(libc::SYS_write, [write_end as c_ulong, message.as_ptr() as c_ulong, message.len() as c_ulong, 0, 0])
        };
        assert_eq!(wrote, Ok(message.len() as c_long));
        let mut buf = [0u8; 16];
        // SAFETY: read writes at most `buf.len()` bytes into `buf`, which lives across the call.
        let read = unsafe {
            sys(libc::SYS_read, [read_end as c_ulong, buf.as_mut_ptr() as c_ulong, buf.len() as c_ulong, 0, 0])
        };
        assert_eq!(read, Ok(message.len() as c_long));
        assert_eq!(&buf[..message.len()], message);
        // Querying the personality, and setting the default one, stay allowed; the kernel
        // reads the argument as unsigned int, so garbage above bit 31 still means PER_LINUX.
        for persona in [0xffff_ffff, 0, 0xdead_0000_0000_0000] {
            // SAFETY: personality takes a number and touches no memory.
            let result = unsafe { sys(libc::SYS_personality, [persona, 0, 0, 0, 0]) };
            assert!(result.is_ok(), "personality({persona:#x}): {result:?}");
        }
        // A TCGETS ioctl on a non-terminal reaches the kernel, which says ENOTTY.
        // SAFETY: TCGETS on a pipe fails before it would write to the (null) termios pointer.
        let tcgets = unsafe { sys(libc::SYS_ioctl, [read_end as c_ulong, libc::TCGETS as c_ulong, 0, 0, 0]) };
        assert_eq!(tcgets, Err(Errno::ENOTTY));
    });
}

/// clone(2) with fork semantics; the child exits at once with status 7.
/// Forking a multi-threaded test process is fine because the child only calls `_exit`.
fn clone_and_reap(flags: c_ulong) -> Result<WaitStatus, Errno> {
    // SAFETY: with no CLONE_VM and a null stack the child runs on a copy of this stack, like
    // fork(2); it does nothing but `_exit`, which is async-signal-safe.
    let pid = unsafe { sys(libc::SYS_clone, [flags, 0, 0, 0, 0]) }?;
    if pid == 0 {
        // SAFETY: leaving the child without running any of the parent's code or destructors.
        unsafe { libc::_exit(7) };
    }
    Ok(waitpid(Pid::from_raw(pid as i32), None).expect("waitpid"))
}

#[test]
fn fork_like_clone_works_but_clone_into_a_new_namespace_does_not() {
    let sigchld = libc::SIGCHLD as c_ulong;
    in_thread(true, move || {
        assert!(matches!(clone_and_reap(sigchld), Ok(WaitStatus::Exited(_, 7))), "a plain fork-like clone must work");
        let newnet = clone_and_reap(libc::CLONE_NEWNET as c_ulong | sigchld);
        assert_eq!(newnet, Err(Errno::EPERM), "clone(CLONE_NEWNET | SIGCHLD)");
    });
}

/// Real runtimes must keep working: glibc (2.34+) creates threads with clone3 and falls back
/// to clone on ENOSYS, and node's libuv falls back from io_uring to its thread pool.
#[test]
fn real_programs_with_threads_run_under_the_filter() {
    let programs: [(&str, &[&str], &str); 2] = [
        (
            "/usr/bin/python3",
            &[
                "-c",
                "import subprocess, threading; t = threading.Thread(target=print, args=('thread',)); t.start(); t.join(); print(subprocess.run(['true']).returncode)",
            ],
            "thread\n0\n",
        ),
        (
            "/usr/bin/node",
            &[
                "-e",
                "require('fs').promises.readFile('/proc/self/status', 'utf8').then(s => console.log(s.includes('Seccomp:\t2')))",
            ],
            "true\n",
        ),
    ];
    let filter = SeccompFilter::default_policy().expect("the built-in policy compiles");
    for (program, args, expected) in programs {
        if !std::path::Path::new(program).exists() {
            eprintln!("skipped: {program} is not installed");
            continue;
        }
        let mut command = std::process::Command::new(program);
        command.args(args);
        // SAFETY: the hook runs between fork and exec, and makes only async-signal-safe calls
        // (prctl, and seccomp through `install`) on memory the parent set up before forking.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                filter.install().map_err(std::io::Error::from)
            })
        };
        let output = command.output().expect("spawning the program");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{program}: {:?}\n{stderr}", output.status);
        assert_eq!(stdout, expected, "{program}, stderr: {stderr}");
    }
}

/// The ABI checks of the program's hand-written prefix. They kill the process, so each call
/// runs in a forked child.
#[cfg(target_arch = "x86_64")]
mod abi {
    use super::*;
    use nix::sys::signal::Signal;

    const X32_SYSCALL_BIT: c_long = 0x4000_0000;

    /// Forks a child that disables core dumps, installs the filter if `filtered`, runs `body`
    /// and exits 0; returns how it ended. The child makes async-signal-safe calls only.
    fn in_child(filtered: bool, body: fn()) -> WaitStatus {
        let filter = SeccompFilter::default_policy().expect("the built-in policy compiles");
        // SAFETY: the child calls only async-signal-safe functions (setrlimit, prctl, seccomp
        // via `install`, raw syscalls) and leaves with `_exit`, never returning into the harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", Errno::last());
        if pid == 0 {
            let no_core = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: these calls read `no_core` and set flags on this process; being killed by
            // SIGSYS would otherwise dump core into the working directory.
            unsafe {
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
                if filtered && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    libc::_exit(90);
                }
            }
            if filtered && filter.install().is_err() {
                // SAFETY: leaving the child without running any of the parent's code.
                unsafe { libc::_exit(91) };
            }
            body();
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
        waitpid(Pid::from_raw(pid), None).expect("waitpid")
    }

    fn x32_getpid() {
        // SAFETY: getpid takes no arguments; with the x32 bit the kernel either runs it or,
        // when built without x32 support, returns ENOSYS.
        let _ = unsafe { sys(X32_SYSCALL_BIT | libc::SYS_getpid, [0; 5]) };
    }

    fn x32_ptrace() {
        // SAFETY: as in `probes`: PTRACE_ATTACH to a pid that does not exist.
        let _ =
            unsafe { sys(X32_SYSCALL_BIT | libc::SYS_ptrace, [libc::PTRACE_ATTACH as c_ulong, 0x3fff_ffff, 0, 0, 0]) };
    }

    #[test]
    fn x32_syscalls_kill_the_process() {
        // Unfiltered, an x32 call returns (ENOSYS on kernels without CONFIG_X86_X32_ABI).
        assert!(matches!(in_child(false, x32_getpid), WaitStatus::Exited(_, 0)));
        for body in [x32_getpid as fn(), x32_ptrace] {
            let status = in_child(true, body);
            assert!(
                matches!(status, WaitStatus::Signaled(_, Signal::SIGSYS, _)),
                "x32 call under the filter: {status:?}"
            );
        }
    }

    fn i386_getpid() {
        // SAFETY: `int 0x80` enters the i386 ABI; eax 20 is its getpid, which takes no
        // arguments and touches no memory. The kernel answers in eax; r8-r15 are not part of
        // the i386 ABI, so they are declared clobbered.
        unsafe {
            std::arch::asm!(
                "int 0x80",
                inout("eax") 20 => _,
                out("r8") _, out("r9") _, out("r10") _, out("r11") _,
                out("r12") _, out("r13") _, out("r14") _, out("r15") _,
                options(nostack),
            );
        }
    }

    #[test]
    fn foreign_arch_syscalls_kill_the_process() {
        let unfiltered = in_child(false, i386_getpid);
        assert!(
            matches!(unfiltered, WaitStatus::Exited(_, 0)),
            "int 0x80 without the filter: {unfiltered:?} (is IA32 emulation off?)"
        );
        let status = in_child(true, i386_getpid);
        assert!(matches!(status, WaitStatus::Signaled(_, Signal::SIGSYS, _)), "int 0x80 under the filter: {status:?}");
    }
}
