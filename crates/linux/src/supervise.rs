//! The supervisor's watch over a running sandbox: one poll loop that feeds stdin, drains
//! stdout and stderr into bounded captures, enforces the wall and CPU deadlines, samples the
//! run's filesystem, honours cancellation, and notices the program's end.
//!
//! The loop ends as soon as init has reported the program's wait status and both output
//! streams are closed; init's own exit (which tears the namespaces down) is not waited for
//! here, so that teardown overlaps with the caller's artifact collection.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::unistd::Pid;

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
    /// A descriptor on the run's filesystem, sampled for a full disk while the program runs.
    pub disk: Option<BorrowedFd<'a>>,
    /// Sees every chunk of output as it is read, before capture (for live streaming).
    pub tap: Option<&'a OutputTap<'a>>,
}

/// Sees each chunk of a program's output as it is read.
pub type OutputTap<'a> = dyn Fn(OutputStream, &[u8]) + 'a;

/// Which output stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputStream {
    Stdout,
    Stderr,
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
    /// init has exited (and been noticed through its pidfd).
    pub init_exited: bool,
    /// The run's filesystem was seen with no free block or inode.
    pub disk_full_seen: bool,
    pub disk_peak_used_bytes: u64,
}

/// How long setup (clone to execve) may take before it counts as a sandbox failure.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// After init is gone every writer of the pipes is gone too; this only bounds a surprise.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// How often CPU use and the disk are sampled while the program runs.
const SAMPLE_INTERVAL: Duration = Duration::from_millis(5);
const READ_CHUNK: usize = 64 * 1024;

struct Stream {
    fd: Option<OwnedFd>,
    capture: Capture,
}

struct Supervisor<'a> {
    init: Pid,
    pidfd: OwnedFd,
    setup: Option<OwnedFd>,
    status: Option<OwnedFd>,
    stdin: Option<OwnedFd>,
    stdin_written: usize,
    streams: [Stream; 2],
    cgroup: &'a RunCgroup,
    watch: &'a Watch<'a>,
    started_at: Instant,
    drain_until: Option<Instant>,
    out: Watched,
}

pub fn watch(started: Started, cgroup: &RunCgroup, watch: &Watch) -> Watched {
    let Started { init, pidfd, setup, status, stdin, stdout, stderr } = started;
    let stdin = (!watch.stdin.is_empty()).then_some(stdin);
    set_nonblocking(stdin.as_ref());
    let capture = || Capture::new(watch.output_bytes);
    let mut sup = Supervisor {
        init,
        pidfd,
        setup: Some(setup),
        status: Some(status),
        stdin,
        stdin_written: 0,
        streams: [Stream { fd: Some(stdout), capture: capture() }, Stream { fd: Some(stderr), capture: capture() }],
        cgroup,
        watch,
        started_at: Instant::now(),
        drain_until: None,
        out: Watched {
            stdout: Capture::new(0),
            stderr: Capture::new(0),
            setup_failure: None,
            killed_for: None,
            exec_at: None,
            ended_at: Instant::now(),
            wait_status: None,
            init_exited: false,
            disk_full_seen: false,
            disk_peak_used_bytes: 0,
        },
    };
    while !sup.finished() {
        sup.enforce_limits();
        sup.wait_and_handle();
    }
    // A program that writes past the cap and exits before the next check still passed it:
    // with `kill`, that is `output_limit` whatever the timing.
    if sup.watch.kill_on_output_limit && sup.out.killed_for.is_none() && sup.streams.iter().any(|s| sup.over_output(s))
    {
        sup.out.killed_for = Some(KillReason::Output);
    }
    let [stdout, stderr] = sup.streams;
    sup.out.stdout = stdout.capture;
    sup.out.stderr = stderr.capture;
    sup.out
}

