//! `cluster-info` as kubectl's: `Kubernetes control plane is running at <server>`, then a line
//! per Service labelled `kubernetes.io/cluster-service=true` in `-n` (else `kube-system`):
//! a load balancer's `http://<ip>:<port> ` per port, or the apiserver's service proxy URL
//! (`[https:]<name>[:<port name>]`, https guessed from the first port); the name its
//! `kubernetes.io/name` label, else its own. The hint line follows in every case, a failed
//! list after it. kubectl v1.35 prints no colours here (older ones did).

use serde_json::Value;

use crate::builder::{self, Collection, Selection};
use crate::errors::Result;
use crate::factory::Factory;

const HINT: &str =
    "\nTo further debug and diagnose cluster problems, use 'kubectl cluster-info dump'.";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Ignored, as kubectl ignores them.
    pub args: Vec<String>,
}

pub async fn run(f: &Factory, _a: Args) -> Result<()> {
    let listed = list(f).await;
    if let Ok((host, services)) = &listed {
        print!("{}", render(host, services));
    }
    println!("{HINT}");
    listed.map(|_| ())
}

async fn list(f: &Factory) -> Result<(String, Vec<Value>)> {
    let host = f.config().await?.kube.cluster_url.to_string().trim_end_matches('/').to_string();
    // Only the flag counts: the context's namespace does not.
    let namespace = f.flags.namespace.clone().filter(|n| !n.is_empty());
    let resource = f.resource("services").await?;
    let c =
        Collection { resource, namespace: Some(namespace.unwrap_or_else(|| "kube-system".into())) };
    let sel = Selection {
        selector: Some("kubernetes.io/cluster-service=true".into()),
        ..Selection::default()
    };
    let url = c.resource.url(c.namespace.as_deref(), None) + &builder::query(&sel);
    let list = f.get_json(&url).await?;
    Ok((host, list["items"].as_array().cloned().unwrap_or_default()))
}

/// The lines before the hint, for the server at `host` and the cluster services listed.
pub fn render(host: &str, services: &[Value]) -> String {
    let mut out = format!("Kubernetes control plane is running at {host}\n");
    for s in services {
        let meta = &s["metadata"];
        let own = meta["name"].as_str().unwrap_or_default();
        let ports = s["spec"]["ports"].as_array().cloned().unwrap_or_default();
        let link = match s["status"]["loadBalancer"]["ingress"].get(0) {
            Some(ingress) => {
                let ip = ingress["ip"].as_str().filter(|i| !i.is_empty());
                let ip = ip.or(ingress["hostname"].as_str()).unwrap_or_default();
                ports.iter().map(|p| format!("http://{ip}:{} ", p["port"])).collect::<String>()
            }
            None => {
                let name = match ports.first() {
                    Some(p) => {
                        let port_name = p["name"].as_str().unwrap_or_default();
                        let https = port_name == "https" || p["port"].as_i64() == Some(443);
                        join_scheme_name_port(if https { "https" } else { "" }, own, port_name)
                    }
                    None => own.to_string(),
                };
                let ns = meta["namespace"].as_str().unwrap_or_default();
                format!("{host}/api/v1/namespaces/{ns}/services/{name}/proxy")
            }
        };
        let label = meta["labels"]["kubernetes.io/name"].as_str().filter(|n| !n.is_empty());
        out.push_str(&format!("{} is running at {link}\n", label.unwrap_or(own)));
    }
    out
}

/// apimachinery's `JoinSchemeNamePort`.
fn join_scheme_name_port(scheme: &str, name: &str, port: &str) -> String {
    if !scheme.is_empty() {
        format!("{scheme}:{name}:{port}")
    } else if !port.is_empty() {
        format!("{name}:{port}")
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOST: &str = "https://127.0.0.1:6443";

    fn service(name: &str, labels: Value, ports: Value, status: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "kube-system", "labels": labels},
               "spec": {"ports": ports}, "status": status})
    }

    #[test]
    fn the_control_plane_comes_first_alone_without_services() {
        assert_eq!(
            render(HOST, &[]),
            "Kubernetes control plane is running at https://127.0.0.1:6443\n"
        );
    }

    #[test]
    fn services_are_linked_through_the_proxy_with_schemes_guessed_from_the_first_port() {
        let services = [
            service(
                "kube-dns",
                json!({"kubernetes.io/name": "CoreDNS"}),
                json!([{"name": "dns", "port": 53}]),
                json!({}),
            ),
            service("metrics", json!({}), json!([{"name": "https", "port": 443}]), json!({})),
            service("plain443", json!({}), json!([{"port": 443}]), json!({})),
            service("plain", json!({}), json!([{"port": 8080}]), json!({})),
            service("noport", json!({}), json!(null), json!({})),
        ];
        let text = render(HOST, &services);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "CoreDNS is running at https://127.0.0.1:6443/api/v1/namespaces/kube-system/services/kube-dns:dns/proxy",
                "metrics is running at https://127.0.0.1:6443/api/v1/namespaces/kube-system/services/https:metrics:https/proxy",
                "plain443 is running at https://127.0.0.1:6443/api/v1/namespaces/kube-system/services/https:plain443:/proxy",
                "plain is running at https://127.0.0.1:6443/api/v1/namespaces/kube-system/services/plain/proxy",
                "noport is running at https://127.0.0.1:6443/api/v1/namespaces/kube-system/services/noport/proxy",
            ]
        );
    }

    #[test]
    fn a_load_balancer_is_linked_by_its_first_ingress_for_every_port() {
        let lb = service(
            "web",
            json!({}),
            json!([{"port": 80}, {"port": 8443}]),
            json!({"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "192.0.2.9"}]}}),
        );
        assert!(
            render(HOST, &[lb])
                .ends_with("web is running at http://lb.example:80 http://lb.example:8443 \n")
        );
    }
}
