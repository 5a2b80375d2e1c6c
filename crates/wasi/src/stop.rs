//! Why a run was stopped by runbox, shared between the guest's thread (its epoch callback and
//! output pipes), the watcher on the caller's thread, and the async call they interrupt.

use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::Notify;

/// What runbox stopped the guest for. The first reason recorded wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    WallTime,
    CpuTime,
    Output,
    Cancelled,
}

impl StopReason {
    fn code(self) -> u8 {
        match self {
            StopReason::WallTime => 1,
            StopReason::CpuTime => 2,
            StopReason::Output => 3,
            StopReason::Cancelled => 4,
        }
    }

    fn from_code(code: u8) -> Option<StopReason> {
        match code {
            1 => Some(StopReason::WallTime),
            2 => Some(StopReason::CpuTime),
            3 => Some(StopReason::Output),
            4 => Some(StopReason::Cancelled),
            _ => None,
        }
    }
}

/// The error a stopped guest traps with, so its call returns at once.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("stopped by runbox: {0:?}")]
pub(crate) struct Stopped(pub StopReason);

#[derive(Default)]
pub(crate) struct Stop {
    reason: AtomicU8,
    /// Wakes the call when it waits in the host (a `poll_oneoff` sleep), where no epoch
    /// callback runs.
    wake: Notify,
}

impl Stop {
    /// Records `reason` unless another was recorded first, and wakes the call.
    pub(crate) fn stop(&self, reason: StopReason) {
        let _ = self.reason.compare_exchange(0, reason.code(), Ordering::SeqCst, Ordering::SeqCst);
        self.wake.notify_one();
    }

    pub(crate) fn reason(&self) -> Option<StopReason> {
        StopReason::from_code(self.reason.load(Ordering::SeqCst))
    }

    pub(crate) async fn stopped(&self) {
        self.wake.notified().await
    }

    /// The trap for the recorded reason, if any.
    pub(crate) fn trap(&self) -> Option<wasmtime::Error> {
        self.reason().map(|r| wasmtime::Error::new(Stopped(r)))
    }
}
