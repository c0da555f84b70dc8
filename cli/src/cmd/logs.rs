//! `logs`: a container's log through the apiserver's `pods/log` (which asks the kubelet), with
//! kubectl's options; `-f` streams; a pod of several containers without `-c` reads its default
//! container (the `kubectl.kubernetes.io/default-container` annotation, else the first) and
//! says so on stderr, as kubectl does. `-l` reads the logs of every pod selected (`selector`).

mod selector;

use std::io::Write;

use futures::StreamExt;
use serde_json::Value;

use crate::builder::encode;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// The annotation naming a pod's default container.
const DEFAULT_CONTAINER: &str = "kubectl.kubernetes.io/default-container";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// POD or pod/NAME, then an optional container name.
    pub args: Vec<String>,
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// Every container of the pod, one after the other.
    #[arg(long)]
    pub all_containers: bool,
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The previous instance of the container.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Lines from the end (-1: all); unset, all for a pod and 10 for a selector.
    #[arg(long, allow_negative_numbers = true)]
    pub tail: Option<i64>,
    /// Only lines newer than this duration (5s, 2m, 3h).
    #[arg(long)]
    pub since: Option<String>,
    /// Only lines after this RFC 3339 time.
    #[arg(long)]
    pub since_time: Option<String>,
    #[arg(long)]
    pub timestamps: bool,
    /// At most this many bytes.
    #[arg(long)]
    pub limit_bytes: Option<u64>,
    /// Prefix each line with its source (`[pod/NAME/CONTAINER]`).
    #[arg(long)]
    pub prefix: bool,
    /// Selector (label query) to filter pods on; their logs are read (tail 10 by default).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Maximum number of concurrent logs to follow when using by a selector.
    #[arg(long, default_value_t = 5)]
    pub max_log_requests: usize,
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    if let Some(sel) = a.selector.clone() {
        return selector::run(f, &a, &sel).await;
    }
    let (pod_arg, container_arg) = match a.args.as_slice() {
        [p] => (p.clone(), None),
        [p, c] => (p.clone(), Some(c.clone())),
        [] => {
            return Err(CliError::Usage(
                "expected POD, TYPE/NAME, or --selector=[SELECTOR] argument.\nSee 'kubectl-lite logs -h' for help and examples".into(),
            ));
        }
        _ => return Err(CliError::Usage("expected at most two arguments: POD [CONTAINER]".into())),
    };
    let name = match pod_arg.split_once('/') {
        Some(("pod" | "pods" | "po", n)) => n.to_string(),
        Some((t, _)) => {
            return Err(CliError::Usage(format!(
                "cannot get the logs from {t}: only pods are read here"
            )));
        }
        None => pod_arg.clone(),
    };
    if a.container.is_some() && container_arg.is_some() {
        return Err(CliError::Usage(
            "only one of -c or an inline [CONTAINER] arg is allowed".into(),
        ));
    }
    let namespace = f.namespace().await?;
    let source = Source::of(f);
    let pod_url = format!("/api/v1/namespaces/{namespace}/pods/{name}");
    let containers: Vec<String> = if a.all_containers {
        let pod = source.pod(f, &pod_url, &name, &namespace).await?;
        names(&pod, "initContainers").into_iter().chain(names(&pod, "containers")).collect()
    } else if let Some(c) = a.container.clone().or(container_arg) {
        // kubectl checks the name against the pod before asking for its log.
        let pod = source.pod(f, &pod_url, &name, &namespace).await?;
        let known = ["containers", "initContainers", "ephemeralContainers"]
            .iter()
            .any(|field| names(&pod, field).contains(&c));
        if !known {
            return Err(CliError::Usage(format!("container {c} is not valid for pod {name}")));
        }
        vec![c]
    } else {
        let pod = source.pod(f, &pod_url, &name, &namespace).await?;
        let all = names(&pod, "containers");
        let default = pod["metadata"]["annotations"][DEFAULT_CONTAINER]
            .as_str()
            .map(str::to_string)
            .filter(|d| all.contains(d))
            .or_else(|| all.first().cloned())
            .unwrap_or_default();
        if all.len() > 1 {
            eprintln!("Defaulted container \"{default}\" out of: {}", all.join(", "));
        }
        vec![default]
    };
    let q = query(&a, a.tail.unwrap_or(-1))?;
    for c in containers {
        let url = source.log_url(&pod_url, &namespace, &name, &c, &q);
        let prefix = a.prefix.then(|| format!("[pod/{name}/{c}] "));
        stream(f, &url, prefix.as_deref()).await?;
    }
    Ok(())
}

