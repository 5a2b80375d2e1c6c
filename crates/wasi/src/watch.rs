//! The watcher on the caller's thread while the guest runs on its own: it drives the epoch
//! (the guest's epoch callback then checks the deadline and CPU time), notices cancellation
//! and samples the run's filesystem, until the guest thread hangs up.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::mpsc::Receiver;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use runbox_linux::{OutputStream, OutputTap};
use wasmtime::Engine;

use crate::stop::{Stop, StopReason};

/// Epoch tick: how often a running guest's limits are checked (the Linux backend samples its
/// cgroup at the same rate).
pub(crate) const TICK_MS: u16 = 5;

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Watched {
    pub disk_full_seen: bool,
    pub disk_peak_used_bytes: u64,
}

/// Output copied for a live listener, and the listener, called on this (the caller's) thread.
pub(crate) type LiveFeed<'a> = (Receiver<(OutputStream, Vec<u8>)>, &'a OutputTap<'a>);

/// Runs until `done` hangs up (its write end is dropped by the guest thread).
pub(crate) fn watch(
    engine: &Engine,
    stop: &Stop,
    done: &OwnedFd,
    mut cancel: Option<BorrowedFd<'_>>,
    disk: Option<BorrowedFd<'_>>,
    live: Option<LiveFeed<'_>>,
) -> Watched {
    let feed = || {
        if let Some((chunks, tap)) = &live {
            for (stream, data) in chunks.try_iter() {
                tap(stream, &data);
            }
        }
    };
    let mut watched = Watched::default();
    loop {
        let mut fds = vec![PollFd::new(done.as_fd(), PollFlags::POLLIN)];
        if let Some(fd) = cancel {
            fds.push(PollFd::new(fd, PollFlags::POLLIN));
        }
        // EINTR only shortens one tick.
        let _ = nix::poll::poll(&mut fds, PollTimeout::from(TICK_MS));
        engine.increment_epoch();
        feed();
        if let Some(fd) = disk {
            sample_disk(fd, &mut watched);
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        if fds.get(1).is_some_and(ready) {
            stop.stop(StopReason::Cancelled);
            cancel = None;
        }
        if ready(&fds[0]) {
            // The guest's store, and with it every sender, is gone: this drains the rest.
            feed();
            return watched;
        }
    }
}

fn sample_disk(fd: BorrowedFd<'_>, watched: &mut Watched) {
    if let Ok(st) = nix::sys::statvfs::fstatvfs(fd) {
        let used = st.blocks().saturating_sub(st.blocks_free()) * st.fragment_size();
        watched.disk_peak_used_bytes = watched.disk_peak_used_bytes.max(used);
        watched.disk_full_seen |= st.blocks_free() == 0 || st.files_free() == 0;
    }
}
