//! The compiled-module cache: `<cache_dir>/modules/<key>.cwasm`, written by `runbox prepare`
//! and loaded by runs with `Module::deserialize_open_file`, which maps the file instead of
//! compiling (Cranelift takes about 43 s and 2 GB for python.wasm). The key covers everything
//! that makes a compiled module valid: the wasm's SHA-256, the engine settings, the wasmtime
//! version and wasmtime's own compatibility hash of the engine configuration.
//!
//! The cache holds native code, so it is trusted only as root made it: every directory from `/`
//! down, and the file, owned by root and not writable by group or others.

use std::fs::{self, File, OpenOptions};
use std::hash::Hash;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

use crate::{EngineSettings, WasiError, sys};

pub(crate) struct ModuleCache {
    dir: PathBuf,
}

impl ModuleCache {
    pub(crate) fn new(cache_dir: &Path) -> ModuleCache {
        ModuleCache { dir: cache_dir.join("modules") }
    }

    /// The cache file for a module with this SHA-256 under this engine.
    pub(crate) fn path(&self, engine: &Engine, settings: EngineSettings, wasm_sha256: &str) -> PathBuf {
        let mut hasher = Sha256Hasher(Sha256::new());
        "runbox-cwasm-v1".hash(&mut hasher);
        wasm_sha256.hash(&mut hasher);
        format!("{settings:?}").hash(&mut hasher);
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir.join(format!("{}.cwasm", hex::encode(hasher.0.finalize())))
    }

    /// Maps the compiled module, or says it was never prepared.
    pub(crate) fn load(&self, engine: &Engine, path: &Path) -> Result<Module, WasiError> {
        let file = match open_trusted(path) {
            Err(WasiError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(WasiError::NotPrepared { what: "compiled module", path: path.to_path_buf() });
            }
            other => other?,
        };
        sys::deserialize_trusted(engine, file, path)
    }

    /// Compiles `wasm` and writes it to `path`: to a temporary file first, renamed into place
    /// once complete, so a run never sees half a module.
    pub(crate) fn store(&self, engine: &Engine, path: &Path, wasm: &[u8]) -> Result<(), WasiError> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| WasiError::io("create module cache", &self.dir, e))?;
        check_trusted_dirs(&self.dir)?;
        let compiled = engine.precompile_module(wasm).map_err(|e| WasiError::wasmtime("compile", path, e))?;
        let temp = path.with_extension(format!("cwasm.{}.tmp", std::process::id()));
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc_o_nofollow())
            .open(&temp)
            .and_then(|mut f| f.write_all(&compiled).and_then(|()| f.sync_all()));
        let renamed = written.and_then(|()| fs::rename(&temp, path));
        if let Err(e) = renamed {
            let _ = fs::remove_file(&temp);
            return Err(WasiError::io("write compiled module", path, e));
        }
        Ok(())
    }
}

/// Opens a file of the cache or of a package without following a symlink, and checks on the
/// open descriptor that it is a regular file only root can write, in directories only root
/// can write.
pub(crate) fn open_trusted(path: &Path) -> Result<File, WasiError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc_o_nofollow())
        .open(path)
        .map_err(|e| WasiError::io("open", path, e))?;
    let meta = file.metadata().map_err(|e| WasiError::io("stat", path, e))?;
    if !meta.is_file() {
        return Err(untrusted(path, "not a regular file"));
    }
    check_owner(path, &meta)?;
    check_trusted_dirs(path.parent().unwrap_or(Path::new("/")))?;
    Ok(file)
}

/// Checks `dir` and each of its ancestors: a directory (after symlinks), owned by root, not
/// writable by group or others. Otherwise someone else could swap what a path names.
pub(crate) fn check_trusted_dirs(dir: &Path) -> Result<(), WasiError> {
    let dir = fs::canonicalize(dir).map_err(|e| WasiError::io("resolve", dir, e))?;
    for ancestor in dir.ancestors() {
        let meta = fs::metadata(ancestor).map_err(|e| WasiError::io("stat", ancestor, e))?;
        if !meta.is_dir() {
            return Err(untrusted(ancestor, "not a directory"));
        }
        check_owner(ancestor, &meta)?;
    }
    Ok(())
}

fn check_owner(path: &Path, meta: &fs::Metadata) -> Result<(), WasiError> {
    if meta.uid() != 0 {
        return Err(untrusted(path, &format!("owned by uid {}, not root", meta.uid())));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(untrusted(path, &format!("mode {:o} lets group or others write it", meta.mode() & 0o7777)));
    }
    Ok(())
}

fn untrusted(path: &Path, reason: &str) -> WasiError {
    WasiError::Untrusted { path: path.to_path_buf(), reason: reason.to_string() }
}

fn libc_o_nofollow() -> i32 {
    nix::fcntl::OFlag::O_NOFOLLOW.bits()
}

/// Feeds `Hash` output into SHA-256, so the key is the same in every build of runbox (std's
/// hashers promise no stability across Rust releases).
struct Sha256Hasher(Sha256);

impl std::hash::Hasher for Sha256Hasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        unreachable!("only the SHA-256 digest is read")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A directory only root can write (/run is root's, 0755), for the checks to pass.
    fn trusted_dir() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("runbox-cache-test-").tempdir_in("/run").expect("temp dir in /run")
    }

    #[test]
    fn only_root_owned_unwritable_files_in_root_owned_dirs_are_trusted() {
        let dir = trusted_dir();
        let file = dir.path().join("m.cwasm");
        fs::write(&file, b"x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        open_trusted(&file).expect("root's own file");
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        let err = open_trusted(&file).unwrap_err().to_string();
        assert!(err.contains("lets group or others write it"), "{err}");
        let link = dir.path().join("link.cwasm");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_trusted(&link).is_err(), "a symlink is never followed");
        // /tmp is world-writable: anyone could have swapped what a path under it names.
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let err = check_trusted_dirs(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("/tmp") && err.contains("write"), "{err}");
    }

    #[test]
    fn a_stored_module_loads_and_a_foreign_one_is_refused() {
        let dir = trusted_dir();
        let cache = ModuleCache::new(dir.path());
        let settings = EngineSettings { fuel: false, wasm_stack_bytes: 1 << 20 };
        let engine = Engine::new(&crate::engine::config(settings, false)).unwrap();
        let path = cache.path(&engine, settings, "0123");
        assert!(matches!(cache.load(&engine, &path), Err(WasiError::NotPrepared { .. })));
        cache.store(&engine, &path, b"(module (func (export \"_start\")))").unwrap();
        let module = cache.load(&engine, &path).expect("loads");
        assert!(module.get_export("_start").is_some());
        // Another configuration has another key, and wasmtime refuses the file anyway.
        let fuel = EngineSettings { fuel: true, ..settings };
        let other = Engine::new(&crate::engine::config(fuel, false)).unwrap();
        assert_ne!(cache.path(&other, fuel, "0123"), path);
        assert!(cache.load(&other, &path).is_err());
    }
}
