use super::*;

fn resolve(text: &str) -> Result<ServiceConfig, ServiceError> {
    let allowlist = Allowlist::embedded().unwrap();
    ServiceConfig::resolve(ConfigFile::parse(text).unwrap(), Path::new("test.toml"), None, &allowlist)
}

fn message(result: Result<ServiceConfig, ServiceError>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn an_empty_file_gives_the_documented_defaults() {
    let config = resolve("").unwrap();
    assert_eq!(config.listen.to_string(), DEFAULT_LISTEN);
    assert!(config.auth);
    let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(1);
    assert_eq!(config.admission.max_concurrent_runs, cores);
    assert_eq!(config.admission.queue_depth, 256);
    assert_eq!(config.retention, Duration::from_secs(168 * 3600));
    let tenant = &config.tenants[DEFAULT_TENANT];
    assert!(tenant.allows_runtime("python") && tenant.allows_runtime("sh"));
    assert_eq!(tenant.max_concurrent_runs, cores);
    assert!(tenant.rate.is_none());
}

#[test]
fn the_default_file_written_on_first_start_parses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let (file, key) = keys::load_or_init(&path).unwrap();
    let key = key.expect("a key is generated on first start").key;
    assert!(key.starts_with(keys::KEY_PREFIX) && key.len() == 68, "{key}");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(&key), "the key itself is never stored");
    assert!(text.contains(&keys::hash_key(&key)));
    let config = ServiceConfig::resolve(file, &path, None, &Allowlist::embedded().unwrap()).unwrap();
    assert_eq!(config.keys[&keys::hash_key(&key)].tenant, DEFAULT_TENANT);
    // The second start finds the key and generates none.
    let (_, again) = keys::load_or_init(&path).unwrap();
    assert!(again.is_none());
}

#[test]
fn a_file_without_keys_gets_one_for_its_first_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, "[tenants.ci]\nruntimes = [\"sh\"]\n").unwrap();
    let (file, key) = keys::load_or_init(&path).unwrap();
    let config = ServiceConfig::resolve(file, &path, None, &Allowlist::embedded().unwrap()).unwrap();
    let key = key.unwrap();
    assert_eq!(key.tenant, "ci");
    assert_eq!(config.keys[&keys::hash_key(&key.key)].tenant, "ci");
    assert!(!config.tenants["ci"].allows_runtime("python"));
}

#[test]
fn auth_off_is_refused_beyond_loopback() {
    assert!(resolve("auth = false").is_ok());
    let err = message(resolve("auth = false\nlisten = \"0.0.0.0:8080\""));
    assert!(err.contains("only allowed on a loopback address"), "{err}");
    assert!(resolve("listen = \"0.0.0.0:8080\"").is_ok(), "with auth on, any address");
}

#[test]
fn mistakes_are_refused_with_what_to_fix() {
    let err = message(resolve("[tenants.a]\nruntimes = [\"cobol\"]"));
    assert!(err.contains("unknown runtime \"cobol\"") && err.contains("python"), "{err}");
    let err = message(resolve("[[keys]]\nsha256 = \"abc\"\ntenant = \"default\""));
    assert!(err.contains("64 lowercase hex"), "{err}");
    let err = message(resolve(&format!("[[keys]]\nsha256 = \"{}\"\ntenant = \"nobody\"", "a".repeat(64))));
    assert!(err.contains("tenant \"nobody\""), "{err}");
    let err = message(resolve("[admission]\nmax_concurrent_runs = 0"));
    assert!(err.contains("at least 1"), "{err}");
    let err = message(resolve("[tenants.a]\nrate_per_second = -1.0"));
    assert!(err.contains("positive"), "{err}");
    assert!(ConfigFile::parse("unknown_setting = 1").unwrap_err().contains("unknown field"));
}

#[test]
fn tenant_settings_are_read() {
    let config = resolve(
        "[admission]\nmax_concurrent_runs = 4\n[tenants.t]\nruntimes = [\"sh\", \"python\"]\nmax_concurrent_runs = 1\n\
         rate_per_second = 5.0\n[tenants.t.max_limits]\nwall_time_ms = 1000\n",
    )
    .unwrap();
    let t = &config.tenants["t"];
    assert_eq!(t.max_concurrent_runs, 1);
    assert_eq!(t.max_queued, 256);
    assert_eq!(t.rate, Some(Rate { per_second: 5.0, burst: 5.0 }));
    assert_eq!(t.max_limits.wall_time_ms, Some(1000));
    assert!(t.allows_runtime("sh") && !t.allows_runtime("bash"));
}
