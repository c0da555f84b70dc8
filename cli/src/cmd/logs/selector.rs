//! `logs -l SELECTOR` as kubectl's: the pods the selector picks in the namespace, a log request
//! per pod for its default container (the annotation's, else the first, with kubectl's notices),
//! `-c`'s, or with `--all-containers` every init, app and ephemeral container's; 10 lines from
//! the end unless `--tail` says otherwise. Every request is made up before any is read, so a
//! bad container name fails before any output. One after the other; with `-f` and several
//! requests all at once (at most `--max-log-requests`), whole lines interleaved.
//!
//! kubectl keeps the requests in a Go map and so reads them in no fixed order; here they come
//! in the order of the pods listed, then of their containers.

use std::io::Write;

use futures::StreamExt;
use serde_json::Value;

use super::{Args, DEFAULT_CONTAINER, names, query, stream};
use crate::builder::encode;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// kubectl's tail for a selector when `--tail` is not given.
const SELECTOR_TAIL: i64 = 10;

/// One log to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub pod: String,
    pub container: String,
}

pub async fn run(f: &Factory, a: &Args, selector: &str) -> Result<()> {
    if f.flags.kubelet.is_some() {
        return Err(CliError::Usage(format!(
            "{}; logs -l needs an API server",
            crate::kubelet::SERVED
        )));
    }
    match a.args.len() {
        0 => {}
        1 => {
            return Err(CliError::Usage(
                "only a selector (-l) or a POD name is allowed\nSee 'kubectl-lite logs -h' for help and examples".into(),
            ));
        }
        2 => {
            return Err(CliError::Usage(
                "selectors and the all flag cannot be used when passing resource/name arguments"
                    .into(),
            ));
        }
        _ => {
            return Err(CliError::Usage(
                "expected 'logs [-f] [-p] (POD | TYPE/NAME) [-c CONTAINER]'.\nPOD or TYPE/NAME is a required argument for the logs command\nSee 'kubectl-lite logs -h' for help and examples".into(),
            ));
        }
    }
    if a.all_containers
        && let Some(c) = &a.container
    {
        return Err(CliError::Usage(format!(
            "--all-containers=true should not be specified with container name {c}"
        )));
    }
    // Flags are read before anything is asked.
    let tail = a.tail.unwrap_or(SELECTOR_TAIL);
    let q = query(a, tail)?;
    let namespace = f.namespace().await?;
    let url = format!("/api/v1/namespaces/{namespace}/pods?labelSelector={}", encode(selector));
    let list = f.get_json(&url).await?;
    let pods = list["items"].as_array().cloned().unwrap_or_default();
    if pods.is_empty() {
        eprintln!("No resources found in {namespace} namespace.");
    }
    let mut requests = Vec::new();
    for pod in &pods {
        let (found, notices) =
            requests_for(pod, a.container.as_deref(), a.all_containers).map_err(CliError::Usage)?;
        for n in notices {
            eprintln!("{n}");
        }
        requests.extend(found);
    }
    if a.follow && requests.len() > 1 && requests.len() > a.max_log_requests {
        return Err(CliError::Usage(format!(
            "you are attempting to follow {} log streams, but maximum allowed concurrency is {}, use --max-log-requests to increase the limit",
            requests.len(),
            a.max_log_requests
        )));
    }
    let url_of = |r: &Request| {
        let mut q = q.clone();
        q.insert(0, format!("container={}", encode(&r.container)));
        format!("/api/v1/namespaces/{namespace}/pods/{}/log?{}", r.pod, q.join("&"))
    };
    let prefix_of = |r: &Request| a.prefix.then(|| format!("[pod/{}/{}] ", r.pod, r.container));
    if a.follow && requests.len() > 1 {
        let all = requests.iter().map(|r| follow_lines(f, url_of(r), prefix_of(r)));
        futures::future::try_join_all(all).await?;
        return Ok(());
    }
    for r in &requests {
        stream(f, &url_of(r), prefix_of(r).as_deref()).await?;
    }
    Ok(())
}

