//! Whether each runtime can run on this host, cached for a few seconds: for a WASI runtime the
//! answer looks into the cache directory for its prepared package and compiled module, which is
//! too much to repeat for every request, and a runtime prepared while the service runs becomes
//! usable without a restart.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use runbox_runtimes::{Allowlist, Usability};

const FRESH_FOR: Duration = Duration::from_secs(5);

pub struct UsabilityCache {
    /// The runs' cache directory (`--cache-dir`), where WASI runtimes are prepared.
    cache_dir: PathBuf,
    entries: Mutex<Option<(Instant, HashMap<String, Usability>)>>,
}

impl UsabilityCache {
    pub fn new(cache_dir: PathBuf) -> UsabilityCache {
        UsabilityCache { cache_dir, entries: Mutex::new(None) }
    }

    pub fn of(&self, allowlist: &Allowlist, runtime_id: &str) -> Usability {
        let mut entries = self.entries.lock().expect("usability cache");
        let stale = entries.as_ref().is_none_or(|(at, _)| at.elapsed() > FRESH_FOR);
        if stale {
            let fresh =
                allowlist.iter().map(|rt| (rt.id.clone(), runbox_runner::usability(rt, &self.cache_dir))).collect();
            *entries = Some((Instant::now(), fresh));
        }
        let (_, map) = entries.as_ref().expect("filled above");
        map.get(runtime_id).cloned().unwrap_or_else(|| Usability::Unusable("not in the allowlist".into()))
    }
}
