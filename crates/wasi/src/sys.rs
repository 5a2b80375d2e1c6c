//! The crate's only unsafe code: mapping a compiled module from the cache as native code.

use std::fs::File;
use std::path::Path;

use wasmtime::{Engine, Module};

use crate::WasiError;

/// Loads a `.cwasm` that [`crate::cache`] opened and checked.
pub(crate) fn deserialize_trusted(engine: &Engine, file: File, path: &Path) -> Result<Module, WasiError> {
    // SAFETY: wasmtime runs the file's contents as machine code without validating it, and it
    // maps the file, so the file must also stay unchanged while the module lives. Both hold
    // because of where the file comes from: `cache::open_trusted` opened it with O_NOFOLLOW and
    // checked, on this very descriptor, that it is a regular file owned by our (root) uid that
    // no group or other may write, inside a directory chain that only root can write. Only
    // `runbox prepare` writes there, from `Engine::precompile_module` output, renamed into
    // place whole; no run can reach the directory (WASI guests see only their preopens, Linux
    // runs a read-only root without /var). Its name is a SHA-256 over the wasm's SHA-256, the
    // wasmtime version and the engine's compatibility hash, so a file made by another wasmtime
    // or configuration is never looked up; wasmtime also checks its own header and refuses one
    // that does not match this engine.
    unsafe { Module::deserialize_open_file(engine, file) }
        .map_err(|e| WasiError::wasmtime("load compiled module", path, e))
}
