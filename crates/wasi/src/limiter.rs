//! Memory of one store. wasmtime leaves linear memory unlimited unless a limiter says no, so
//! every growth (including the initial size at instantiation) passes through here.

use wasmtime::ResourceLimiter;

pub(crate) struct RunLimiter {
    memory_cap_bytes: usize,
    peak_bytes: usize,
    /// A growth was refused: the guest saw `memory.grow` return -1 (or could not start).
    pub(crate) denied: bool,
}

impl RunLimiter {
    pub(crate) fn new(memory_bytes: u64) -> RunLimiter {
        RunLimiter {
            memory_cap_bytes: usize::try_from(memory_bytes).unwrap_or(usize::MAX),
            peak_bytes: 0,
            denied: false,
        }
    }

    /// The largest linear memory the guest held.
    pub(crate) fn peak_bytes(&self) -> u64 {
        self.peak_bytes as u64
    }
}

impl ResourceLimiter for RunLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_cap_bytes {
            self.denied = true;
            return Ok(false);
        }
        self.peak_bytes = self.peak_bytes.max(desired);
        Ok(true)
    }

    /// Tables are bounded by the pooling allocator's slots (`engine::TABLE_ELEMENTS`).
    fn table_growing(&mut self, _current: usize, _desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(true)
    }

    /// One module instance per run; a module cannot make more.
    fn instances(&self) -> usize {
        1
    }

    fn memories(&self) -> usize {
        1
    }
}
