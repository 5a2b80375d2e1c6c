//! The supervisor's watch over a running sandbox: one poll loop that feeds stdin, drains
//! stdout and stderr into bounded captures, enforces the wall and CPU deadlines, honours
//! cancellation, and notices the end of init through its pidfd.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;

use crate::capture::Capture;
use crate::cgroup::RunCgroup;
use crate::protocol::{MESSAGE_BYTES, SetupFailure};
use crate::spawn::Started;
use crate::sys::process;

/// Why the supervisor killed the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    WallTime,
    CpuTime,
    Output,
    Cancelled,
    /// Setup failed or took too long; the failure is reported separately.
    Setup,
}

/// Limits the loop enforces itself (memory and pids are the kernel's).
pub struct Watch<'a> {
    pub wall_time: Duration,
    pub cpu_time_ns: u64,
    pub output_bytes: usize,
    pub kill_on_output_limit: bool,
    pub stdin: &'a [u8],
    pub cancel: Option<BorrowedFd<'a>>,
}

pub struct Watched {
    pub stdout: Capture,
    pub stderr: Capture,
    pub setup_failure: Option<SetupFailure>,
    pub killed_for: Option<KillReason>,
    /// When the program's execve succeeded.
    pub exec_at: Option<Instant>,
    pub ended_at: Instant,
    /// The program's raw wait status, as init reported it; `None` when init did not get to
    /// report (it was killed, or setup failed).
    pub wait_status: Option<i32>,
}

/// How long setup (clone to execve) may take before it counts as a sandbox failure.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// After init is gone every writer of the pipes is gone too; this only bounds a surprise.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
const READ_CHUNK: usize = 64 * 1024;

struct Stream {
    fd: Option<OwnedFd>,
    capture: Capture,
}

pub fn watch(started: Started, cgroup: &RunCgroup, watch: &Watch) -> Watched {
    let Started { init, pidfd, setup, status, stdin, stdout, stderr } = started;
    let mut setup = Some(setup);
    let mut stdin = (!watch.stdin.is_empty()).then_some(stdin);
    set_nonblocking(stdin.as_ref());
    let mut streams = [Stream { fd: Some(stdout), capture: Capture::new(watch.output_bytes) }, Stream { fd: Some(stderr), capture: Capture::new(watch.output_bytes) }];
    let mut written = 0usize;
    let mut out = Watched { stdout: Capture::new(0), stderr: Capture::new(0), setup_failure: None, killed_for: None, exec_at: None, ended_at: Instant::now(), wait_status: None };
    let started_at = Instant::now();
    let mut init_done = false;
    let mut drain_until = None;
    let kill = |reason: KillReason, out: &mut Watched| {
        if out.killed_for.is_none() {
            out.killed_for = Some(reason);
        }
        let _ = nix::sys::signal::kill(init, nix::sys::signal::Signal::SIGKILL);
        let _ = cgroup.kill_all();
    };
    loop {
        let now = Instant::now();
        if init_done && (streams.iter().all(|s| s.fd.is_none()) || drain_until.is_some_and(|d| now >= d)) {
            break;
        }
        let deadline = match out.exec_at {
            Some(exec_at) => exec_at + watch.wall_time,
            None => started_at + SETUP_TIMEOUT,
        };
        if !init_done && out.killed_for.is_none() {
            if now >= deadline {
                kill(if out.exec_at.is_some() { KillReason::WallTime } else { KillReason::Setup }, &mut out);
            } else if out.exec_at.is_some() && cgroup.cpu_usage_ns().is_ok_and(|ns| ns >= watch.cpu_time_ns) {
                kill(KillReason::CpuTime, &mut out);
            }
        }
        let timeout = if init_done { drain_until.map_or(0, |d: Instant| d.saturating_duration_since(now).as_millis() as i32) } else { poll_timeout(now, deadline, out.exec_at.is_some()) };
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(6);
        let mut push = |fd: RawFd, events: libc::c_short| {
            fds.push(libc::pollfd { fd, events, revents: 0 });
            fds.len() - 1
        };
        let i_pid = (!init_done).then(|| push(pidfd.as_raw_fd(), libc::POLLIN));
        let i_setup = setup.as_ref().map(|fd| push(fd.as_raw_fd(), libc::POLLIN));
        let i_stdin = stdin.as_ref().map(|fd| push(fd.as_raw_fd(), libc::POLLOUT));
        let i_out: Vec<Option<usize>> = streams.iter().map(|s| s.fd.as_ref().map(|fd| push(fd.as_raw_fd(), libc::POLLIN))).collect();
        let i_cancel = watch.cancel.filter(|_| out.killed_for.is_none() && !init_done).map(|fd| push(fd.as_raw_fd(), libc::POLLIN));
        match process::poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => {
                kill(KillReason::Setup, &mut out);
            }
        }
        let ready = |i: Option<usize>| i.is_some_and(|i| fds[i].revents != 0);
        if ready(i_setup) {
            match read_setup(setup.as_ref().expect("polled")) {
                SetupEvent::Failure(f) => {
                    out.setup_failure = Some(f);
                    kill(KillReason::Setup, &mut out);
                }
                SetupEvent::Closed => {
                    setup = None;
                    if out.setup_failure.is_none() {
                        out.exec_at = Some(Instant::now());
                    }
                }
                SetupEvent::Nothing => {}
            }
        }
        if ready(i_stdin) && feed_stdin(stdin.as_ref().expect("polled"), watch.stdin, &mut written) {
            stdin = None;
        }
        for (stream, index) in streams.iter_mut().zip(i_out) {
            if ready(index) && drain(stream) {
                stream.fd = None;
            }
        }
        if watch.kill_on_output_limit && out.killed_for.is_none() && streams.iter().any(|s| s.capture.total_bytes() > watch.output_bytes as u64) {
            kill(KillReason::Output, &mut out);
        }
        if ready(i_cancel) {
            kill(KillReason::Cancelled, &mut out);
        }
        if ready(i_pid) {
            init_done = true;
            out.ended_at = Instant::now();
            drain_until = Some(out.ended_at + DRAIN_TIMEOUT);
        }
    }
    let [stdout, stderr] = streams;
    out.wait_status = read_wait_status(&status);
    out.stdout = stdout.capture;
    out.stderr = stderr.capture;
    out
}

