//! `top node` and `top pod`, as kubectl's `pkg/cmd/top`: the Metrics API's group found in
//! `/apis` (else `error: Metrics API not available`), NodeMetrics or PodMetrics read (one by
//! name, or a list by label selector), nodes' allocatable (`--show-capacity`: capacity) read
//! for the percentages, and the rows printed by [`printer`]. No metrics is `error: metrics not
//! available yet`; for pods, as kubectl's `verifyEmptyMetrics`, only once the pods asked for
//! exist (none: `No resources found…` on stderr) and none is older than two minutes (one is:
//! `error: Metrics not available for pod <ns>/<name>, age: <age>`).

pub mod printer;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::errors::{CliError, Result};
use crate::factory::Factory;
use printer::{PodOptions, SortBy};

const GROUP: &str = "metrics.k8s.io";
const VERSION: &str = "v1beta1";

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Display resource (CPU/memory) usage of nodes.
    #[command(visible_aliases = ["nodes", "no"])]
    Node(NodeArgs),
    /// Display resource (CPU/memory) usage of pods.
    #[command(visible_aliases = ["pods", "po"])]
    Pod(PodArgs),
}

#[derive(Debug, clap::Args)]
pub struct NodeArgs {
    /// NAME
    pub name: Vec<String>,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Sort nodes by `cpu` or `memory`.
    #[arg(long)]
    pub sort_by: Option<String>,
    /// Print output without headers.
    #[arg(long)]
    pub no_headers: bool,
    /// Print node resources based on Capacity instead of Allocatable.
    #[arg(long)]
    pub show_capacity: bool,
}

#[derive(Debug, clap::Args)]
pub struct PodArgs {
    /// NAME
    pub name: Vec<String>,
    /// Selector (label query) to filter on.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Selector (field query) to filter on.
    #[arg(long)]
    pub field_selector: Option<String>,
    /// Sort pods by `cpu` or `memory`.
    #[arg(long)]
    pub sort_by: Option<String>,
    /// Print usage of containers within a pod.
    #[arg(long)]
    pub containers: bool,
    /// List across all namespaces.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// Print output without headers.
    #[arg(long)]
    pub no_headers: bool,
    /// Print the sum of the resource usage.
    #[arg(long)]
    pub sum: bool,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    match a.command {
        Command::Node(n) => node(f, n).await,
        Command::Pod(p) => pod(f, p).await,
    }
}

fn one_name(names: &[String], usage: &str) -> Result<Option<String>> {
    match names {
        [] => Ok(None),
        [one] => Ok(Some(one.clone())),
        _ => Err(CliError::Usage(format!(
            "Unexpected args: {names:?}\nSee 'kubectl-lite top {usage} -h' for help and examples"
        ))),
    }
}

fn plain(message: &str) -> CliError {
    CliError::Usage(message.to_string())
}

/// kubectl's `SupportedMetricsAPIVersionAvailable` over the server's groups.
async fn metrics_available(f: &Factory) -> Result<()> {
    let groups = f.get_json("/apis").await?;
    let served = groups["groups"].as_array().into_iter().flatten().any(|g| {
        g["name"] == GROUP
            && g["versions"].as_array().into_iter().flatten().any(|v| v["version"] == VERSION)
    });
    if served { Ok(()) } else { Err(plain("Metrics API not available")) }
}

fn query(pairs: &[(&str, Option<&str>)]) -> String {
    let q: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| v.filter(|v| !v.is_empty()).map(|v| format!("{k}={}", encode(v))))
        .collect();
    if q.is_empty() { String::new() } else { format!("?{}", q.join("&")) }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn items(list: &Value) -> Vec<Value> {
    list["items"].as_array().cloned().unwrap_or_default()
}

async fn node(f: &Factory, a: NodeArgs) -> Result<()> {
    let name = one_name(&a.name, "node")?;
    let by = SortBy::parse(a.sort_by.as_deref()).map_err(plain)?;
    if name.is_some() && a.selector.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(plain("only one of NAME or --selector can be provided"));
    }
    metrics_available(f).await?;
    let base = format!("/apis/{GROUP}/{VERSION}/nodes");
    let selector = query(&[("labelSelector", a.selector.as_deref())]);
    let metrics = match &name {
        Some(n) => vec![f.get_json(&format!("{base}/{n}")).await?],
        None => items(&f.get_json(&format!("{base}{selector}")).await?),
    };
    if metrics.is_empty() {
        return Err(plain("metrics not available yet"));
    }
    let nodes = match &name {
        Some(n) => vec![f.get_json(&format!("/api/v1/nodes/{n}")).await?],
        None => items(&f.get_json(&format!("/api/v1/nodes{selector}")).await?),
    };
    let field = if a.show_capacity { "capacity" } else { "allocatable" };
    let available: BTreeMap<String, Value> = nodes
        .iter()
        .map(|n| {
            let name = n["metadata"]["name"].as_str().unwrap_or_default().to_string();
            (name, n["status"][field].clone())
        })
        .collect();
    print!("{}", printer::nodes(&metrics, &available, a.no_headers, by));
    Ok(())
}

