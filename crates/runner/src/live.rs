//! Live output: the program's chunks as they are written, secrets redacted across chunk
//! boundaries, at most `output_bytes` per stream (then one `truncated` notice).

use std::cell::RefCell;

use runbox_linux::OutputStream;

use crate::output::redact;

/// What a live-output listener receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveChunk<'a> {
    Data(OutputStream, &'a [u8]),
    /// The stream passed `output_bytes`; nothing more of it is sent live.
    Truncated(OutputStream),
}

/// Wraps a listener: redacts, bounds, and holds back just enough bytes that a secret split
/// across two chunks is still found.
pub struct LiveOutput<'a> {
    listener: &'a dyn Fn(LiveChunk),
    secrets: &'a [(String, Vec<u8>)],
    budget_bytes: u64,
    streams: RefCell<[StreamState; 2]>,
}

#[derive(Default)]
struct StreamState {
    pending: Vec<u8>,
    sent_bytes: u64,
    truncated: bool,
}

impl<'a> LiveOutput<'a> {
    pub fn new(listener: &'a dyn Fn(LiveChunk), secrets: &'a [(String, Vec<u8>)], budget_bytes: u64) -> Self {
        LiveOutput { listener, secrets, budget_bytes, streams: RefCell::new(Default::default()) }
    }

    pub fn push(&self, stream: OutputStream, data: &[u8]) {
        let mut streams = self.streams.borrow_mut();
        let state = &mut streams[index(stream)];
        if state.truncated {
            return;
        }
        let room = self.budget_bytes.saturating_sub(state.sent_bytes) as usize;
        let take = room.min(data.len());
        state.sent_bytes += take as u64;
        state.pending.extend_from_slice(&data[..take]);
        let cut = safe_cut(&state.pending, self.secrets);
        if cut > 0 {
            let ready: Vec<u8> = state.pending.drain(..cut).collect();
            (self.listener)(LiveChunk::Data(stream, &redact(&ready, self.secrets)));
        }
        if take < data.len() {
            self.flush_stream(stream, state);
        }
    }

    /// Sends what is held back; call when the program has ended.
    pub fn finish(&self) {
        let mut streams = self.streams.borrow_mut();
        for stream in [OutputStream::Stdout, OutputStream::Stderr] {
            let state = &mut streams[index(stream)];
            if !state.truncated && !state.pending.is_empty() {
                let rest = std::mem::take(&mut state.pending);
                (self.listener)(LiveChunk::Data(stream, &redact(&rest, self.secrets)));
            }
        }
    }

    fn flush_stream(&self, stream: OutputStream, state: &mut StreamState) {
        let rest = std::mem::take(&mut state.pending);
        if !rest.is_empty() {
            (self.listener)(LiveChunk::Data(stream, &redact(&rest, self.secrets)));
        }
        state.truncated = true;
        (self.listener)(LiveChunk::Truncated(stream));
    }
}

fn index(stream: OutputStream) -> usize {
    match stream {
        OutputStream::Stdout => 0,
        OutputStream::Stderr => 1,
    }
}

/// How much of `buf` can be redacted and sent now: all but the longest tail that could be the
/// start of a secret still being written, and never through the middle of a whole secret.
fn safe_cut(buf: &[u8], secrets: &[(String, Vec<u8>)]) -> usize {
    let held = secrets
        .iter()
        .filter_map(|(_, secret)| (1..secret.len()).rev().find(|&k| buf.ends_with(&secret[..k])))
        .max()
        .unwrap_or(0);
    let mut cut = buf.len() - held;
    loop {
        let straddling = secrets.iter().filter_map(|(_, secret)| {
            let first = cut.saturating_sub(secret.len().saturating_sub(1));
            (first..cut).find(|&start| start + secret.len() > cut && buf[start..].starts_with(secret))
        });
        match straddling.min() {
            Some(start) => cut = start,
            None => return cut,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    fn collect(chunks: &[&[u8]], secrets: &[(String, Vec<u8>)], budget: u64) -> (Vec<u8>, bool) {
        let out = RefCell::new((Vec::new(), false));
        let listener = |chunk: LiveChunk| match chunk {
            LiveChunk::Data(_, data) => out.borrow_mut().0.extend_from_slice(data),
            LiveChunk::Truncated(_) => out.borrow_mut().1 = true,
        };
        let live = LiveOutput::new(&listener, secrets, budget);
        for chunk in chunks {
            live.push(OutputStream::Stdout, chunk);
        }
        live.finish();
        out.into_inner()
    }

    #[test]
    fn a_secret_split_across_chunks_is_redacted() {
        let secrets = vec![("TOKEN".to_string(), b"hunter2".to_vec())];
        let (out, truncated) = collect(&[b"pass: hun", b"ter", b"2 done"], &secrets, 1000);
        assert_eq!(out, b"pass: [REDACTED:TOKEN] done");
        assert!(!truncated);
    }

    #[test]
    fn only_a_possible_start_of_a_secret_is_held_back() {
        let secrets = vec![("S".to_string(), b"s3cr3t".to_vec())];
        let out = RefCell::new(Vec::new());
        let listener = |chunk: LiveChunk| {
            if let LiveChunk::Data(_, data) = chunk {
                out.borrow_mut().push(data.to_vec())
            }
        };
        let live = LiveOutput::new(&listener, &secrets, 100);
        live.push(OutputStream::Stdout, b"one\n");
        live.push(OutputStream::Stdout, b"x s3c");
        assert_eq!(out.borrow().as_slice(), &[b"one\n".to_vec(), b"x ".to_vec()]);
    }

    #[test]
    fn a_whole_secret_is_never_cut_in_two() {
        let secrets = vec![("S".to_string(), b"abab".to_vec())];
        let (out, _) = collect(&[b"xabab", b"!"], &secrets, 100);
        assert_eq!(out, b"x[REDACTED:S]!");
    }

    #[test]
    fn output_past_the_budget_is_cut_and_flagged() {
        let (out, truncated) = collect(&[b"0123456789", b"abcdef"], &[], 12);
        assert_eq!((out.as_slice(), truncated), (&b"0123456789ab"[..], true));
    }

    #[test]
    fn without_secrets_chunks_pass_at_once() {
        let out = RefCell::new(Vec::new());
        let listener = |chunk: LiveChunk| {
            if let LiveChunk::Data(_, data) = chunk {
                out.borrow_mut().push(data.to_vec())
            }
        };
        let live = LiveOutput::new(&listener, &[], 100);
        live.push(OutputStream::Stdout, b"abc");
        assert_eq!(out.borrow().as_slice(), &[b"abc".to_vec()]);
    }
}
