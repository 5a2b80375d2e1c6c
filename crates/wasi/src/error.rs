use std::io;
use std::path::PathBuf;

/// A failure of the WASI executor itself, or of preparing a module: never the guest's fault.
/// A module that does not compile or link is the request's fault and is reported as
/// [`WasiError::BadModule`], so the caller can refuse the request instead.
#[derive(Debug, thiserror::Error)]
pub enum WasiError {
    /// The engine could not be built (pooling reservation, invalid configuration).
    #[error("create wasmtime engine: {0}")]
    Engine(String),

    /// The module is not valid WebAssembly, or needs imports nobody provides.
    #[error("{0}")]
    BadModule(String),

    /// The runtime's package or compiled module is not in the cache; `runbox prepare` makes it.
    #[error("{what} {path} is missing; run `runbox prepare` to fetch and compile it")]
    NotPrepared { what: &'static str, path: PathBuf },

    /// A file or directory of the cache or a package is not root's own, or others can write it:
    /// it could hold native code a run planted, so it is never loaded.
    #[error("refusing {path}: {reason}")]
    Untrusted { path: PathBuf, reason: String },

    /// A host-side file operation failed.
    #[error("{op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, source: io::Error },

    /// Compiling, serializing or deserializing a module failed inside wasmtime.
    #[error("{op} {path}: {message}")]
    Wasmtime { op: &'static str, path: PathBuf, message: String },

    /// A downloaded package is not the one the runtime pins.
    #[error("package {what}: {message}")]
    Package { what: String, message: String },
}

impl WasiError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> WasiError {
        WasiError::Io { op, path: path.into(), source }
    }

    pub(crate) fn wasmtime(op: &'static str, path: impl Into<PathBuf>, error: impl std::fmt::Display) -> WasiError {
        WasiError::Wasmtime { op, path: path.into(), message: format!("{error:#}") }
    }
}
