use serde::Deserialize;

use crate::RuntimeError;

/// A root-filesystem recipe from images/: which host paths appear, read-only, in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The file name without `.toml`; runtimes refer to it by this name.
    pub name: String,
    pub description: String,
    pub mirrors: Vec<MirrorEntry>,
}

/// A host path reproduced at the same place in the sandbox: a symlink becomes the same symlink,
/// anything else a read-only, nosuid bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MirrorEntry {
    pub path: String,
    /// A missing optional path is left out; a missing required one makes runtimes unusable.
    #[serde(default)]
    pub optional: bool,
    /// Why the sandbox needs this path. Required: every hole in the root has a reason.
    pub why: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImageFile {
    description: String,
    #[serde(default)]
    mirror: Vec<MirrorEntry>,
}

/// Paths that must never be mirrored: they would hand the sandbox host state or devices.
const FORBIDDEN: &[&str] =
    &["/", "/proc", "/sys", "/dev", "/run", "/var", "/tmp", "/root", "/home", "/etc", "/workspace"];

impl Image {
    /// The image of a WASI runtime: nothing of the host; the guest sees only its preopens.
    pub fn none() -> Image {
        Image {
            name: "none".into(),
            description: "no host paths: a WASI guest sees only its preopened directories".into(),
            mirrors: Vec::new(),
        }
    }

    pub fn parse(file: &str, text: &str) -> Result<Image, RuntimeError> {
        let parsed: ImageFile =
            toml::from_str(text).map_err(|e| RuntimeError::Parse { file: file.into(), message: e.to_string() })?;
        let invalid = |message: String| RuntimeError::Invalid { file: file.into(), message };
        for entry in &parsed.mirror {
            if !entry.path.starts_with('/')
                || entry.path.split('/').any(|c| c == ".." || c == ".")
                || entry.path.ends_with('/')
            {
                return Err(invalid(format!("mirror path {:?} must be absolute and normalized", entry.path)));
            }
            if FORBIDDEN.contains(&entry.path.as_str()) {
                return Err(invalid(format!(
                    "mirror path {:?} would expose host state; mirror a narrower path",
                    entry.path
                )));
            }
            if entry.why.trim().is_empty() {
                return Err(invalid(format!("mirror path {:?} needs a `why`", entry.path)));
            }
        }
        let name = file.strip_suffix(".toml").unwrap_or(file).to_string();
        Ok(Image { name, description: parsed.description, mirrors: parsed.mirror })
    }
}