/// A pod's log requests, and the notices kubectl prints while making them up; or the error for
/// a container the pod does not have.
pub fn requests_for(
    pod: &Value,
    container: Option<&str>,
    all_containers: bool,
) -> std::result::Result<(Vec<Request>, Vec<String>), String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let every: Vec<String> = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|field| names(pod, field))
        .collect();
    // As kubectl v1.35's `AllContainerNames`: app, ephemeral, then init containers.
    let listed: Vec<String> = names(pod, "containers")
        .into_iter()
        .chain(names(pod, "ephemeralContainers").into_iter().map(|c| format!("{c} (ephem)")))
        .chain(names(pod, "initContainers").into_iter().map(|c| format!("{c} (init)")))
        .collect();
    let request = |c: &str| Request { pod: name.clone(), container: c.to_string() };
    if all_containers {
        return Ok((every.iter().map(|c| request(c)).collect(), Vec::new()));
    }
    let mut notices = Vec::new();
    let mut chosen = container.map(str::to_string);
    if chosen.is_none()
        && let Some(d) = pod["metadata"]["annotations"][DEFAULT_CONTAINER].as_str()
        && !d.is_empty()
    {
        if every.iter().any(|c| c == d) {
            chosen = Some(d.to_string());
        } else {
            notices.push(format!("Default container name {d:?} not found in pod {name}"));
        }
    }
    let chosen = match chosen {
        Some(c) => c,
        None => {
            let app = names(pod, "containers");
            let first = app.first().cloned().unwrap_or_default();
            if every.len() > 1 {
                notices
                    .push(format!("Defaulted container {first:?} out of: {}", listed.join(", ")));
            }
            first
        }
    };
    if !every.contains(&chosen) {
        return Err(format!("container {chosen} is not valid for pod {name}"));
    }
    Ok((vec![request(&chosen)], notices))
}

/// Follows one log beside others: whole lines only reach stdout, each with `prefix`.
async fn follow_lines(f: &Factory, url: String, prefix: Option<String>) -> Result<()> {
    let mut body = f.stream(&url).await?;
    let mut line: Vec<u8> = Vec::new();
    let write = |line: &[u8]| {
        let mut out = std::io::stdout().lock();
        let p = prefix.as_deref().unwrap_or_default().as_bytes();
        out.write_all(p).and_then(|()| out.write_all(line)).and_then(|()| out.flush())
    };
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| CliError::Unreachable { reason: e.to_string() })?;
        for &b in chunk.iter() {
            line.push(b);
            if b == b'\n' {
                // A closed stdout ends the command quietly, as kubectl's.
                if write(&line).is_err() {
                    return Ok(());
                }
                line.clear();
            }
        }
    }
    if !line.is_empty() {
        let _ = write(&line);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(annotation: Option<&str>) -> Value {
        let mut p = json!({
            "metadata": {"name": "p1"},
            "spec": {
                "initContainers": [{"name": "init"}],
                "containers": [{"name": "main"}, {"name": "side"}],
            },
        });
        if let Some(a) = annotation {
            p["metadata"]["annotations"] = json!({DEFAULT_CONTAINER: a});
        }
        p
    }

    fn containers(rs: &[Request]) -> Vec<&str> {
        rs.iter().map(|r| r.container.as_str()).collect()
    }

    #[test]
    fn the_first_app_container_is_read_with_kubectls_notice() {
        let (rs, notices) = requests_for(&pod(None), None, false).unwrap();
        assert_eq!(containers(&rs), ["main"]);
        assert_eq!(notices, ["Defaulted container \"main\" out of: main, side, init (init)"]);
    }

    #[test]
    fn the_annotated_default_wins_and_a_missing_one_is_named() {
        let (rs, notices) = requests_for(&pod(Some("side")), None, false).unwrap();
        assert_eq!((containers(&rs), notices.len()), (vec!["side"], 0));
        let (rs, notices) = requests_for(&pod(Some("gone")), None, false).unwrap();
        assert_eq!(containers(&rs), ["main"]);
        assert_eq!(notices[0], "Default container name \"gone\" not found in pod p1");
    }

    #[test]
    fn all_containers_reads_init_containers_first_without_notices() {
        let (rs, notices) = requests_for(&pod(None), None, true).unwrap();
        assert_eq!(containers(&rs), ["init", "main", "side"]);
        assert!(notices.is_empty());
    }

    #[test]
    fn a_container_the_pod_lacks_is_refused() {
        let e = requests_for(&pod(None), Some("nope"), false).unwrap_err();
        assert_eq!(e, "container nope is not valid for pod p1");
        let (rs, _) = requests_for(&pod(None), Some("init"), false).unwrap();
        assert_eq!(containers(&rs), ["init"]);
    }
}
