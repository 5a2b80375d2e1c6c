//! Bounded capture of one output stream: the first and last bytes within a cap, and a count
//! of everything. The program is drained to the end either way, so it never blocks on a full
//! pipe because runbox stopped reading.

use std::collections::VecDeque;

#[derive(Debug, Clone)]
pub struct Capture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total_bytes: u64,
}

/// What was kept of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The head, then, if anything was dropped, the tail (see `omitted_bytes`).
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
    pub total_bytes: u64,
    /// Bytes dropped between head and tail.
    pub omitted_bytes: u64,
}

impl Capture {
    /// Keeps at most `cap_bytes`: half from the start of the stream, half from its end.
    pub fn new(cap_bytes: usize) -> Capture {
        let head_cap = cap_bytes.div_ceil(2);
        Capture { head_cap, tail_cap: cap_bytes - head_cap, head: Vec::new(), tail: VecDeque::new(), total_bytes: 0 }
    }

    pub fn push(&mut self, mut data: &[u8]) {
        self.total_bytes += data.len() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        if self.tail_cap == 0 || data.is_empty() {
            return;
        }
        if data.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&data[data.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + data.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(data);
    }

    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    pub fn finish(self) -> Captured {
        let kept = (self.head.len() + self.tail.len()) as u64;
        Captured {
            head: self.head,
            tail: self.tail.into(),
            total_bytes: self.total_bytes,
            omitted_bytes: self.total_bytes - kept,
        }
    }
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.omitted_bytes > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_streams_are_kept_whole() {
        let mut c = Capture::new(10);
        c.push(b"abc");
        c.push(b"de");
        let out = c.finish();
        assert_eq!((out.head.as_slice(), out.tail.as_slice(), out.omitted_bytes), (&b"abcde"[..], &b""[..], 0));
    }

    #[test]
    fn long_streams_keep_head_and_tail_and_count_all() {
        let mut c = Capture::new(6);
        for chunk in [&b"0123"[..], b"4567", b"89", b"abcdef"] {
            c.push(chunk);
        }
        let out = c.finish();
        assert_eq!(out.head, b"012");
        assert_eq!(out.tail, b"def");
        assert_eq!(out.total_bytes, 16);
        assert_eq!(out.omitted_bytes, 10);
        assert!(out.truncated());
    }

    #[test]
    fn tail_rolls_across_small_pushes() {
        let mut c = Capture::new(4);
        for b in b"abcdefgh" {
            c.push(&[*b]);
        }
        let out = c.finish();
        assert_eq!((out.head, out.tail), (b"ab".to_vec(), b"gh".to_vec()));
    }
}
