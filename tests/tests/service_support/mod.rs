//! Harness for the `runbox serve` tests: starts the real binary on a loopback port with its own
//! state directory, and talks plain HTTP/1.0 to it over a TcpStream (one request per
//! connection, the body delimited by the close), so the tests need no HTTP client library.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use runbox_tests::{runbox_bin, sha256_hex};
use serde_json::Value;

/// The key of tenant `default` in [`config`].
pub const KEY: &str = "rbx_test_default_0123456789abcdef0123456789abcdef0123456789abcdef";
/// The key of tenant `limited`: sh only, one run at a time, two waiting, wall time at most 5 s.
pub const LIMITED_KEY: &str = "rbx_test_limited_0123456789abcdef0123456789abcdef0123456789abcdef";

/// A configuration with the two test tenants and `extra` TOML appended.
pub fn config(extra: &str) -> String {
    format!(
        "{extra}\n\
         [tenants.default]\nruntimes = [\"*\"]\n\
         [tenants.limited]\nruntimes = [\"sh\"]\nmax_concurrent_runs = 1\nmax_queued = 2\n\
         [tenants.limited.max_limits]\nwall_time_ms = 5000\n\
         [[keys]]\nsha256 = \"{}\"\ntenant = \"default\"\n\
         [[keys]]\nsha256 = \"{}\"\ntenant = \"limited\"\n",
        sha256_hex(KEY.as_bytes()),
        sha256_hex(LIMITED_KEY.as_bytes()),
    )
}

pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    /// What the server printed on stdout before it listened (the generated key, if any).
    pub banner: String,
    state: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl Server {
    /// A server with a fresh state directory and `config` (None: no config file, first start).
    pub fn start(config: Option<&str>) -> Server {
        let temp = tempfile::Builder::new().prefix("runbox-serve-test-").tempdir().expect("state dir");
        let mut server = Server::start_in(temp.path(), config);
        server._temp = Some(temp);
        server
    }

    /// A server on an existing state directory (to restart one), writing `config` first if given.
    pub fn start_in(state: &Path, config: Option<&str>) -> Server {
        Server::try_start_in(state, config).unwrap_or_else(|e| panic!("runbox serve did not start: {e}"))
    }

    /// Like [`Server::start_in`], returning what the server said when it did not start.
    pub fn try_start_in(state: &Path, config: Option<&str>) -> Result<Server, String> {
        Server::try_start_listening(state, config, "127.0.0.1:0")
    }

    /// Like [`Server::try_start_in`], with `--listen listen`.
    // The child is kept in the Server, which waits for it in `wait_exit`, `kill9` or Drop.
    #[allow(clippy::zombie_processes)]
    pub fn try_start_listening(state: &Path, config: Option<&str>, listen: &str) -> Result<Server, String> {
        let serve_dir = state.join("serve");
        std::fs::create_dir_all(&serve_dir).expect("serve dir");
        if let Some(text) = config {
            std::fs::write(serve_dir.join("config.toml"), text).expect("write config");
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(state.join("serve.log")).expect("log");
        let mut child = Command::new(runbox_bin())
            .arg("--state-dir")
            .arg(state)
            .args(["serve", "--listen", listen])
            .env("RUNBOX_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn runbox serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut banner = String::new();
        loop {
            let mut line = String::new();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                let status = child.wait().expect("wait");
                let log = std::fs::read_to_string(state.join("serve.log")).unwrap_or_default();
                return Err(format!("exited with {status}; stdout: {banner}\nlog: {log}"));
            }
            banner.push_str(&line);
            if let Some(addr) = line.trim().strip_prefix("runbox serve: listening on http://") {
                let addr = addr.parse().expect("an address");
                // Keep draining stdout so the server never blocks on a full pipe.
                std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
                return Ok(Server { child: Some(child), addr, banner, state: state.to_path_buf(), _temp: None });
            }
        }
    }

    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.join("serve.log")).unwrap_or_default()
    }

    /// SIGKILL: the service crashes.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().expect("kill");
        child.wait().expect("wait");
    }

    pub fn sigterm(&self) {
        // SAFETY: kill(2) on the pid of our own child, which is not reaped yet.
        let rc = unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        assert_eq!(rc, 0, "kill");
    }

    /// Waits for the server to exit by itself (after a SIGTERM), at most `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let begun = Instant::now();
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(begun.elapsed() < limit, "the server did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
        let mut stream = self.connect();
        send(&mut stream, method, path, headers, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).expect("read response");
        Response::parse(&raw)
    }

    pub fn get(&self, path: &str, key: &str) -> Response {
        self.request("GET", path, &[("Authorization", &format!("Bearer {key}"))], b"")
    }

    /// POST /v1/runs (with `query`, e.g. "?wait=false") as `key`, plus `headers`.
    pub fn post_run(&self, request: &Value, query: &str, key: &str, headers: &[(&str, &str)]) -> Response {
        let auth = format!("Bearer {key}");
        let mut all = vec![("Authorization", auth.as_str()), ("Content-Type", "application/json")];
        all.extend_from_slice(headers);
        self.request("POST", &format!("/v1/runs{query}"), &all, &serde_json::to_vec(request).expect("json"))
    }

    /// Opens `GET path` as an event stream.
    pub fn events(&self, path: &str, key: &str) -> EventStream {
        let mut stream = self.connect();
        stream.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
        send(
            &mut stream,
            "GET",
            path,
            &[("Authorization", &format!("Bearer {key}")), ("Accept", "text/event-stream")],
            b"",
        );
        let mut reader = BufReader::new(stream);
        let mut status_line = String::new();
        reader.read_line(&mut status_line).expect("status line");
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("header");
            if line.trim().is_empty() {
                break;
            }
        }
        EventStream { reader, status_line }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect_timeout(&self.addr, Duration::from_secs(10)).expect("connect");
        // A waiting POST may take as long as its run: the tests' runs are short.
        stream.set_read_timeout(Some(Duration::from_secs(120))).expect("timeout");
        stream
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM first, so the runs are cancelled and torn down; then make sure.
            // SAFETY: kill(2) on the pid of our own child, which is not reaped yet.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let begun = Instant::now();
            while child.try_wait().ok().flatten().is_none() && begun.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn send(stream: &mut TcpStream, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Length: {}\r\n", body.len());
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write request");
    // The server may answer (413) before reading it all: a reset here is fine.
    let _ = stream.write_all(body);
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    fn parse(raw: &[u8]) -> Response {
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or_else(|| {
            panic!("no HTTP header in {:?}", String::from_utf8_lossy(raw));
        });
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.lines();
        let status =
            lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).expect("status");
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Response { status, headers, body: raw[split + 4..].to_vec() }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == &name.to_ascii_lowercase()).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, String::from_utf8_lossy(&self.body)))
    }

    /// Asserts the status and the JSON error shape, and returns the error object.
    #[track_caller]
    pub fn error(&self, status: u16) -> Value {
        let body = self.json();
        assert_eq!(self.status, status, "{body}");
        let error = body["error"].clone();
        assert!(error["code"].is_string() && error["message"].is_string(), "{body}");
        error
    }

    /// Asserts 200 and returns the JSON body.
    #[track_caller]
    pub fn ok(&self) -> Value {
        let body = self.json();
        assert_eq!(self.status, 200, "{body}");
        body
    }
}

pub struct EventStream {
    reader: BufReader<TcpStream>,
    pub status_line: String,
}

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct Event {
    pub name: String,
    pub data: Value,
}

impl EventStream {
    /// The next event, or None when the stream ends.
    pub fn next(&mut self) -> Option<Event> {
        let (mut name, mut data) = (String::new(), String::new());
        loop {
            let mut line = String::new();
            if self.reader.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if !name.is_empty() || !data.is_empty() {
                    let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                    return Some(Event { name, data });
                }
            } else if let Some(value) = line.strip_prefix("event:") {
                name = value.trim().to_string();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            }
        }
    }
}

/// Polls `GET /v1/runs/{id}` until `done` accepts the record, for at most `limit`.
pub fn wait_for(server: &Server, run_id: &str, limit: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let begun = Instant::now();
    loop {
        let record = server.get(&format!("/v1/runs/{run_id}"), KEY).ok();
        if done(&record) {
            return record;
        }
        assert!(begun.elapsed() < limit, "not there after {limit:?}: {record}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of a Prometheus series (exact name with labels), 0 when absent.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
}
