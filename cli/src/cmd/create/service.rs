//! `create service clusterip|nodeport|loadbalancer|externalname NAME`: ports from `--tcp
//! port[:target]`, selector and labels `app: NAME`, validated as kubectl validates them.

use super::tree::Obj;
use super::{Common, Kind, emit, enforced_namespace, metadata, one_name};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

pub const SERVICE: Kind =
    Kind { group: "", version: "v1", plural: "services", kind: "Service", namespaced: true };

#[derive(Debug, clap::Subcommand)]
pub enum Service {
    /// Create a ClusterIP service.
    Clusterip(ClusterIpArgs),
    /// Create a NodePort service.
    Nodeport(NodePortArgs),
    /// Create a LoadBalancer service.
    Loadbalancer(PortsArgs),
    /// Create an ExternalName service.
    Externalname(ExternalNameArgs),
}

#[derive(Debug, clap::Args)]
pub struct PortsArgs {
    /// NAME
    pub name: Vec<String>,
    /// Port pairs can be specified as '<port>:<targetPort>'.
    #[arg(long, value_delimiter = ',')]
    pub tcp: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct ClusterIpArgs {
    #[command(flatten)]
    pub ports: PortsArgs,
    /// Assign your own ClusterIP or set to 'None' for a 'headless' service (no loadbalancing).
    #[arg(long)]
    pub clusterip: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct NodePortArgs {
    #[command(flatten)]
    pub ports: PortsArgs,
    /// Port used to expose the service on each node in a cluster.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub node_port: i32,
}

#[derive(Debug, clap::Args)]
pub struct ExternalNameArgs {
    #[command(flatten)]
    pub ports: PortsArgs,
    /// External name of service
    #[arg(long)]
    pub external_name: Option<String>,
}

/// What a service is built from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spec {
    pub service_type: &'static str,
    pub tcp: Vec<String>,
    pub cluster_ip: String,
    pub node_port: i32,
    pub external_name: String,
}

/// kubectl's `parsePorts`: `port[:target]`, the target a number or a port name.
pub fn parse_ports(spec: &str) -> std::result::Result<(i64, serde_json::Value), String> {
    let mut parts = spec.split(':');
    let first = parts.next().unwrap_or_default();
    let port = parse_uint16(first)?;
    let Some(target) = parts.next() else {
        return Ok((port, port.into()));
    };
    match target.parse::<i64>() {
        Ok(n) if (1..=65535).contains(&n) => Ok((port, n.into())),
        Ok(_) => Err("must be between 1 and 65535, inclusive".into()),
        Err(_) => match port_name_errors(target) {
            errs if errs.is_empty() => Ok((port, target.into())),
            errs => Err(errs.join(",")),
        },
    }
}

/// Go's `strconv.ParseUint(s, 10, 16)`, worded as Go words its failures.
fn parse_uint16(s: &str) -> std::result::Result<i64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("strconv.ParseUint: parsing {s:?}: invalid syntax"));
    }
    match s.parse::<u16>() {
        Ok(n) => Ok(n.into()),
        Err(_) => Err(format!("strconv.ParseUint: parsing {s:?}: value out of range")),
    }
}

/// `IsValidPortName`'s complaints, in its order.
fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push("must be no more than 15 characters");
    }
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen");
    }
    errs
}

fn dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// kubectl's `ServiceOptions.Validate`.
pub fn validate(s: &Spec) -> Result<()> {
    if s.cluster_ip == "None" && s.service_type != "ClusterIP" {
        return Err(CliError::Usage(
            "ClusterIP=None can only be used with ClusterIP service type".into(),
        ));
    }
    if s.cluster_ip != "None" && s.tcp.is_empty() && s.service_type != "ExternalName" {
        return Err(CliError::Usage("at least one tcp port specifier must be provided".into()));
    }
    if s.service_type == "ExternalName" && !dns1123_subdomain(&s.external_name) {
        return Err(CliError::Usage(format!("invalid service external name {}", s.external_name)));
    }
    Ok(())
}

pub fn service_object(name: &str, namespace: Option<&str>, s: &Spec) -> Result<Obj> {
    let mut ports = Vec::new();
    for tcp in &s.tcp {
        let (port, target) = parse_ports(tcp).map_err(CliError::Usage)?;
        let mut p = Obj::new()
            .with("name", tcp.replace(':', "-"))
            .with("protocol", "TCP")
            .with("port", port)
            .with(
                "targetPort",
                match target {
                    serde_json::Value::String(t) => super::tree::Node::Str(t),
                    t => super::tree::Node::Int(t.as_i64().unwrap_or(0)),
                },
            );
        if s.node_port != 0 {
            p.set("nodePort", s.node_port);
        }
        ports.push(p);
    }
    let labels = Obj::map([("app", name)]);
    let mut spec = Obj::new();
    if !ports.is_empty() {
        spec.set("ports", ports);
    }
    spec.set("selector", labels.clone());
    if !s.cluster_ip.is_empty() {
        spec.set("clusterIP", s.cluster_ip.as_str());
    }
    spec.set("type", s.service_type);
    if !s.external_name.is_empty() {
        spec.set("externalName", s.external_name.as_str());
    }
    Ok(SERVICE
        .head(metadata(name, namespace, Some(labels)))
        .with("spec", spec)
        .with("status", Obj::new().with("loadBalancer", Obj::new())))
}

