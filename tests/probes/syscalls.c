/* Probe for runbox's seccomp policy (crates/linux/policy/seccomp.json).
 *
 * Prints one line per attempt, "<name> <outcome>": "ok" when the call succeeded, the
 * errno's name (EPERM, ENOSYS, ...) when it failed, "killed:SIG<name>" when the process
 * making it was killed. Each attempt runs in a forked child, so a call that kills its
 * caller, or that succeeds and changes it (unshare, ptrace(TRACEME)), affects no other.
 *
 * Where a harmless choice of arguments exists, it makes the kernel itself answer
 * differently from the filter (success, ENOENT for a missing path, EINVAL for an invalid
 * time, ENOTTY for a pipe), so an EPERM line shows the filter at work; the rest fail with
 * EPERM for an unprivileged process anyway, and their lines show that the program is still
 * unprivileged. Every attempt is harmless if it succeeds.
 *
 * argv[1], if given, replaces /workspace as the writable directory, to run the probe
 * outside runbox and see what the kernel answers without the filter.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/keyctl.h>
#include <linux/perf_event.h>
#include <linux/reboot.h>
#include <linux/sched.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static const char *dir = "/workspace";

static const char *in_dir(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* A child that waits to be killed: the target of the cross-process calls. */
static pid_t idle_child(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    return pid;
}

static void end_child(pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* A new process from clone-like calls exits at once; the parent reaps it. */
static long reaped(long ret) {
    if (ret == 0) _exit(0);
    if (ret > 0) waitpid((pid_t)ret, NULL, 0);
    return ret;
}

/* ---- normal things, which must keep working ---- */

static long do_fork(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(7);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 7) { errno = ECHILD; return -1; }
    return 0;
}

static void *thread_main(void *arg) { return arg; }

static long do_pthread(void) {
    pthread_t t;
    int err = pthread_create(&t, NULL, thread_main, NULL);
    if (err != 0) { errno = err; return -1; }
    return pthread_join(t, NULL);
}

static long do_workspace_file(void) {
    int fd = open(in_dir("probe-file"), O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "written\n", 8) != 8) return -1;
    char buf[16] = {0};
    if (pread(fd, buf, sizeof buf - 1, 0) != 8 || strcmp(buf, "written\n") != 0) { errno = EIO; return -1; }
    return close(fd);
}

/* ---- tracing and other processes' memory ---- */

static long do_ptrace_traceme(void) { return ptrace(PTRACE_TRACEME, 0, NULL, NULL); }

static long do_ptrace_attach(void) {
    pid_t child = idle_child();
    long ret = ptrace(PTRACE_ATTACH, child, NULL, NULL);
    int saved = errno;
    end_child(child);
    errno = saved;
    return ret;
}

static char target_buf[8];

static long do_process_vm_readv(void) {
    pid_t child = idle_child();
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {target_buf, sizeof target_buf};
    long ret = process_vm_readv(child, &local, 1, &remote, 1, 0);
    int saved = errno;
    end_child(child);
    errno = saved;
    return ret;
}

static long do_process_vm_writev(void) {
    pid_t child = idle_child();
    char buf[8] = {0};
    struct iovec local = {buf, sizeof buf}, remote = {target_buf, sizeof target_buf};
    long ret = process_vm_writev(child, &local, 1, &remote, 1, 0);
    int saved = errno;
    end_child(child);
    errno = saved;
    return ret;
}

static long do_kcmp(void) {
    pid_t child = idle_child();
    long ret = syscall(SYS_kcmp, getpid(), child, KCMP_VM, 0, 0);
    int saved = errno;
    end_child(child);
    errno = saved;
    return ret;
}

static long do_pidfd_getfd(void) {
    pid_t child = idle_child();
    long pidfd = syscall(SYS_pidfd_open, child, 0);
    long ret = pidfd < 0 ? -1 : syscall(SYS_pidfd_getfd, (int)pidfd, 0, 0);
    int saved = errno;
    end_child(child);
    errno = saved;
    return ret;
}

/* ---- the mount tree; a missing target makes the kernel itself answer ENOENT ---- */

