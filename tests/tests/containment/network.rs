use super::*;

// ---------------------------------------------------------------------------------------------
// Network

/// The host's own non-loopback IPv4 address (a UDP connect sends nothing), if it has one.
fn host_ip() -> Option<String> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("10.255.255.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then(|| ip.to_string())
}

#[test]
fn network_reaches_nothing_outside_the_sandbox() {
    let id = nonce();
    let tcp = TcpListener::bind("0.0.0.0:0").expect("bind tcp");
    let port = tcp.local_addr().expect("addr").port();
    let ip = host_ip().unwrap_or_else(|| "192.0.2.1".to_string());
    // Control: from the host the listener is reachable at that address.
    if ip != "192.0.2.1" {
        drop(std::net::TcpStream::connect((ip.as_str(), port)).expect("host reaches its own listener"));
        drop(tcp.accept().expect("accept the control connection"));
    }
    tcp.set_nonblocking(true).expect("nonblocking");
    let abstract_name = format!("runbox-containment-{id}");
    let abstract_listener =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("abstract"))
            .expect("bind abstract");
    abstract_listener.set_nonblocking(true).expect("nonblocking");
    let dir = tempfile::Builder::new().prefix("runbox-net-").tempdir_in("/tmp").expect("tempdir");
    let unix_path = dir.path().join("sock");
    let unix_listener = UnixListener::bind(&unix_path).expect("bind unix");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::set_permissions(&unix_path, fs::Permissions::from_mode(0o777)).expect("chmod");
    unix_listener.set_nonblocking(true).expect("nonblocking");

    let rb = Runbox::new();
    let port_arg = port.to_string();
    let report = probe_report(
        &rb.run(&python_probe("network.py", &[&port_arg, &ip, &abstract_name, &unix_path.display().to_string()])),
    );

    let result = |name: &str| report[name]["result"].as_str().unwrap_or_else(|| panic!("{name}: {report}")).to_string();
    // Its own loopback answers: nobody listens on that port there.
    assert_eq!(result("tcp_loopback"), "ECONNREFUSED", "{report}");
    assert_eq!(result("tcp_loopback6"), "ECONNREFUSED", "{report}");
    // No interface but lo, so no route anywhere else; it fails at once, nothing is sent.
    for name in ["tcp_host_ip", "tcp_unrouted", "udp_public"] {
        assert_eq!(result(name), "ENETUNREACH", "{name}: {report}");
        assert!(report[name]["ms"].as_u64().expect("ms") < 500, "{name} took long: {report}");
    }
    // Abstract unix sockets belong to the network namespace; the path is not in the root.
    assert_eq!(result("unix_abstract"), "ECONNREFUSED", "{report}");
    assert_eq!(result("unix_path"), "ENOENT", "{report}");
    // The sandbox could bind the port the host holds and talk to itself over it.
    assert_eq!(report["own_loopback"], "ping", "{report}");
    assert_eq!(report["interfaces"], json!(["lo"]), "{report}");
    assert_eq!(report["proc_net_dev"], json!(["lo"]), "{report}");
    assert_eq!(report["ipv4_routes"], 0, "{report}");

    // Host side: no listener got anything.
    assert_eq!(tcp.accept().map(|(_, peer)| peer.to_string()).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
    assert_eq!(abstract_listener.accept().map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
    assert_eq!(unix_listener.accept().map(|_| ()).map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
}
