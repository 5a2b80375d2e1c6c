//! A content-addressed store for artifacts: each file is kept once, named by its SHA-256,
//! so a service can serve a run's artifacts after the run's workspace is gone.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::WorkspaceError;

/// A directory of `<sha256>` files, writable by root only.
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    dir: PathBuf,
}

impl ArtifactStore {
    /// Opens (and creates, 0700) the store at `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<ArtifactStore, WorkspaceError> {
        let dir = dir.into();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| WorkspaceError::io("create artifact store", &dir, e))?;
        Ok(ArtifactStore { dir })
    }

    /// Where the file with this digest is, whether or not it is stored.
    pub fn path_of(&self, sha256: &str) -> Option<PathBuf> {
        let valid = sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        valid.then(|| self.dir.join(sha256))
    }

    /// Starts storing a file: bytes written to the returned sink are hashed and kept.
    pub(crate) fn sink(&self) -> io::Result<StoreSink<'_>> {
        let temp = self.dir.join(format!(".incoming-{}-{}", std::process::id(), unique()));
        let file = File::options().write(true).create_new(true).mode(0o600).open(&temp)?;
        Ok(StoreSink { store: self, temp, file, hasher: Sha256::new() })
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Hashes what it is given and writes it to a temporary file, renamed to its digest when done.
pub(crate) struct StoreSink<'a> {
    store: &'a ArtifactStore,
    temp: PathBuf,
    file: File,
    hasher: Sha256,
}

impl Write for StoreSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl StoreSink<'_> {
    /// Stores the file under its digest (an identical file already there is kept) and returns
    /// the digest.
    pub(crate) fn finish(self) -> io::Result<String> {
        let digest = hex::encode(self.hasher.clone().finalize());
        let target = self.store.dir.join(&digest);
        let result = if target.exists() { fs::remove_file(&self.temp) } else { fs::rename(&self.temp, &target) };
        result.map(|()| digest)
    }

    pub(crate) fn abandon(self) {
        let _ = fs::remove_file(&self.temp);
    }
}