pub async fn run(f: &Factory, s: Service) -> Result<()> {
    let (ports, spec, command) = match s {
        Service::Clusterip(a) => {
            let spec = Spec {
                service_type: "ClusterIP",
                tcp: a.ports.tcp.clone(),
                cluster_ip: a.clusterip.unwrap_or_default(),
                ..Spec::default()
            };
            (a.ports, spec, "clusterip")
        }
        Service::Nodeport(a) => {
            let spec = Spec {
                service_type: "NodePort",
                tcp: a.ports.tcp.clone(),
                node_port: a.node_port,
                ..Spec::default()
            };
            (a.ports, spec, "nodeport")
        }
        Service::Loadbalancer(a) => {
            let spec = Spec { service_type: "LoadBalancer", tcp: a.tcp.clone(), ..Spec::default() };
            (a, spec, "loadbalancer")
        }
        Service::Externalname(a) => {
            let Some(external_name) = a.external_name else {
                return Err(super::required_flags(&["external-name"]));
            };
            let spec = Spec {
                service_type: "ExternalName",
                tcp: a.ports.tcp.clone(),
                external_name,
                ..Spec::default()
            };
            (a.ports, spec, "externalname")
        }
    };
    let name = one_name(&ports.name, &format!("service {command}"))?;
    validate(&spec)?;
    let ns = enforced_namespace(f).await?;
    let object = service_object(&name, ns.as_deref(), &spec)?;
    let wrap = format!("failed to create {} service: ", spec.service_type);
    emit(f, &ports.common, SERVICE, &name, object, Some(&wrap)).await
}

#[cfg(test)]
mod tests {
    use super::super::tree::Node;
    use super::*;

    fn spec(t: &'static str, tcp: &[&str]) -> Spec {
        Spec {
            service_type: t,
            tcp: tcp.iter().map(|s| s.to_string()).collect(),
            ..Spec::default()
        }
    }

    #[test]
    fn a_cluster_ip_service_names_ports_after_their_flag() {
        let o =
            service_object("s", None, &spec("ClusterIP", &["80:8080", "443", "81:http"])).unwrap();
        assert_eq!(
            Node::Obj(o).compact(),
            r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"s","labels":{"app":"s"}},"spec":{"ports":[{"name":"80-8080","protocol":"TCP","port":80,"targetPort":8080},{"name":"443","protocol":"TCP","port":443,"targetPort":443},{"name":"81-http","protocol":"TCP","port":81,"targetPort":"http"}],"selector":{"app":"s"},"type":"ClusterIP"},"status":{"loadBalancer":{}}}"#
        );
    }

    #[test]
    fn node_ports_and_external_names_land_where_kubectl_puts_them() {
        let mut s = spec("NodePort", &["80"]);
        s.node_port = 30000;
        let v = Node::Obj(service_object("s", None, &s).unwrap()).to_value();
        assert_eq!(v["spec"]["ports"][0]["nodePort"], 30000);
        let mut e = spec("ExternalName", &[]);
        e.external_name = "a.com".into();
        assert_eq!(
            Node::Obj(service_object("s", None, &e).unwrap()).compact(),
            r#"{"kind":"Service","apiVersion":"v1","metadata":{"name":"s","labels":{"app":"s"}},"spec":{"selector":{"app":"s"},"type":"ExternalName","externalName":"a.com"},"status":{"loadBalancer":{}}}"#
        );
    }

    #[test]
    fn bad_tcp_specs_are_refused_with_gos_words() {
        assert_eq!(
            parse_ports("abc").unwrap_err(),
            "strconv.ParseUint: parsing \"abc\": invalid syntax"
        );
        assert_eq!(
            parse_ports("70000").unwrap_err(),
            "strconv.ParseUint: parsing \"70000\": value out of range"
        );
        assert_eq!(parse_ports("80:0").unwrap_err(), "must be between 1 and 65535, inclusive");
        assert_eq!(parse_ports("80:-x").unwrap_err(), "must not begin or end with a hyphen");
        assert_eq!(
            parse_ports("80:").unwrap_err(),
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-),must contain at least one letter (a-z)"
        );
    }

    #[test]
    fn validation_is_kubectls() {
        assert_eq!(
            validate(&spec("LoadBalancer", &[])).unwrap_err().to_string(),
            "error: at least one tcp port specifier must be provided"
        );
        let mut none = spec("NodePort", &["80"]);
        none.cluster_ip = "None".into();
        assert_eq!(
            validate(&none).unwrap_err().to_string(),
            "error: ClusterIP=None can only be used with ClusterIP service type"
        );
        let mut headless = spec("ClusterIP", &[]);
        headless.cluster_ip = "None".into();
        assert!(validate(&headless).is_ok());
        let mut bad = spec("ExternalName", &[]);
        bad.external_name = "Not_DNS".into();
        assert_eq!(
            validate(&bad).unwrap_err().to_string(),
            "error: invalid service external name Not_DNS"
        );
    }
}
