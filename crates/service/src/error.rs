use std::path::PathBuf;

/// What can stop `runbox serve` from starting, or end it. Errors answered to one HTTP request
/// are [`crate::api::ApiError`] values instead.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error("{op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, source: std::io::Error },
    #[error("config {path}: {message}")]
    Config { path: PathBuf, message: String },
    #[error("another `runbox serve` uses the state directory {path}; stop it or give another --state-dir")]
    StateDirLocked { path: PathBuf },
    #[error("ledger {path}: {source}")]
    Ledger { path: PathBuf, source: rusqlite::Error },
    #[error("the ledger is gone: {0}")]
    LedgerClosed(String),
    #[error("ledger write: {0}")]
    LedgerWrite(String),
    #[error("ledger: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("listen on {addr}: {source}")]
    Listen { addr: std::net::SocketAddr, source: std::io::Error },
    #[error("{0}")]
    Refused(String),
}

impl ServiceError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ServiceError::Io { op, path: path.into(), source }
    }

    pub(crate) fn config(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        ServiceError::Config { path: path.into(), message: message.into() }
    }
}