async fn pod(f: &Factory, a: PodArgs) -> Result<()> {
    let name = one_name(&a.name, "pod")?;
    let by = SortBy::parse(a.sort_by.as_deref()).map_err(plain)?;
    let selected = |s: &Option<String>| s.as_deref().is_some_and(|s| !s.is_empty());
    if name.is_some() && (selected(&a.selector) || selected(&a.field_selector)) {
        return Err(plain("only one of NAME or selector can be provided"));
    }
    let namespace = f.namespace().await?;
    metrics_available(f).await?;
    let scope = |resource: &str, ns: Option<&str>| match ns {
        Some(ns) => format!("namespaces/{ns}/{resource}"),
        None => resource.to_string(),
    };
    let list_ns = (!a.all_namespaces).then_some(namespace.as_str());
    let labels = query(&[("labelSelector", a.selector.as_deref())]);
    let mut metrics = match &name {
        Some(n) => {
            let path = scope("pods", Some(&namespace));
            vec![f.get_json(&format!("/apis/{GROUP}/{VERSION}/{path}/{n}")).await?]
        }
        None => {
            let path = scope("pods", list_ns);
            items(&f.get_json(&format!("/apis/{GROUP}/{VERSION}/{path}{labels}")).await?)
        }
    };
    if !metrics.is_empty() && selected(&a.field_selector) {
        // kubectl filters by the pods the field selector selects.
        let q = query(&[
            ("labelSelector", a.selector.as_deref()),
            ("fieldSelector", a.field_selector.as_deref()),
        ]);
        let pods = items(&f.get_json(&format!("/api/v1/{}{q}", scope("pods", list_ns))).await?);
        let key = |v: &Value| (v["metadata"]["namespace"].clone(), v["metadata"]["name"].clone());
        let chosen: Vec<_> = pods.iter().map(key).collect();
        metrics.retain(|m| chosen.contains(&key(m)));
    }
    if metrics.is_empty() {
        verify_empty(f, &a, name.as_deref(), &namespace).await?;
        if a.all_namespaces {
            eprintln!("No resources found");
        } else {
            eprintln!("No resources found in {namespace} namespace.");
        }
    }
    let o = PodOptions {
        containers: a.containers,
        with_namespace: a.all_namespaces,
        no_headers: a.no_headers,
        sum: a.sum,
    };
    print!("{}", printer::pods(&metrics, o, by));
    Ok(())
}

/// kubectl's `verifyEmptyMetrics`: why there are none. It reads the namespace given (not all,
/// even with `-A`), as kubectl does.
async fn verify_empty(f: &Factory, a: &PodArgs, name: Option<&str>, ns: &str) -> Result<()> {
    let pods = match name {
        Some(n) => vec![f.get_json(&format!("/api/v1/namespaces/{ns}/pods/{n}")).await?],
        None => {
            let q = query(&[
                ("labelSelector", a.selector.as_deref()),
                ("fieldSelector", a.field_selector.as_deref()),
            ]);
            let pods = items(&f.get_json(&format!("/api/v1/namespaces/{ns}/pods{q}")).await?);
            if pods.is_empty() {
                return Ok(());
            }
            pods
        }
    };
    let now = jiff::Timestamp::now();
    for p in &pods {
        let created = p["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .unwrap_or(now);
        let age = now.duration_since(created);
        if age > jiff::SignedDuration::from_secs(120) {
            let age = std::time::Duration::try_from(age).unwrap_or_default();
            return Err(plain(&format!(
                "Metrics not available for pod {}/{}, age: {}",
                p["metadata"]["namespace"].as_str().unwrap_or_default(),
                p["metadata"]["name"].as_str().unwrap_or_default(),
                go_duration(age)
            )));
        }
    }
    Err(plain("metrics not available yet"))
}

/// Go's `time.Duration.String()` (at or above a second: `[h]h[m]m` and seconds with their
/// fraction, trailing zeros dropped).
fn go_duration(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{:?}", d);
    }
    let nanos = d.subsec_nanos();
    let s = if nanos == 0 {
        format!("{}s", secs % 60)
    } else {
        format!("{}.{}s", secs % 60, format!("{nanos:09}").trim_end_matches('0'))
    };
    match (secs / 3600, secs / 60 % 60) {
        (0, 0) => s,
        (0, m) => format!("{m}m{s}"),
        (h, m) => format!("{h}h{m}m{s}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_print_as_go_durations() {
        use std::time::Duration;
        assert_eq!(go_duration(Duration::new(123, 456_000_000)), "2m3.456s");
        assert_eq!(go_duration(Duration::new(3_600, 0)), "1h0m0s");
        assert_eq!(go_duration(Duration::new(7_322, 1)), "2h2m2.000000001s");
    }

    #[test]
    fn selectors_are_sent_escaped_and_empty_ones_not_at_all() {
        assert_eq!(
            query(&[("labelSelector", Some("app=web,tier!=db"))]),
            "?labelSelector=app%3Dweb%2Ctier%21%3Ddb"
        );
        assert_eq!(query(&[("labelSelector", Some("")), ("fieldSelector", None)]), "");
    }
}