static long do_mount(void) { return mount("none", in_dir("no-such-dir"), "tmpfs", 0, NULL); }
static long do_umount2(void) { return umount2(in_dir("no-such-dir"), MNT_DETACH); }
static long do_pivot_root(void) { return syscall(SYS_pivot_root, "/workspace", "/workspace"); }
static long do_chroot(void) { return chroot(in_dir("no-such-dir")); }
static long do_fsopen(void) { return syscall(SYS_fsopen, "tmpfs", 0); }
static long do_open_tree(void) { return syscall(SYS_open_tree, AT_FDCWD, dir, 0); }
/* open_tree_attr(2), Linux 6.15; number 467 on every architecture, not yet in libc headers. */
static long do_open_tree_attr(void) { return syscall(467, AT_FDCWD, dir, 0, NULL, 0); }

/* ---- namespaces ---- */

static long do_unshare_newuser(void) { return unshare(CLONE_NEWUSER); }
static long do_unshare_newns(void) { return unshare(CLONE_NEWNS); }

/* Joining one's own user namespace is EINVAL from the kernel (user_namespaces(7)). */
static long do_setns(void) {
    int fd = open("/proc/self/ns/user", O_RDONLY);
    if (fd < 0) return -1;
    return setns(fd, CLONE_NEWUSER);
}

static long do_clone_newuser(void) {
    return reaped(syscall(SYS_clone, (unsigned long)(CLONE_NEWUSER | SIGCHLD), 0, 0, 0, 0));
}

static long do_clone_newnet(void) {
    return reaped(syscall(SYS_clone, (unsigned long)(CLONE_NEWNET | SIGCHLD), 0, 0, 0, 0));
}

/* A plain fork through clone3: the kernel would allow it. */
static long do_clone3(void) {
    struct clone_args args;
    memset(&args, 0, sizeof args);
    args.exit_signal = SIGCHLD;
    return reaped(syscall(SYS_clone3, &args, sizeof args));
}

/* ---- the keyring ---- */

static long do_keyctl(void) { return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_PROCESS_KEYRING, 1); }
static long do_add_key(void) { return syscall(SYS_add_key, "user", "runbox-probe", "x", 1, KEY_SPEC_PROCESS_KEYRING); }
static long do_request_key(void) { return syscall(SYS_request_key, "user", "runbox-probe-missing", NULL, KEY_SPEC_PROCESS_KEYRING); }

/* ---- kernel attack surface ---- */

static long do_bpf(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    return syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
}

/* Counting one's own task clock in user space: allowed at perf_event_paranoid 2. */
static long do_perf_event_open(void) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    return syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
}

static long do_userfaultfd(void) { return syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY); }

static long do_io_uring_setup(void) {
    struct io_uring_params params;
    memset(&params, 0, sizeof params);
    return syscall(SYS_io_uring_setup, 1, &params);
}

static long do_io_uring_enter(void) { return syscall(SYS_io_uring_enter, -1, 0, 0, 0, NULL, 0); }

struct handle_buf {
    struct file_handle h;
    unsigned char bytes[128];
};

static long do_name_to_handle_at(void) {
    struct handle_buf handle;
    int mount_id = 0;
    handle.h.handle_bytes = sizeof handle.bytes;
    return name_to_handle_at(AT_FDCWD, dir, &handle.h, &mount_id, 0);
}

static long do_open_by_handle_at(void) {
    struct handle_buf handle;
    memset(&handle, 0, sizeof handle);
    handle.h.handle_bytes = 8;
    handle.h.handle_type = 1;
    return open_by_handle_at(AT_FDCWD, &handle.h, O_RDONLY);
}

static long do_personality(void) { return personality(ADDR_NO_RANDOMIZE); }

/* ---- host-wide state ---- */

static long do_reboot(void) {
    return syscall(SYS_reboot, LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_CAD_OFF, NULL);
}

static long do_swapon(void) { return swapon(in_dir("probe-file"), 0); }

/* Invalid times: the kernel itself answers EINVAL before any permission check. Raw
 * syscalls, because glibc's wrappers reject the values before calling the kernel. */
static long do_settimeofday(void) {
    struct timeval tv = {0, 2000000};
    return syscall(SYS_settimeofday, &tv, NULL);
}

static long do_clock_settime(void) {
    struct timespec ts = {0, 2000000000};
    return syscall(SYS_clock_settime, CLOCK_REALTIME, &ts);
}

static long do_kexec_load(void) { return syscall(SYS_kexec_load, 0, 0, NULL, 0); }
static long do_init_module(void) { return syscall(SYS_init_module, NULL, 0, ""); }
static long do_sethostname(void) { return sethostname("escaped", 7); }

