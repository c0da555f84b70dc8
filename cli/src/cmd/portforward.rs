//! `port-forward`: listens on local ports and forwards each connection to a port of a pod
//! through the apiserver's `pods/portforward`, as kubectl does: `POD`, `pod/NAME` or
//! `TYPE/NAME`, then `[LOCAL:]REMOTE` ports (named container ports too), `--address`
//! (`localhost` is 127.0.0.1 and ::1), `Forwarding from …` once listening and `Handling
//! connection for …` per connection. Each connection is its own kube-rs WebSocket stream
//! (`v4.channel.k8s.io`); an error the pod side reports ends the command as kubectl's lost
//! connection does. Ctrl-C ends it quietly.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::podcmd;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE/NAME (or POD), then [LOCAL_PORT:]REMOTE_PORT...
    #[arg(value_name = "TYPE/NAME")]
    pub args: Vec<String>,
    /// Addresses to listen on (comma separated): IP addresses or localhost.
    #[arg(long, value_delimiter = ',', default_value = "localhost")]
    pub address: Vec<String>,
    /// How long to wait until at least one pod is running.
    #[arg(long, default_value = "1m0s")]
    pub pod_running_timeout: String,
}

/// A local port and the pod's port it forwards to (local 0: any free port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardedPort {
    pub local: u16,
    pub remote: u16,
}

/// `[LOCAL:]REMOTE` split as kubectl splits it (anything but two parts is the first part twice).
fn split_port(spec: &str) -> (&str, &str) {
    let parts: Vec<&str> = spec.split(':').collect();
    match parts.as_slice() {
        [local, remote] => (local, remote),
        _ => (parts[0], parts[0]),
    }
}

/// Named remote ports replaced by the pod's container port numbers (kubectl's
/// `convertPodNamedPortToNumber`), after refusing UDP-only ports as kubectl does.
pub fn convert_named_ports(ports: &[String], pod: &Pod) -> Result<Vec<String>> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let container_ports: Vec<_> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .collect();
    let by_name = |name: &str| {
        container_ports.iter().find(|p| p.name.as_deref() == Some(name)).map(|p| p.container_port)
    };
    let protocols = |n: i32| {
        let ps = container_ports.iter().filter(move |p| p.container_port == n);
        ps.map(|p| p.protocol.clone().unwrap_or_else(|| "TCP".into())).collect::<Vec<_>>()
    };
    let mut out = Vec::new();
    for spec in ports {
        let (local, remote) = split_port(spec);
        if remote.is_empty() {
            return Err(CliError::Usage("remote port cannot be empty".into()));
        }
        let number = match remote.parse::<i64>() {
            Ok(n) => n.to_string(),
            Err(_) => match by_name(remote) {
                Some(n) => n.to_string(),
                None => {
                    return Err(CliError::Usage(format!(
                        "Pod '{pod_name}' does not have a named port '{remote}'"
                    )));
                }
            },
        };
        if let Ok(n) = number.parse::<i32>() {
            let ps = protocols(n);
            if ps.iter().any(|p| p == "UDP") && !ps.iter().any(|p| p == "TCP") {
                return Err(CliError::Usage(format!("UDP protocol is not supported for {remote}")));
            }
        }
        out.push(if local != remote { format!("{local}:{number}") } else { number });
    }
    Ok(out)
}

/// Port specs as client-go's `parsePorts` reads them: `5000`, `8888:5000`, `:5000`/`0:5000`.
pub fn parse_ports(ports: &[String]) -> Result<Vec<ForwardedPort>> {
    let mut out = Vec::new();
    for spec in ports {
        let parts: Vec<&str> = spec.split(':').collect();
        let (local, remote) = match parts.as_slice() {
            [one] => (*one, *one),
            [l, r] => (if l.is_empty() { "0" } else { *l }, *r),
            _ => return Err(CliError::Usage(format!("invalid port format '{spec}'"))),
        };
        let local = port_number(local)
            .map_err(|e| CliError::Usage(format!("error parsing local port '{local}': {e}")))?;
        let remote_port = port_number(remote)
            .map_err(|e| CliError::Usage(format!("error parsing remote port '{remote}': {e}")))?;
        if remote_port == 0 {
            return Err(CliError::Usage("remote port must be > 0".into()));
        }
        out.push(ForwardedPort { local, remote: remote_port });
    }
    Ok(out)
}

/// A port number, with Go's `strconv.ParseUint` wording on failure.
fn port_number(s: &str) -> std::result::Result<u16, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing \"{s}\": invalid syntax"));
    }
    s.parse::<u16>().map_err(|_| format!("strconv.ParseUint: parsing \"{s}\": value out of range"))
}

/// An address to listen on; with `all`, the port fails only when every such address fails
/// (`localhost`), else when any does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddress {
    pub address: String,
    pub ip: IpAddr,
    pub all: bool,
}

