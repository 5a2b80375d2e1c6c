//! The runtime allowlist. A request names a runtime by id; the executable, its argv, its
//! limits and its root filesystem all come from these data files, never from the request.

mod embedded;
mod error;
mod image;
mod runtime;
mod wasi;

use std::collections::BTreeMap;
use std::path::Path;

pub use error::RuntimeError;
pub use image::{Image, MirrorEntry};
pub use runtime::{ARGS_PLACEHOLDER, BuildStep, ENTRYPOINT_PLACEHOLDER, Runtime, RuntimeKind, Usability};
pub use wasi::{
    CpuMetering, ImportStub, Package, PackageFile, PackageTree, Preopen, PreopenSource, RELATIVE_PATHS, WASI_WORKSPACE,
    WasiModule, WasiSpec,
};

/// The validated set of runtimes a request may choose from.
#[derive(Debug, Clone)]
pub struct Allowlist {
    runtimes: BTreeMap<String, Runtime>,
}

impl Allowlist {
    /// The runtimes and images compiled into the binary (the repository's runtimes/ and images/).
    pub fn embedded() -> Result<Allowlist, RuntimeError> {
        Self::from_sources(embedded::RUNTIMES, embedded::IMAGES)
    }

    /// Loads every `*.toml` of `runtimes_dir`, resolving images from `images_dir`.
    pub fn load_dir(runtimes_dir: &Path, images_dir: &Path) -> Result<Allowlist, RuntimeError> {
        let runtimes = read_tomls(runtimes_dir)?;
        let images = read_tomls(images_dir)?;
        Self::from_sources(&borrow_pairs(&runtimes), &borrow_pairs(&images))
    }

    /// Parses and validates runtime and image sources, given as (file name, TOML text) pairs.
    pub fn from_sources(runtimes: &[(&str, &str)], images: &[(&str, &str)]) -> Result<Allowlist, RuntimeError> {
        let mut parsed_images = BTreeMap::new();
        for (file, text) in images {
            let image = Image::parse(file, text)?;
            parsed_images.insert(image.name.clone(), image);
        }
        let mut map = BTreeMap::new();
        for (file, text) in runtimes {
            let runtime = Runtime::parse(file, text, &parsed_images)?;
            if map.contains_key(&runtime.id) {
                return Err(RuntimeError::Invalid {
                    file: file.to_string(),
                    message: format!("runtime id {:?} is defined twice", runtime.id),
                });
            }
            map.insert(runtime.id.clone(), runtime);
        }
        if map.is_empty() {
            return Err(RuntimeError::Empty);
        }
        Ok(Allowlist { runtimes: map })
    }

    #[cfg(test)]
    pub(crate) fn embedded_images() -> BTreeMap<String, Image> {
        embedded::IMAGES.iter().map(|(f, t)| Image::parse(f, t).unwrap()).map(|i| (i.name.clone(), i)).collect()
    }

    pub fn get(&self, id: &str) -> Option<&Runtime> {
        self.runtimes.get(id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.runtimes.keys().map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Runtime> {
        self.runtimes.values()
    }
}

fn borrow_pairs(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect()
}

fn read_tomls(dir: &Path) -> Result<Vec<(String, String)>, RuntimeError> {
    let read_err = |e: std::io::Error| RuntimeError::Read { path: dir.to_path_buf(), source: e };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text =
                std::fs::read_to_string(&path).map_err(|e| RuntimeError::Read { path: path.clone(), source: e })?;
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            out.push((name, text));
        }
    }
    out.sort();
    Ok(out)
}