/// The log query kubectl's options make (the container aside), `tail` lines from the end.
fn query(a: &Args, tail: i64) -> Result<Vec<String>> {
    let mut q = Vec::new();
    if a.follow {
        q.push("follow=true".into());
    }
    if a.previous {
        q.push("previous=true".into());
    }
    if tail >= 0 {
        q.push(format!("tailLines={tail}"));
    }
    if let Some(s) = &a.since {
        let d = crate::duration::parse(s).ok_or_else(|| {
            CliError::Usage(format!(
                "invalid argument \"{s}\" for \"--since\" flag: time: invalid duration \"{s}\""
            ))
        })?;
        q.push(format!("sinceSeconds={}", d.as_secs().max(1)));
    }
    if let Some(t) = &a.since_time {
        q.push(format!("sinceTime={}", encode(t)));
    }
    if a.timestamps {
        q.push("timestamps=true".into());
    }
    if let Some(n) = a.limit_bytes {
        q.push(format!("limitBytes={n}"));
    }
    Ok(q)
}

/// Where logs come from: the API server's `pods/log`, or in node mode the kubelet's own
/// `containerLogs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Api,
    Kubelet,
}

impl Source {
    fn of(f: &Factory) -> Source {
        if f.flags.kubelet.is_some() { Source::Kubelet } else { Source::Api }
    }

    /// The pod (at `url` on an API server), or kubectl's wording of its absence for `logs`.
    async fn pod(self, f: &Factory, url: &str, name: &str, namespace: &str) -> Result<Value> {
        let pod = match self {
            Source::Api => f.get_json(url).await,
            Source::Kubelet => crate::kubelet::pod(f, namespace, name).await,
        };
        match pod {
            Err(e) if e.is_not_found() => Err(CliError::Usage(format!(
                "error from server (NotFound): pods \"{name}\" not found in namespace \"{namespace}\""
            ))),
            other => other,
        }
    }

    /// The log's URL, with the query `q` (the container aside).
    fn log_url(self, pod_url: &str, namespace: &str, name: &str, c: &str, q: &[String]) -> String {
        match self {
            Source::Api => {
                let mut q = q.to_vec();
                q.insert(0, format!("container={}", encode(c)));
                format!("{pod_url}/log?{}", q.join("&"))
            }
            Source::Kubelet if q.is_empty() => format!("/containerLogs/{namespace}/{name}/{c}"),
            Source::Kubelet => format!("/containerLogs/{namespace}/{name}/{c}?{}", q.join("&")),
        }
    }
}

/// The container names of a pod's `containers` or `initContainers`.
fn names(pod: &Value, field: &str) -> Vec<String> {
    pod["spec"][field]
        .as_array()
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Copies the log to stdout as it arrives (with `prefix` before each line, if given).
pub async fn stream(f: &Factory, url: &str, prefix: Option<&str>) -> Result<()> {
    let mut body = f.stream(url).await?;
    let mut out = std::io::stdout().lock();
    let mut at_line_start = true;
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| CliError::Unreachable { reason: e.to_string() })?;
        let written = match prefix {
            None => out.write_all(&chunk),
            Some(p) => {
                let mut buf = Vec::with_capacity(chunk.len() + p.len());
                for &b in chunk.iter() {
                    if at_line_start {
                        buf.extend_from_slice(p.as_bytes());
                    }
                    buf.push(b);
                    at_line_start = b == b'\n';
                }
                out.write_all(&buf)
            }
        };
        // A closed stdout (`| head`) ends the command quietly, as kubectl's.
        if written.and_then(|()| out.flush()).is_err() {
            return Ok(());
        }
    }
    Ok(())
}