/// `--address` values as client-go reads them: `localhost` is 127.0.0.1 and ::1; duplicates
/// once; sorted by their text.
pub fn parse_addresses(addresses: &[String]) -> Result<Vec<ListenAddress>> {
    let mut out: Vec<ListenAddress> = Vec::new();
    let mut add = |a: ListenAddress| {
        if let Some(i) = out.iter().position(|o| o.address == a.address) {
            // A plain IP given again replaces the localhost one, as upstream's map does.
            if !a.all {
                out[i] = a;
            }
        } else {
            out.push(a);
        }
    };
    for a in addresses {
        if a == "localhost" {
            add(ListenAddress {
                address: "127.0.0.1".into(),
                ip: [127, 0, 0, 1].into(),
                all: true,
            });
            add(ListenAddress {
                address: "::1".into(),
                ip: std::net::Ipv6Addr::LOCALHOST.into(),
                all: true,
            });
        } else if let Ok(ip) = a.parse::<IpAddr>() {
            add(ListenAddress { address: a.clone(), ip, all: false });
        } else {
            return Err(CliError::Usage(format!("{a} is not a valid IP")));
        }
    }
    out.sort_by(|a, b| a.address.cmp(&b.address));
    Ok(out)
}

/// `host:port` as Go's `net.JoinHostPort` writes it.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    if a.args.len() < 2 {
        return Err(CliError::Usage(
            "TYPE/NAME and list of ports are required for port-forward\nSee 'kubectl-lite port-forward -h' for help and examples".into(),
        ));
    }
    let timeout = podcmd::running_timeout(&a.pod_running_timeout)?;
    if let Some((t, _)) = a.args[0].split_once('/')
        && f.resource(t).await?.kind == "Service"
    {
        // kubectl maps a service's ports to its pods' target ports; until that is done here, a
        // service is refused rather than forwarded to the wrong port.
        return Err(CliError::Usage(
            "port-forward to a service (its ports mapped to target ports) is not supported by kubectl-lite yet; name a pod or a workload".into(),
        ));
    }
    let pod = podcmd::attachable(f, &a.args[0], timeout).await?;
    let ports = convert_named_ports(&a.args[1..], &pod)?;
    let namespace = f.namespace().await?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let pod = podcmd::get(f, &namespace, &name).await?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    if phase != "Running" {
        return Err(CliError::Usage(format!(
            "unable to forward port because pod is not running. Current status={phase}"
        )));
    }
    let addresses = parse_addresses(&a.address)?;
    let mut ports = parse_ports(&ports)?;
    let pods: Api<Pod> = Api::namespaced(f.client().await?.clone(), &namespace);

    let mut listeners = Vec::new();
    let mut any = false;
    for port in &mut ports {
        match listen(port, &addresses).await {
            Ok(ls) => {
                any = true;
                listeners.extend(ls.into_iter().map(|l| (l, *port)));
            }
            Err(e) => eprintln!("Unable to listen on port {}: {e}", port.local),
        }
    }
    if !any {
        let list: Vec<String> =
            ports.iter().map(|p| format!("{{{} {}}}", p.local, p.remote)).collect();
        return Err(CliError::Usage(format!(
            "unable to listen on any of the requested ports: [{}]",
            list.join(" ")
        )));
    }

    // The listeners and connections are this command's tasks; a pod-side error, or Ctrl-C,
    // ends them all (dropping the set aborts them).
    let (lost_tx, mut lost) = mpsc::channel::<()>(1);
    let mut tasks = JoinSet::new();
    for (listener, port) in listeners {
        let pods = pods.clone();
        let name = name.clone();
        let lost_tx = lost_tx.clone();
        tasks.spawn(accept(listener, port, pods, name, lost_tx));
    }
    drop(lost_tx);
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Ok(()),
        Some(()) = lost.recv() => Err(CliError::Usage("lost connection to pod".into())),
    }
}

/// Listens on `port` at every address (a port 0 becomes the port first given), saying so.
async fn listen(
    port: &mut ForwardedPort,
    addresses: &[ListenAddress],
) -> Result<Vec<TcpListener>, String> {
    let mut listeners = Vec::new();
    let mut errors = Vec::new();
    let (mut all_ok, mut all_failed, mut any_failed) = (0, 0, 0);
    for a in addresses {
        match TcpListener::bind((a.ip, port.local)).await {
            Ok(l) => {
                if let Ok(addr) = l.local_addr() {
                    port.local = addr.port();
                }
                println!(
                    "Forwarding from {} -> {}",
                    join_host_port(&a.address, port.local),
                    port.remote
                );
                listeners.push(l);
                if a.all {
                    all_ok += 1;
                }
            }
            Err(e) => {
                let net = if a.ip.is_ipv4() { "tcp4" } else { "tcp6" };
                errors.push(format!(
                    "unable to create listener: Error listen {net} {}: {e}",
                    join_host_port(&a.address, port.local)
                ));
                if a.all {
                    all_failed += 1;
                } else {
                    any_failed += 1;
                }
            }
        }
    }
    if (all_ok == 0 && all_failed > 0) || any_failed > 0 {
        return Err(format!(
            "Listeners failed to create with the following errors: [{}]",
            errors.join(" ")
        ));
    }
    Ok(listeners)
}

