use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("read runtime data {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parse {file}: {message}")]
    Parse { file: String, message: String },
    #[error("invalid {file}: {message}")]
    Invalid { file: String, message: String },
    #[error("no runtimes defined")]
    Empty,
}