impl Supervisor<'_> {
    fn program_ended(&self) -> bool {
        self.out.wait_status.is_some() || self.out.init_exited
    }

    fn finished(&self) -> bool {
        let drained = self.streams.iter().all(|s| s.fd.is_none());
        self.program_ended() && (drained || self.drain_until.is_some_and(|d| Instant::now() >= d))
    }

    fn deadline(&self) -> Instant {
        match self.out.exec_at {
            Some(exec_at) => exec_at + self.watch.wall_time,
            None => self.started_at + SETUP_TIMEOUT,
        }
    }

    fn enforce_limits(&mut self) {
        if self.program_ended() || self.out.killed_for.is_some() {
            return;
        }
        if Instant::now() >= self.deadline() {
            let reason = if self.out.exec_at.is_some() { KillReason::WallTime } else { KillReason::Setup };
            return self.kill(reason);
        }
        if self.out.exec_at.is_none() {
            return;
        }
        self.sample_disk();
        if self.cgroup.cpu_usage_ns().is_ok_and(|ns| ns >= self.watch.cpu_time_ns) {
            return self.kill(KillReason::CpuTime);
        }
        if self.watch.kill_on_output_limit && self.streams.iter().any(|s| self.over_output(s)) {
            self.kill(KillReason::Output);
        }
    }

    fn over_output(&self, stream: &Stream) -> bool {
        stream.capture.total_bytes() > self.watch.output_bytes as u64
    }

    fn sample_disk(&mut self) {
        let Some(disk) = self.watch.disk else { return };
        if let Ok(st) = nix::sys::statvfs::fstatvfs(disk) {
            let used = st.blocks().saturating_sub(st.blocks_free()) * st.fragment_size();
            self.out.disk_peak_used_bytes = self.out.disk_peak_used_bytes.max(used);
            self.out.disk_full_seen |= st.blocks_free() == 0 || st.files_free() == 0;
        }
    }

    /// Kills the whole run: init (and with it its pid namespace) and the cgroup.
    fn kill(&mut self, reason: KillReason) {
        self.out.killed_for.get_or_insert(reason);
        let _ = nix::sys::signal::kill(self.init, nix::sys::signal::Signal::SIGKILL);
        let _ = self.cgroup.signal_all();
    }

    fn timeout_ms(&self) -> i32 {
        let now = Instant::now();
        let until = match self.drain_until {
            Some(drain_until) => drain_until,
            None if self.program_ended() => now,
            None if self.out.exec_at.is_some() => self.deadline().min(now + SAMPLE_INTERVAL),
            None => self.deadline(),
        };
        until.saturating_duration_since(now).as_millis().max(1) as i32
    }

    fn wait_and_handle(&mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(7);
        let mut add = |fd: Option<RawFd>, events: libc::c_short| {
            fd.map(|fd| {
                fds.push(libc::pollfd { fd, events, revents: 0 });
                fds.len() - 1
            })
        };
        let raw = |fd: &Option<OwnedFd>| fd.as_ref().map(|f| f.as_raw_fd());
        let i_pid = add((!self.out.init_exited).then(|| self.pidfd.as_raw_fd()), libc::POLLIN);
        let i_setup = add(raw(&self.setup), libc::POLLIN);
        let i_status = add(raw(&self.status), libc::POLLIN);
        let i_stdin = add(raw(&self.stdin), libc::POLLOUT);
        let i_streams = [add(raw(&self.streams[0].fd), libc::POLLIN), add(raw(&self.streams[1].fd), libc::POLLIN)];
        let cancellable = self.out.killed_for.is_none() && !self.program_ended();
        let i_cancel = add(self.watch.cancel.filter(|_| cancellable).map(|fd| fd.as_raw_fd()), libc::POLLIN);
        match process::poll(&mut fds, self.timeout_ms()) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return self.kill(KillReason::Setup),
        }
        let ready = |i: Option<usize>| i.is_some_and(|i| fds[i].revents != 0);
        if ready(i_setup) {
            self.on_setup_message();
        }
        if ready(i_stdin) {
            self.feed_stdin();
        }
        for (index, i) in i_streams.into_iter().enumerate() {
            let which = if index == 0 { OutputStream::Stdout } else { OutputStream::Stderr };
            if ready(i)
                && drain(&mut self.streams[index], self.watch.tap.map(|tap| move |data: &[u8]| tap(which, data)))
            {
                self.streams[index].fd = None;
            }
        }
        if ready(i_cancel) {
            self.kill(KillReason::Cancelled);
        }
        if ready(i_status) {
            self.on_status();
        }
        if ready(i_pid) {
            self.out.init_exited = true;
            self.on_end();
        }
    }

    fn on_setup_message(&mut self) {
        let Some(setup) = &self.setup else { return };
        let mut buf = [0u8; MESSAGE_BYTES];
        match nix::unistd::read(setup.as_raw_fd(), &mut buf) {
            Ok(0) | Err(Errno::ECONNRESET) => {
                self.setup = None;
                if self.out.setup_failure.is_none() && self.out.killed_for.is_none() {
                    self.out.exec_at = Some(Instant::now());
                }
            }
            Ok(n) => {
                if let Some(failure) = SetupFailure::decode(&buf[..n]) {
                    self.out.setup_failure = Some(failure);
                    self.kill(KillReason::Setup);
                }
            }
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(_) => self.setup = None,
        }
    }

    fn on_status(&mut self) {
        let Some(status) = self.status.take() else {
            return;
        };
        let mut buf = [0u8; 4];
        if let Ok(4) = nix::unistd::read(status.as_raw_fd(), &mut buf) {
            self.out.wait_status = Some(i32::from_le_bytes(buf));
            self.on_end();
        }
    }

    fn on_end(&mut self) {
        if self.drain_until.is_none() {
            self.out.ended_at = Instant::now();
            self.sample_disk();
            self.drain_until = Some(self.out.ended_at + DRAIN_TIMEOUT);
        }
    }

    /// Writes the next piece of stdin; closes it when all is written or the program closed
    /// its end.
    fn feed_stdin(&mut self) {
        let Some(fd) = &self.stdin else { return };
        let done = match nix::unistd::write(fd, &self.watch.stdin[self.stdin_written..]) {
            Ok(n) => {
                self.stdin_written += n;
                self.stdin_written >= self.watch.stdin.len()
            }
            Err(Errno::EAGAIN | Errno::EINTR) => false,
            Err(_) => true,
        };
        if done {
            self.stdin = None;
        }
    }
}

/// Reads what is there; true at end-of-file.
fn drain(stream: &mut Stream, tap: Option<impl Fn(&[u8])>) -> bool {
    let Some(fd) = stream.fd.as_ref() else {
        return true;
    };
    let mut buf = [0u8; READ_CHUNK];
    match nix::unistd::read(fd.as_raw_fd(), &mut buf) {
        Ok(0) => true,
        Ok(n) => {
            if let Some(tap) = tap {
                tap(&buf[..n]);
            }
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
