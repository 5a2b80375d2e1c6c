//! The service's settings: the configuration file ([`file`]) checked against the allowlist,
//! with every default filled in, and the API keys ([`keys`]).

mod file;
pub mod keys;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use runbox_contract::Limits;
use runbox_runtimes::Allowlist;

pub use file::{ConfigFile, Synchronous};

use crate::ServiceError;

/// Where `runbox serve` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// The tenant of the key generated on first start, and of every request when auth is off.
pub const DEFAULT_TENANT: &str = "default";

/// The resolved configuration. See [`file::ConfigFile`] for what each setting means.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub listen: SocketAddr,
    pub auth: bool,
    /// `Host` values `/mcp` serves.
    pub mcp_allowed_hosts: Vec<String>,
    pub admission: AdmissionSettings,
    pub retention: Duration,
    pub synchronous: Synchronous,
    pub tenants: BTreeMap<String, Arc<TenantPolicy>>,
    /// SHA-256 (hex) of each key → the key's binding.
    pub keys: HashMap<String, KeyBinding>,
}

#[derive(Debug, Clone, Copy)]
pub struct AdmissionSettings {
    pub max_concurrent_runs: usize,
    pub queue_depth: usize,
    pub queue_bytes: u64,
    pub max_request_bytes: u64,
    pub drain_timeout: Duration,
}

#[derive(Debug, Clone)]
pub struct KeyBinding {
    pub tenant: String,
    /// The first 8 hex digits of the key's hash: safe to log, enough to tell keys apart.
    pub key_id: String,
}

/// What one tenant may do.
#[derive(Debug, Clone)]
pub struct TenantPolicy {
    pub name: String,
    /// `None`: every runtime of the allowlist.
    pub runtimes: Option<BTreeSet<String>>,
    pub max_limits: Limits,
    pub max_concurrent_runs: usize,
    pub max_queued: usize,
    pub rate: Option<Rate>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: f64,
}

impl TenantPolicy {
    pub fn allows_runtime(&self, id: &str) -> bool {
        self.runtimes.as_ref().is_none_or(|set| set.contains(id))
    }
}

impl ServiceConfig {
    /// Checks `file` (read from `path`, for messages) and fills in the defaults.
    /// `listen` (the command line's) wins over the file's.
    pub fn resolve(
        file: ConfigFile,
        path: &Path,
        listen: Option<SocketAddr>,
        allowlist: &Allowlist,
    ) -> Result<ServiceConfig, ServiceError> {
        let bad = |message: String| ServiceError::config(path, message);
        let listen = match (listen, &file.listen) {
            (Some(addr), _) => addr,
            (None, Some(text)) => text.parse().map_err(|e| bad(format!("listen {text:?}: {e}; use HOST:PORT")))?,
            (None, None) => DEFAULT_LISTEN.parse().expect("valid default"),
        };
        let auth = file.auth.unwrap_or(true);
        if !auth && !listen.ip().is_loopback() {
            return Err(bad(format!(
                "auth = false is only allowed on a loopback address, and {listen} is not one; \
                 listen on 127.0.0.1 or turn auth on"
            )));
        }
        let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
        let a = &file.admission;
        let admission = AdmissionSettings {
            max_concurrent_runs: a.max_concurrent_runs.unwrap_or(cores),
            queue_depth: a.queue_depth.unwrap_or(256),
            queue_bytes: a.queue_bytes.unwrap_or(512 << 20),
            max_request_bytes: a.max_request_bytes.unwrap_or(64 << 20),
            drain_timeout: Duration::from_secs(a.drain_timeout_s.unwrap_or(330)),
        };
        if admission.max_concurrent_runs == 0 {
            return Err(bad("admission.max_concurrent_runs must be at least 1".into()));
        }
        if admission.queue_bytes < admission.max_request_bytes {
            return Err(bad(format!(
                "admission.queue_bytes ({}) is below max_request_bytes ({}): no request of the largest size could \
                 ever be admitted; raise queue_bytes or lower max_request_bytes",
                admission.queue_bytes, admission.max_request_bytes
            )));
        }
        let mut tenant_files = file.tenants;
        if tenant_files.is_empty() {
            tenant_files.insert(DEFAULT_TENANT.to_string(), Default::default());
        }
        let mut tenants = BTreeMap::new();
        for (name, tenant) in tenant_files {
            let policy = tenant_policy(&name, tenant, &admission, allowlist).map_err(bad)?;
            tenants.insert(name, Arc::new(policy));
        }
        if !auth && !tenants.contains_key(DEFAULT_TENANT) {
            return Err(bad(format!("auth = false serves every request as tenant {DEFAULT_TENANT:?}; define it")));
        }
        let mut keys = HashMap::new();
        for (i, key) in file.keys.into_iter().enumerate() {
            let valid = key.sha256.len() == 64 && key.sha256.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
            if !valid {
                return Err(bad(format!(
                    "keys[{i}].sha256 must be 64 lowercase hex digits (`runbox serve` stores keys hashed)"
                )));
            }
            if !tenants.contains_key(&key.tenant) {
                return Err(bad(format!("keys[{i}] names tenant {:?}, which is not defined", key.tenant)));
            }
            let binding = KeyBinding { tenant: key.tenant, key_id: key.sha256[..8].to_string() };
            if keys.insert(key.sha256, binding).is_some() {
                return Err(bad(format!("keys[{i}] is listed twice")));
            }
        }
        let retention = Duration::from_secs(file.ledger.retention_hours.unwrap_or(168) * 3600);
        let synchronous = file.ledger.synchronous.unwrap_or(Synchronous::Full);
        let mcp_allowed_hosts = file.mcp_allowed_hosts.clone().unwrap_or_else(|| {
            let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).to_vec();
            if !listen.ip().is_unspecified() && !listen.ip().is_loopback() {
                hosts.push(listen.ip().to_string());
            }
            hosts
        });
        Ok(ServiceConfig { listen, auth, mcp_allowed_hosts, admission, retention, synchronous, tenants, keys })
    }
}

fn tenant_policy(
    name: &str,
    tenant: file::TenantFile,
    admission: &AdmissionSettings,
    allowlist: &Allowlist,
) -> Result<TenantPolicy, String> {
    let runtimes = match tenant.runtimes {
        None => None,
        Some(list) if list.iter().any(|r| r == "*") => None,
        Some(list) => {
            if let Some(unknown) = list.iter().find(|id| allowlist.get(id).is_none()) {
                let known: Vec<&str> = allowlist.ids().collect();
                return Err(format!(
                    "tenants.{name}.runtimes: unknown runtime {unknown:?}; choose from {}",
                    known.join(", ")
                ));
            }
            Some(list.into_iter().collect())
        }
    };
    let rate = match tenant.rate_per_second {
        None => None,
        Some(r) if !(r > 0.0 && r.is_finite()) => {
            return Err(format!("tenants.{name}.rate_per_second must be a positive number"));
        }
        Some(per_second) => {
            let burst = tenant.burst.unwrap_or(per_second).max(1.0);
            Some(Rate { per_second, burst })
        }
    };
    let max_concurrent_runs = tenant.max_concurrent_runs.unwrap_or(admission.max_concurrent_runs);
    if max_concurrent_runs == 0 {
        return Err(format!("tenants.{name}.max_concurrent_runs must be at least 1"));
    }
    Ok(TenantPolicy {
        name: name.to_string(),
        runtimes,
        max_limits: tenant.max_limits,
        max_concurrent_runs,
        max_queued: tenant.max_queued.unwrap_or(admission.queue_depth),
        rate,
    })
}

#[cfg(test)]
mod tests;
