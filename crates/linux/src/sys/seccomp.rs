//! Installing a compiled seccomp filter: the one syscall of the seccomp module.

use nix::errno::Errno;

use crate::seccomp::SeccompFilter;

/// Installs `filter` on the calling thread with seccomp(2) `SECCOMP_SET_MODE_FILTER`.
///
/// **Async-signal-safe**: this runs in the forked child right before execve, so it
/// allocates nothing, takes no lock and cannot panic; on failure it returns the errno.
///
/// **The caller must have set `PR_SET_NO_NEW_PRIVS` first.** Without it the kernel only
/// accepts the filter from a thread with `CAP_SYS_ADMIN` in its user namespace (EACCES
/// otherwise), and a filtered set-user-ID exec could be abused (seccomp(2)).
///
/// No flags: the filter applies to the calling thread and is inherited by its future
/// children and across execve; `SECCOMP_FILTER_FLAG_TSYNC` is not needed because the child
/// is single-threaded when this runs.
pub fn install(filter: &SeccompFilter) -> Result<(), Errno> {
    let program = filter.program();
    // `sock_fprog.len` is an unsigned short; the kernel refuses more than BPF_MAXINSNS
    // (4096) instructions anyway, and `SeccompFilter` never holds more.
    let Ok(len) = u16::try_from(program.len()) else {
        return Err(Errno::EINVAL);
    };
    let prog = libc::sock_fprog {
        len,
        // The kernel only reads through this pointer; `*mut` is just how the C struct is declared.
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp(SECCOMP_SET_MODE_FILTER, 0, &prog) reads `prog` and the `len`
    // instructions it points to, which `program` (borrowed for this whole call) holds;
    // the kernel copies them before returning and keeps no pointer into our memory.
    // It changes no Rust-visible state of this process: it only restricts later syscalls.
    let rc =
        unsafe { libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0 as libc::c_uint, &raw const prog) };
    if rc == 0 { Ok(()) } else { Err(Errno::last()) }
}