/// Wakes up for the deadline, and often enough to check CPU use while the program runs.
fn poll_timeout(now: Instant, deadline: Instant, running: bool) -> i32 {
    let until_deadline = deadline.saturating_duration_since(now);
    let wait = if running { until_deadline.min(Duration::from_millis(10)) } else { until_deadline };
    wait.as_millis().max(1) as i32
}

fn read_wait_status(fd: &OwnedFd) -> Option<i32> {
    set_nonblocking(Some(fd));
    let mut buf = [0u8; 4];
    match nix::unistd::read(fd.as_raw_fd(), &mut buf) {
        Ok(4) => Some(i32::from_le_bytes(buf)),
        _ => None,
    }
}

enum SetupEvent {
    Failure(SetupFailure),
    Closed,
    Nothing,
}

fn read_setup(fd: &OwnedFd) -> SetupEvent {
    let mut buf = [0u8; MESSAGE_BYTES];
    match nix::unistd::read(fd.as_raw_fd(), &mut buf) {
        Ok(0) => SetupEvent::Closed,
        Ok(n) => SetupFailure::decode(&buf[..n]).map_or(SetupEvent::Nothing, SetupEvent::Failure),
        Err(Errno::EINTR | Errno::EAGAIN) => SetupEvent::Nothing,
        Err(_) => SetupEvent::Closed,
    }
}

/// Writes the next piece of stdin; true when stdin is done (all written, or the program
/// closed its end).
fn feed_stdin(fd: &OwnedFd, data: &[u8], written: &mut usize) -> bool {
    match nix::unistd::write(fd, &data[*written..]) {
        Ok(n) => {
            *written += n;
            *written >= data.len()
        }
        Err(Errno::EAGAIN | Errno::EINTR) => false,
        Err(_) => true,
    }
}

/// Reads what is there; true at end-of-file.
fn drain(stream: &mut Stream) -> bool {
    let Some(fd) = stream.fd.as_ref() else { return true };
    let mut buf = [0u8; READ_CHUNK];
    match nix::unistd::read(fd.as_raw_fd(), &mut buf) {
        Ok(0) => true,
        Ok(n) => {
            stream.capture.push(&buf[..n]);
            false
        }
        Err(Errno::EAGAIN | Errno::EINTR) => false,
        Err(_) => true,
    }
}

fn set_nonblocking(fd: Option<&OwnedFd>) {
    if let Some(fd) = fd {
        let _ = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK));
    }
}