/// Accepts connections on one listener, each forwarded on a task of this listener's own.
async fn accept(
    listener: TcpListener,
    port: ForwardedPort,
    pods: Api<Pod>,
    name: String,
    lost: mpsc::Sender<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A listener that fails stops accepting, as kubectl's does.
                let Ok((conn, _)) = accepted else { return };
                println!("Handling connection for {}", port.local);
                connections.spawn(forward(conn, port, pods.clone(), name.clone(), lost.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Forwards one connection through a stream of its own; an error the pod side reports is said
/// on stderr and ends the command.
async fn forward(
    mut conn: TcpStream,
    port: ForwardedPort,
    pods: Api<Pod>,
    name: String,
    lost: mpsc::Sender<()>,
) {
    let mut fwd = match pods.portforward(&name, &[port.remote]).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: error upgrading connection: {e}");
            let _ = lost.send(()).await;
            return;
        }
    };
    let (Some(mut stream), Some(error)) =
        (fwd.take_stream(port.remote), fwd.take_error(port.remote))
    else {
        return;
    };
    let _ = tokio::io::copy_bidirectional(&mut conn, &mut stream).await;
    drop(stream);
    if let Some(msg) = error.await.filter(|m| !m.is_empty()) {
        eprintln!("error: an error occurred forwarding {} -> {}: {msg}", port.local, port.remote);
        let _ = lost.send(()).await;
    }
    let _ = fwd.join().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn port_specs_read_as_kubectl_reads_them() {
        let got = parse_ports(&strings(&["80", "8888:5000", ":5000", "0:5000"])).unwrap();
        let want = [(80, 80), (8888, 5000), (0, 5000), (0, 5000)]
            .map(|(local, remote)| ForwardedPort { local, remote });
        assert_eq!(got, want);
    }

    #[test]
    fn bad_port_specs_are_named_in_kubectls_words() {
        let e = |s: &str| parse_ports(&strings(&[s])).unwrap_err().to_string();
        assert_eq!(
            e("abc:80"),
            "error: error parsing local port 'abc': strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
        assert_eq!(
            e("8080:70000"),
            "error: error parsing remote port '70000': strconv.ParseUint: parsing \"70000\": value out of range"
        );
        assert_eq!(e("8080:0"), "error: remote port must be > 0");
        assert_eq!(e("1:2:3"), "error: invalid port format '1:2:3'");
    }

    #[test]
    fn localhost_listens_on_both_loopbacks_and_other_addresses_must_be_ips() {
        let got = parse_addresses(&strings(&["localhost"])).unwrap();
        let names: Vec<&str> = got.iter().map(|a| a.address.as_str()).collect();
        assert_eq!(names, ["127.0.0.1", "::1"]);
        assert!(got.iter().all(|a| a.all));
        let got = parse_addresses(&strings(&["0.0.0.0", "localhost"])).unwrap();
        let names: Vec<&str> = got.iter().map(|a| a.address.as_str()).collect();
        assert_eq!(names, ["0.0.0.0", "127.0.0.1", "::1"]);
        assert_eq!(
            parse_addresses(&strings(&["example.com"])).unwrap_err().to_string(),
            "error: example.com is not a valid IP"
        );
    }

    #[test]
    fn named_ports_become_container_port_numbers() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "ports": [
                {"name": "http", "containerPort": 80},
                {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]}}))
        .unwrap();
        assert_eq!(
            convert_named_ports(&strings(&["http", "8080:http", "9090"]), &pod).unwrap(),
            ["80", "8080:80", "9090"]
        );
        assert_eq!(
            convert_named_ports(&strings(&["nope"]), &pod).unwrap_err().to_string(),
            "error: Pod 'web' does not have a named port 'nope'"
        );
        assert_eq!(
            convert_named_ports(&strings(&["dns"]), &pod).unwrap_err().to_string(),
            "error: UDP protocol is not supported for dns"
        );
        assert_eq!(
            convert_named_ports(&strings(&["8080:"]), &pod).unwrap_err().to_string(),
            "error: remote port cannot be empty"
        );
    }

    #[test]
    fn hosts_join_ports_as_go_joins_them() {
        assert_eq!(join_host_port("127.0.0.1", 8080), "127.0.0.1:8080");
        assert_eq!(join_host_port("::1", 8080), "[::1]:8080");
    }
}
