//! The WASI executor: WebAssembly modules under wasmtime, behind the same contract as the
//! Linux sandbox.
//!
//! - One engine per configuration ([`EngineSettings`]), shared by every run; the pooling
//!   allocator reserves instance slots once, so a run instantiates in microseconds.
//! - Modules are compiled once and cached as `.cwasm` in a root-only directory
//!   ([`Executor::prepare_module`]), then mapped by each run ([`Executor::load_prepared`]).
//! - Each run gets its own store ([`run::run`]): linear memory capped by a limiter, wall time
//!   by epoch interruption plus an async deadline (the WASI host is async, so a guest asleep in
//!   `poll_oneoff` is stopped too), CPU time by fuel or by the guest thread's CPU clock, output
//!   kept within the cap with the Linux backend's head and tail, and only the preopened
//!   directories of the host visible.
//!
//! Guest code runs on a thread of its own, never on a tokio worker; the caller's thread drives
//! the epoch and watches for cancellation meanwhile.

mod cache;
mod determinism;
mod engine;
mod error;
mod limiter;
mod package;
mod pipe;
mod program;
mod run;
mod stop;
mod sys;
mod watch;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use wasmtime::Module;

pub use engine::{EngineSettings, POOL_SLOTS};
pub use error::WasiError;
pub use package::{check_package, install_package, package_dir};
pub use program::{Entry, Program, Stub};
pub use run::{Exit, Outcome, Preopen, RunSpec, Watchers, run};
pub use stop::StopReason;

use cache::ModuleCache;
use engine::Engines;

/// Engines and the compiled-module cache of one process.
pub struct Executor {
    engines: Engines,
    cache: ModuleCache,
}

/// What [`Executor::prepare_module`] did.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub path: PathBuf,
    /// False when a usable compiled module was already cached.
    pub compiled: bool,
    pub elapsed: Duration,
}

impl Executor {
    /// An executor whose compiled modules live under `cache_dir/modules`. Engines are made on
    /// first use. `parallel_compilation` is for `runbox prepare` only: rayon's threads stay.
    pub fn new(cache_dir: &Path, parallel_compilation: bool) -> Executor {
        Executor { engines: Engines::new(parallel_compilation), cache: ModuleCache::new(cache_dir) }
    }

    /// Compiles a module from bytes (binary or `.wat` text), for modules that come with the
    /// request. A module that does not compile is the request's fault ([`WasiError::BadModule`]).
    pub fn compile(&self, settings: EngineSettings, wasm: &[u8]) -> Result<Module, WasiError> {
        let engine = self.engines.get(settings)?;
        Module::new(&engine, wasm).map_err(|e| WasiError::BadModule(format!("not a valid WebAssembly module: {e:#}")))
    }

    /// Maps the compiled module of the wasm whose SHA-256 is `wasm_sha256`, prepared earlier.
    pub fn load_prepared(&self, settings: EngineSettings, wasm_sha256: &str) -> Result<Module, WasiError> {
        let engine = self.engines.get(settings)?;
        let path = self.cache.path(&engine, settings, wasm_sha256);
        self.cache.load(&engine, &path)
    }

    /// Where the compiled module would be cached.
    pub fn cached_path(&self, settings: EngineSettings, wasm_sha256: &str) -> Result<PathBuf, WasiError> {
        Ok(self.cache.path(&self.engines.get(settings)?, settings, wasm_sha256))
    }

    /// Compiles `wasm_path` (which must hash to `wasm_sha256`) into the cache, unless a
    /// loadable compiled module is already there.
    pub fn prepare_module(
        &self,
        settings: EngineSettings,
        wasm_path: &Path,
        wasm_sha256: &str,
    ) -> Result<Prepared, WasiError> {
        let begun = Instant::now();
        let engine = self.engines.get(settings)?;
        let path = self.cache.path(&engine, settings, wasm_sha256);
        if self.cache.load(&engine, &path).is_ok() {
            return Ok(Prepared { path, compiled: false, elapsed: begun.elapsed() });
        }
        let wasm = package::read_verified(wasm_path, wasm_sha256)?;
        self.cache.store(&engine, &path, &wasm)?;
        drop(wasm);
        // Proves the file loads before anyone relies on it.
        self.cache.load(&engine, &path)?;
        Ok(Prepared { path, compiled: true, elapsed: begun.elapsed() })
    }

    /// Links a module compiled for `settings`; see [`Program::link`].
    pub fn link(
        &self,
        settings: EngineSettings,
        module: &Module,
        entry: Entry,
        stubs: &[Stub],
    ) -> Result<Program, WasiError> {
        Program::link(&self.engines.get(settings)?, settings, module, entry, stubs)
    }
}