/* ---- terminal input injection; stdin is a pipe, so the kernel would answer ENOTTY ---- */

static long do_tiocsti(void) {
    char c = 'x';
    return syscall(SYS_ioctl, 0, (unsigned long)TIOCSTI, &c);
}

/* The kernel reads the request as unsigned int: the upper half must not get it past. */
static long do_tiocsti_high_bits(void) {
    char c = 'x';
    return syscall(SYS_ioctl, 0, 0xffffffff00000000ul | TIOCSTI, &c);
}

static long do_tioclinux(void) {
    char c = 2;
    return syscall(SYS_ioctl, 0, (unsigned long)TIOCLINUX, &c);
}

/* ---- foreign syscall ABIs ---- */

static long do_x32_getpid(void) { return syscall(0x40000000 | SYS_getpid); }

static long do_i386_getpid(void) {
    long ret = 20; /* __NR_getpid in the i386 table */
    __asm__ volatile("int $0x80" : "+a"(ret) : : "memory");
    if (ret < 0) { errno = (int)-ret; return -1; }
    return 0;
}

struct attempt {
    const char *name;
    long (*call)(void);
};

static const struct attempt attempts[] = {
    {"fork", do_fork},
    {"pthread_create", do_pthread},
    {"workspace_file", do_workspace_file},
    {"ptrace_traceme", do_ptrace_traceme},
    {"ptrace_attach", do_ptrace_attach},
    {"process_vm_readv", do_process_vm_readv},
    {"process_vm_writev", do_process_vm_writev},
    {"kcmp", do_kcmp},
    {"pidfd_getfd", do_pidfd_getfd},
    {"mount", do_mount},
    {"umount2", do_umount2},
    {"pivot_root", do_pivot_root},
    {"chroot", do_chroot},
    {"fsopen", do_fsopen},
    {"open_tree", do_open_tree},
    {"open_tree_attr", do_open_tree_attr},
    {"unshare_newuser", do_unshare_newuser},
    {"unshare_newns", do_unshare_newns},
    {"setns", do_setns},
    {"clone_newuser", do_clone_newuser},
    {"clone_newnet", do_clone_newnet},
    {"clone3", do_clone3},
    {"keyctl", do_keyctl},
    {"add_key", do_add_key},
    {"request_key", do_request_key},
    {"bpf", do_bpf},
    {"perf_event_open", do_perf_event_open},
    {"userfaultfd", do_userfaultfd},
    {"io_uring_setup", do_io_uring_setup},
    {"io_uring_enter", do_io_uring_enter},
    {"name_to_handle_at", do_name_to_handle_at},
    {"open_by_handle_at", do_open_by_handle_at},
    {"personality", do_personality},
    {"reboot", do_reboot},
    {"swapon", do_swapon},
    {"settimeofday", do_settimeofday},
    {"clock_settime", do_clock_settime},
    {"kexec_load", do_kexec_load},
    {"init_module", do_init_module},
    {"sethostname", do_sethostname},
    {"ioctl_tiocsti", do_tiocsti},
    {"ioctl_tiocsti_high_bits", do_tiocsti_high_bits},
    {"ioctl_tioclinux", do_tioclinux},
    {"x32_getpid", do_x32_getpid},
    {"i386_getpid", do_i386_getpid},
};

/* The child exits 0 when the call succeeded and 100 + errno when it failed. */
static void run(const struct attempt *a) {
    pid_t pid = fork();
    if (pid == 0) {
        long ret = a->call();
        _exit(ret >= 0 ? 0 : 100 + errno);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) {
        printf("%s probe-failed:%s\n", a->name, strerrorname_np(errno));
    } else if (WIFSIGNALED(status)) {
        const char *sig = sigabbrev_np(WTERMSIG(status));
        printf("%s killed:SIG%s\n", a->name, sig ? sig : "?");
    } else if (WEXITSTATUS(status) == 0) {
        printf("%s ok\n", a->name);
    } else if (WEXITSTATUS(status) >= 100) {
        const char *e = strerrorname_np(WEXITSTATUS(status) - 100);
        printf("%s %s\n", a->name, e ? e : "E?");
    } else {
        printf("%s exit:%d\n", a->name, WEXITSTATUS(status));
    }
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc > 1) dir = argv[1];
    printf("pid %d\n", (int)getpid());
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) run(&attempts[i]);
    printf("done\n");
    return 0;
}
