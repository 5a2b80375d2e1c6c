//! API keys: generated from 256 random bits, stored only as their SHA-256.
//!
//! A key is not a password: it has full entropy, so a fast hash is enough (no one can search
//! 2^256 keys), and checking one costs a microsecond per request where a password hash would
//! cost tens of milliseconds.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{ConfigFile, DEFAULT_TENANT};
use crate::ServiceError;

/// A key generated on first start.
pub struct NewKey {
    pub key: String,
    pub tenant: String,
}

/// Every key starts with this, so a leaked one is easy to recognize (and to scan for).
pub const KEY_PREFIX: &str = "rbx_";

/// Lowercase hex SHA-256 of a key, as stored in the configuration file.
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// A new key: the prefix and 64 hex digits of OS randomness.
pub fn generate_key() -> Result<String, ServiceError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| ServiceError::Refused(format!("read random bytes for a key: {e}")))?;
    Ok(format!("{KEY_PREFIX}{}", hex::encode(bytes)))
}

/// Reads the configuration at `path`. On the first start (no file) it writes a default one;
/// when auth is on and no key is configured, it generates a key for the first tenant and adds
/// its hash to the file. Returns the file and the new key with its tenant; the caller prints
/// the key once: it is stored nowhere.
pub fn load_or_init(path: &Path) -> Result<(ConfigFile, Option<NewKey>), ServiceError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            write_new(path, DEFAULT_CONFIG)?;
            DEFAULT_CONFIG.to_string()
        }
        Err(e) => return Err(ServiceError::io("read", path, e)),
    };
    let file = ConfigFile::parse(&text).map_err(|m| ServiceError::config(path, m))?;
    if file.auth == Some(false) || !file.keys.is_empty() {
        return Ok((file, None));
    }
    let key = generate_key()?;
    let tenant = file.tenants.keys().next().cloned().unwrap_or_else(|| DEFAULT_TENANT.to_string());
    let mut addition = String::new();
    if file.tenants.is_empty() {
        addition.push_str(&format!("\n[tenants.{DEFAULT_TENANT}]\nruntimes = [\"*\"]\n"));
    }
    addition.push_str(&format!(
        "\n# Generated on first start; the key was printed once and is stored nowhere.\n\
         [[keys]]\nsha256 = \"{}\"\ntenant = {}\nname = \"generated\"\n",
        hash_key(&key),
        toml_string(&tenant)
    ));
    append(path, &addition)?;
    let text = format!("{text}{addition}");
    let file = ConfigFile::parse(&text).map_err(|m| ServiceError::config(path, m))?;
    Ok((file, Some(NewKey { key, tenant })))
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn write_new(path: &Path, text: &str) -> Result<(), ServiceError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ServiceError::io("create", dir, e))?;
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| ServiceError::io("create", path, e))?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(|e| ServiceError::io("write", path, e))
}

fn append(path: &Path, text: &str) -> Result<(), ServiceError> {
    let mut file =
        std::fs::OpenOptions::new().append(true).open(path).map_err(|e| ServiceError::io("open", path, e))?;
    file.write_all(text.as_bytes()).and_then(|()| file.sync_all()).map_err(|e| ServiceError::io("write", path, e))
}

/// The file written on the first start. Every setting is shown with its default.
const DEFAULT_CONFIG: &str = r#"# runbox serve: configuration (see the README, section "runbox serve").
# Every commented setting shows its default.

# listen = "127.0.0.1:8080"     # --listen overrides it
# auth = true                   # false is only accepted on a loopback address

[admission]
# max_concurrent_runs = <cores> # runs executing at once, all tenants
# queue_depth = 256             # runs waiting for a slot; one more is answered 429
# queue_bytes = 536870912       # request bytes held in memory at once
# max_request_bytes = 67108864  # a larger body is answered 413
# drain_timeout_s = 330         # on SIGTERM, time given to accepted runs before they are cancelled

[ledger]
# retention_hours = 168         # results and artifacts kept this long
# synchronous = "full"          # "normal": survives a crash of the service, not a power loss

[tenants.default]
runtimes = ["*"]                # runtime ids, or "*" for all
# max_concurrent_runs = <cores>
# max_queued = 256
# rate_per_second = 20.0        # default: no rate limit
# burst = 20.0
# [tenants.default.max_limits]  # ceilings on top of each runtime's maximum
# wall_time_ms = 60000
# memory_bytes = 536870912

# API keys: the SHA-256 of each key, never the key. Add one with
#   printf %s "$KEY" | sha256sum
# [[keys]]
# sha256 = "..."
# tenant = "default"
# name = "ci"
"#;
