//! The repository's runtimes/ and images/ files, compiled in so that `runbox` works from any
//! directory with no setup. `--runtimes-dir` replaces them.

macro_rules! data_files {
    ($dir:literal: $($name:literal),* $(,)?) => {
        &[$(($name, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../", $dir, "/", $name)))),*]
    };
}

pub const RUNTIMES: &[(&str, &str)] = data_files!("runtimes": "bash.toml", "c.toml", "node.toml", "python.toml", "sh.toml", "python-wasi.toml", "wasm.toml");
pub const IMAGES: &[(&str, &str)] = data_files!("images": "base.toml");
