//! The service's configuration file, as written on disk (TOML). Every field is optional and
//! its default is documented here; [`super::ServiceConfig::resolve`] checks it and fills the
//! defaults in.

use std::collections::BTreeMap;

use runbox_contract::Limits;
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Address to listen on. Default `127.0.0.1:8080`; `--listen` overrides it.
    pub listen: Option<String>,
    /// Require an API key on `/v1/*` and `/metrics`. Default true. `false` is only accepted on a
    /// loopback address; every request is then tenant `default`.
    pub auth: Option<bool>,
    /// `Host` names (or `host:port`) `/mcp` answers to, against DNS rebinding. Default: the
    /// loopback names (`localhost`, `127.0.0.1`, `::1`) and the listen address.
    pub mcp_allowed_hosts: Option<Vec<String>>,
    #[serde(default)]
    pub admission: AdmissionFile,
    #[serde(default)]
    pub ledger: LedgerFile,
    /// Tenants by name. Default: one tenant, `default`, allowed every runtime up to its maxima.
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantFile>,
    /// API keys, stored as SHA-256, each bound to a tenant.
    #[serde(default)]
    pub keys: Vec<KeyFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionFile {
    /// Runs executing at once, all tenants together. Default: the number of cores.
    pub max_concurrent_runs: Option<usize>,
    /// Accepted runs waiting for a slot, all tenants together; one more is answered 429.
    /// Default 256.
    pub queue_depth: Option<usize>,
    /// Request bytes held in memory at once (bodies being read and runs waiting); one more is
    /// answered 429. Default 512 MiB.
    pub queue_bytes: Option<u64>,
    /// Largest request body; a larger one is answered 413. Default 64 MiB, as `runbox run`.
    pub max_request_bytes: Option<u64>,
    /// On SIGTERM, how long to let accepted runs finish before cancelling them. Default 330 s
    /// (the longest wall time a shipped runtime allows, plus teardown).
    pub drain_timeout_s: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerFile {
    /// How long finished runs, their results and artifacts are kept. Default 168 h (7 days).
    pub retention_hours: Option<u64>,
    /// `full` (default): every commit is fsynced, so an accepted run survives a power loss.
    /// `normal`: survives a crash of the service, not of the machine.
    pub synchronous: Option<Synchronous>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Synchronous {
    Full,
    Normal,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantFile {
    /// Runtime ids this tenant may use, or `["*"]` for all. Default `["*"]`.
    pub runtimes: Option<Vec<String>>,
    /// Per-limit ceilings on top of each runtime's maximum. A request above one is refused
    /// (403); an omitted limit takes the runtime's default, lowered to this ceiling.
    #[serde(default)]
    pub max_limits: Limits,
    /// Runs of this tenant executing at once. Default: the global `max_concurrent_runs`.
    pub max_concurrent_runs: Option<usize>,
    /// Runs of this tenant waiting at once. Default: the global `queue_depth`.
    pub max_queued: Option<usize>,
    /// Sustained run requests per second (a token bucket). Default: no rate limit.
    pub rate_per_second: Option<f64>,
    /// Requests allowed in a burst above the rate. Default: `rate_per_second`, at least 1.
    pub burst: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyFile {
    /// Lowercase hex SHA-256 of the key. The key itself is never stored.
    pub sha256: String,
    pub tenant: String,
    /// A label for people and logs, e.g. who holds the key.
    pub name: Option<String>,
}

impl ConfigFile {
    pub fn parse(text: &str) -> Result<ConfigFile, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}
