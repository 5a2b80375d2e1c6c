//! Reading and writing cgroup control files, and emptying a group.
//!
//! Everything here works on plain paths, the same way for v1 and v2.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::CgroupError;

/// How long we keep killing and waiting for a group to empty. Processes that were
/// OOM-killed or sit in uninterruptible sleep can take a while to exit.
const EMPTY_BUDGET: Duration = Duration::from_secs(2);
/// First pause between kill rounds; it doubles up to `MAX_PAUSE`.
const FIRST_PAUSE: Duration = Duration::from_micros(50);
const MAX_PAUSE: Duration = Duration::from_millis(10);

/// Writes one value to a control file with a single write(2).
///
/// The file is opened without `O_CREAT` on purpose: if the directory is not really a
/// cgroup (say, the controller was unmounted and /sys/fs/cgroup is a plain tmpfs),
/// `fs::write` would create a regular file and "succeed" without limiting anything.
pub(super) fn write_control(path: &Path, value: &str) -> Result<(), CgroupError> {
    let op = "write control file";
    let mut file = OpenOptions::new().write(true).open(path).map_err(|e| CgroupError::io(op, path, e))?;
    file.write_all(value.as_bytes()).map_err(|e| CgroupError::io(op, path, e))
}

pub(super) fn read_control(path: &Path) -> Result<String, CgroupError> {
    fs::read_to_string(path).map_err(|e| CgroupError::io("read control file", path, e))
}

/// Reads a file that holds a single number, such as `memory.max_usage_in_bytes`.
pub(super) fn read_u64(path: &Path) -> Result<u64, CgroupError> {
    let text = read_control(path)?;
    parse_u64(path, text.trim())
}

fn parse_u64(path: &Path, text: &str) -> Result<u64, CgroupError> {
    text.parse().map_err(|_| CgroupError::Parse {
        path: path.to_path_buf(),
        reason: format!("expected a number, found {text:?}"),
    })
}

/// Finds `key` in a flat-keyed file ("key value" per line, as `memory.events`,
/// `memory.oom_control`, `pids.events` and `cpu.stat` are).
pub(super) fn keyed_u64(path: &Path, text: &str, key: &str) -> Result<u64, CgroupError> {
    let value = text
        .lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix(' '))
        .ok_or_else(|| CgroupError::Parse { path: path.to_path_buf(), reason: format!("no {key:?} line") })?;
    parse_u64(path, value.trim())
}

/// Checks at creation that a counter we will report exists, so that a kernel without
/// it fails the run up front instead of reporting a made-up zero at the end.
pub(super) fn require_counter(
    path: &Path,
    key: &str,
    what: &'static str,
    fix: &'static str,
) -> Result<(), CgroupError> {
    let missing = || CgroupError::MissingFeature { path: path.to_path_buf(), what, fix };
    let text = fs::read_to_string(path).map_err(|_| missing())?;
    keyed_u64(path, &text, key).map(drop).map_err(|_| missing())
}

/// Reads a keyed counter from a file that is kept open, with one pread(2) at offset 0.
///
/// cgroup files are seq_files: a read at offset 0 regenerates the content
/// (fs/seq_file.c, `seq_read_iter`), so the same descriptor gives fresh values.
pub(super) fn pread_keyed_u64(file: &File, path: &Path, key: Option<&str>) -> Result<u64, CgroupError> {
    // Big enough for the lines we need: `cpuacct.usage` is one number and `usage_usec`
    // is the first line of v2 `cpu.stat`.
    let mut buf = [0u8; 256];
    let len = file.read_at(&mut buf, 0).map_err(|e| CgroupError::io("read control file", path, e))?;
    let text = std::str::from_utf8(&buf[..len])
        .map_err(|_| CgroupError::Parse { path: path.to_path_buf(), reason: "not UTF-8".to_string() })?;
    match key {
        Some(key) => keyed_u64(path, text, key),
        None => parse_u64(path, text.trim()),
    }
}

/// Creates a directory. Returns whether we created it; an existing one is fine only
/// when `exist_ok` (the shared parent group, which concurrent runs race to create).
pub(super) fn make_dir(path: &Path, exist_ok: bool) -> Result<bool, CgroupError> {
    match fs::create_dir(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && exist_ok => Ok(false),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Err(CgroupError::AlreadyExists { path: path.to_path_buf() }),
        Err(e) => Err(CgroupError::io("create cgroup", path, e)),
    }
}

/// The processes (thread-group ids) in a group, as seen from our pid namespace.
pub(super) fn procs(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    let path = dir.join("cgroup.procs");
    let text = read_control(&path)?;
    text.lines().map(|l| parse_u64(&path, l).map(|p| p as i32)).collect()
}

/// Sends SIGKILL to every process of the group, again and again, until it is empty.
///
/// Without a freezer, a process may fork between our read of `cgroup.procs` and its
/// kill; the child lands in the same group (and within pids.max), so the next round
/// gets it. Each round re-reads the list, so the loop also waits for dying processes.
/// A pid read here could in theory exit, be reaped and be reused outside the group
/// before our kill(2); cgroup v2's `cgroup.kill` has no such window.
pub(super) fn kill_until_empty(dir: &Path) -> Result<(), CgroupError> {
    drain(dir, true)
}

/// Sends SIGKILL once to every process the group lists, without waiting for any to die.
pub(super) fn kill_listed(dir: &Path) -> Result<(), CgroupError> {
    for pid in procs(dir)? {
        match kill(Pid::from_raw(pid), Signal::SIGKILL) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(source) => {
                return Err(CgroupError::Kill { pid, path: dir.to_path_buf(), source });
            }
        }
    }
    Ok(())
}

/// Waits, bounded, until the group has no process left (after `cgroup.kill`).
pub(super) fn wait_until_empty(dir: &Path) -> Result<(), CgroupError> {
    drain(dir, false)
}

fn drain(dir: &Path, send_kill: bool) -> Result<(), CgroupError> {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        let pids = procs(dir)?;
        if pids.is_empty() {
            return Ok(());
        }
        if start.elapsed() > EMPTY_BUDGET {
            return Err(CgroupError::StillPopulated {
                path: dir.to_path_buf(),
                pids,
                waited_ms: start.elapsed().as_millis() as u64,
            });
        }
        if send_kill {
            for pid in pids {
                match kill(Pid::from_raw(pid), Signal::SIGKILL) {
                    // ESRCH: it exited since we read the list.
                    Ok(()) | Err(Errno::ESRCH) => {}
                    Err(source) => {
                        return Err(CgroupError::Kill { pid, path: dir.to_path_buf(), source });
                    }
                }
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Removes an empty group directory.
///
/// EBUSY is retried within the budget: a group whose last process just exited can
/// still be busy for a moment. ENOENT counts as done: the goal is that it is gone.
pub(super) fn remove_dir(dir: &Path) -> Result<(), CgroupError> {
    let start = Instant::now();
    let mut pause = FIRST_PAUSE;
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < EMPTY_BUDGET => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(MAX_PAUSE);
            }
            Err(e) => return Err(CgroupError::io("remove cgroup", dir, e)),
        }
    }
}

/// Names of the child groups of `dir`; a missing `dir` has none.
pub(super) fn child_groups(dir: &Path) -> Result<Vec<String>, CgroupError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CgroupError::io("list cgroup", dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CgroupError::io("list cgroup", dir, e))?;
        let is_dir = entry.file_type().map_err(|e| CgroupError::io("list cgroup", entry.path(), e))?.is_dir();
        if is_dir {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}
