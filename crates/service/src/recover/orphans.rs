//! Sandbox processes a previous service left behind. A crashed service's children get SIGTERM
//! from `--die-with-parent` and cancel and clean up by themselves; this finds any still at it
//! (or stuck), so start-up waits for them before sweeping, and never sweeps under a live one.

use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Pids of `runbox ... --state-dir <sandbox_dir> ... --die-with-parent` processes: children of
/// a service on this state directory. (The sandbox's own init scrubs its command line, so
/// only supervisors match.)
pub fn find(sandbox_dir: &Path) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    let me = std::process::id() as i32;
    let wanted = sandbox_dir.as_os_str().as_encoded_bytes();
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me)
        .filter(|pid| {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { return false };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let state_dir_matches = args.windows(2).any(|w| w[0] == b"--state-dir" && w[1] == wanted);
            state_dir_matches && args.contains(&&b"--die-with-parent"[..])
        })
        .collect()
}

/// Asks each process to cancel (SIGTERM), waits up to `grace` for all to end, then kills what
/// is left. Returns the pids that had to be killed.
pub async fn stop(pids: &[i32], grace: Duration) -> Vec<i32> {
    for &pid in pids {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while pids.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stuck: Vec<i32> = pids.iter().copied().filter(|&pid| alive(pid)).collect();
    for &pid in &stuck {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while stuck.iter().any(|&pid| alive(pid)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stuck
}

/// Running, as opposed to gone or a zombie waiting for a reaper that may never come.
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold spaces.
        Ok(stat) => stat.rsplit_once(')').is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn finds_and_stops_processes_of_this_state_dir_only() {
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("sandboxes");
        // Stand-ins with the command line a service's child has: `sh -c 'read x' runbox --state-dir
        // DIR run --die-with-parent`. `read` is a builtin waiting on a pipe, so the shell never
        // forks (a forked child shows the same command line until it execs) nor execs.
        let spawn = |state: &Path| {
            std::process::Command::new("sh")
                .args(["-c", "read x", "runbox", "--state-dir"])
                .arg(state)
                .args(["run", "--die-with-parent"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let mut mine = spawn(&ours);
        let mut other = spawn(&dir.path().join("elsewhere"));
        // Until the shell has exec'd, /proc shows the test's own command line.
        let begun = std::time::Instant::now();
        let found = loop {
            let found = find(&ours);
            if !found.is_empty() || begun.elapsed() > Duration::from_secs(10) {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        assert_eq!(found, vec![mine.id() as i32]);
        let killed = stop(&found, Duration::from_secs(5)).await;
        assert!(killed.is_empty(), "sh ends on SIGTERM");
        assert!(mine.wait().unwrap().code().is_none(), "ended by the signal");
        assert!(other.try_wait().unwrap().is_none(), "another state dir's process is left alone");
        other.kill().unwrap();
        other.wait().unwrap();
    }
}
