//! The guest's stdout and stderr: kept within `output_bytes` with the Linux backend's head and
//! tail semantics (`runbox_linux::Capture`), every byte counted. With `on_output_limit: kill`,
//! the write that passes the limit stops the run; otherwise the guest goes on and is never
//! blocked.

use std::pin::Pin;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use runbox_linux::{Capture, Captured, OutputStream as Stream};
use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

use crate::stop::{Stop, StopReason};

/// How many bytes the guest may hand over per write; any amount is accepted.
const WRITE_BUDGET_BYTES: usize = 1 << 20;

#[derive(Clone)]
pub(crate) struct CappedPipe {
    capture: Arc<Mutex<Capture>>,
    /// `limits.output_bytes`.
    cap_bytes: u64,
    /// `Some(limit)` with `on_output_limit: kill`.
    kill_above: Option<u64>,
    stop: Arc<Stop>,
    live: Option<Live>,
}

/// Copies of the output for a caller that watches it live, up to one byte past the cap (so
/// the listener learns it was truncated); the rest is only counted.
#[derive(Clone)]
pub(crate) struct Live {
    pub stream: Stream,
    pub chunks: Sender<(Stream, Vec<u8>)>,
}

impl CappedPipe {
    pub(crate) fn new(output_bytes: u64, kill: bool, stop: Arc<Stop>, live: Option<Live>) -> CappedPipe {
        let cap = usize::try_from(output_bytes).unwrap_or(usize::MAX);
        let capture = Arc::new(Mutex::new(Capture::new(cap)));
        CappedPipe { capture, cap_bytes: output_bytes, kill_above: kill.then_some(output_bytes), stop, live }
    }

    /// Keeps `data`; with the kill policy, an error that traps the guest once past the limit.
    fn push(&self, data: &[u8]) -> Result<(), StreamError> {
        let total = {
            let mut capture = self.capture.lock().unwrap_or_else(|e| e.into_inner());
            capture.push(data);
            capture.total_bytes()
        };
        if let Some(live) = &self.live {
            let budget = self.cap_bytes.saturating_add(1);
            let before = total - data.len() as u64;
            let take = budget.saturating_sub(before).min(data.len() as u64) as usize;
            if take > 0 {
                let _ = live.chunks.send((live.stream, data[..take].to_vec()));
            }
        }
        match self.kill_above {
            Some(limit) if total > limit => {
                self.stop.stop(StopReason::Output);
                Err(StreamError::Trap(self.stop.trap().expect("a reason was just recorded")))
            }
            _ => Ok(()),
        }
    }

    /// What was kept. Call after the guest's store is gone.
    pub(crate) fn finish(self) -> Captured {
        let capture = self.capture.lock().unwrap_or_else(|e| e.into_inner());
        capture.clone().finish()
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_BUDGET_BYTES)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CappedPipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.push(buf).map(|()| buf.len()).map_err(|_| std::io::ErrorKind::BrokenPipe.into()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_head_and_tail_and_never_refuses() {
        let stop = Arc::new(Stop::default());
        let mut pipe = CappedPipe::new(4, false, stop.clone(), None);
        for chunk in [&b"abc"[..], b"defgh", b"ij"] {
            pipe.write(Bytes::copy_from_slice(chunk)).unwrap();
        }
        let out = pipe.finish();
        assert_eq!((out.head.as_slice(), out.tail.as_slice(), out.total_bytes), (&b"ab"[..], &b"ij"[..], 10));
        assert_eq!(stop.reason(), None);
    }

    #[test]
    fn kill_traps_the_write_that_passes_the_limit() {
        let stop = Arc::new(Stop::default());
        let mut pipe = CappedPipe::new(4, true, stop.clone(), None);
        pipe.write(Bytes::from_static(b"1234")).unwrap();
        let err = pipe.write(Bytes::from_static(b"5")).unwrap_err();
        assert!(matches!(err, StreamError::Trap(_)));
        assert_eq!(stop.reason(), Some(StopReason::Output));
    }
}
