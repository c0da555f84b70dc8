//! How `drain` removes the pods it chose, as kubectl's `DeleteOrEvictPods`: through
//! `pods/eviction` when discovery lists it (`CheckEvictionSupport`), all pods at once, each
//! evicted (a `429` retried every 5 s), then waited for until it is gone or replaced; or with
//! `--disable-eviction` deleted one after the other, then waited for together. `--timeout`
//! bounds it all; `--dry-run=server` sends the requests with `dryRun` and waits for nothing
//! (kubectl v1.35 still waited for pods it had deleted with `dryRun`, which never go, until
//! `--timeout`; later kubectl does not, and neither does this).

use std::time::Duration;

use api::duration::GoDuration;
use http::Method;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::Failure;
use super::filters::deleted_long_ago;
use crate::cmd::dryrun::DryRun;
use crate::errors::CliError;
use crate::factory::Factory;

/// kubectl's `EvictErrorRetryDelay`.
const RETRY_DELAY: Duration = Duration::from_secs(5);
/// How often a pod is read while waiting for it to go.
const INTERVAL: Duration = Duration::from_secs(1);
/// The cause of a refusal in a namespace being deleted.
const NAMESPACE_TERMINATING: &str = "NamespaceTerminating";

/// What the flags say about removing pods.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Seconds; negative: the pod's own.
    pub grace_period: i64,
    /// Zero: no limit.
    pub timeout: Duration,
    pub skip_wait_for_delete_timeout: i64,
    pub disable_eviction: bool,
    pub dry_run: DryRun,
    /// `-v` at 2 or more prints when each eviction or deletion starts.
    pub verbose: bool,
}

impl Settings {
    fn deadline(&self) -> Option<Instant> {
        (!self.timeout.is_zero()).then(|| Instant::now() + self.timeout)
    }

    fn delete_options(&self) -> Value {
        let mut o = json!({});
        if self.grace_period >= 0 {
            o["gracePeriodSeconds"] = json!(self.grace_period);
        }
        if self.dry_run == DryRun::Server {
            o["dryRun"] = json!(["All"]);
        }
        o
    }
}

fn name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace(pod: &Value) -> &str {
    pod["metadata"]["namespace"].as_str().unwrap_or_default()
}

fn url(pod: &Value) -> String {
    format!("/api/v1/namespaces/{}/pods/{}", namespace(pod), name(pod))
}

/// kubectl's progress line for a pod, e.g. `pod/web-1 evicted`.
fn print(pod: &Value, operation: &str, dry: DryRun) {
    println!("pod/{} {}", name(pod), dry.operation(operation));
}

/// Evicts the pods if the server serves evictions and eviction is not disabled, else deletes
/// them; either way waits for them to go.
pub async fn delete_or_evict(f: &Factory, pods: &[Value], s: &Settings) -> Result<(), Failure> {
    if pods.is_empty() {
        return Ok(());
    }
    if !s.disable_eviction
        && let Some(api_version) = eviction_support(f).await.map_err(Failure::Error)?
    {
        return evict_all(f, pods, &api_version, s).await;
    }
    delete_all(f, pods, s).await
}

/// kubectl's `CheckEvictionSupport`: the group version `pods/eviction` has in `/api/v1`.
async fn eviction_support(f: &Factory) -> Result<Option<String>, CliError> {
    let list = f.get_json("/api/v1").await?;
    let found = list["resources"].as_array().into_iter().flatten().find(|r| {
        let set = |k: &str| r[k].as_str().is_some_and(|v| !v.is_empty());
        r["name"] == "pods/eviction" && r["kind"] == "Eviction" && set("group") && set("version")
    });
    Ok(found.map(|r| {
        format!(
            "{}/{}",
            r["group"].as_str().unwrap_or_default(),
            r["version"].as_str().unwrap_or_default()
        )
    }))
}

async fn evict_all(
    f: &Factory,
    pods: &[Value],
    api_version: &str,
    s: &Settings,
) -> Result<(), Failure> {
    let deadline = s.deadline();
    let results = futures::future::join_all(
        pods.iter().map(|pod| evict_one(f, pod.clone(), api_version, s, deadline)),
    )
    .await;
    let errors: Vec<Failure> = results.into_iter().filter_map(Result::err).collect();
    if errors.is_empty() { Ok(()) } else { Err(Failure::Aggregate(errors)) }
}

fn has_cause(e: &CliError, cause: &str) -> bool {
    let causes = e.status().and_then(|s| s.details.as_ref()).map(|d| d.causes.as_slice());
    causes.unwrap_or_default().iter().any(|c| c.reason == cause)
}

/// One pod's eviction, as kubectl's goroutine for it: evict (retrying what kubectl retries),
/// then wait for the pod to go.
async fn evict_one(
    f: &Factory,
    pod: Value,
    api_version: &str,
    s: &Settings,
    deadline: Option<Instant>,
) -> Result<(), Failure> {
    let (pod_name, ns) = (name(&pod).to_string(), namespace(&pod).to_string());
    let mut active = pod.clone();
    loop {
        match s.dry_run {
            DryRun::Server => println!("evicting pod {ns}/{} (server dry run)", name(&active)),
            _ => {
                if s.verbose {
                    print(&active, "eviction started", s.dry_run);
                }
                println!("evicting pod {ns}/{}", name(&active));
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(Failure::Plain(format!(
                "error when evicting pods/{:?} -n {ns:?}: global timeout reached: {}",
                name(&active),
                GoDuration(s.timeout)
            )));
        }
        let body = json!({
            "apiVersion": api_version, "kind": "Eviction",
            "metadata": {"name": name(&active), "namespace": ns},
            "deleteOptions": s.delete_options(),
        });
        let sent = f
            .send(
                Method::POST,
                &format!("{}/eviction", url(&active)),
                Some((body.to_string().into_bytes(), "application/json")),
                "application/json",
            )
            .await;
        let e = match sent {
            Ok(_) => break,
            Err(e) => e,
        };
        let code = e.status().map(|s| s.code);
        let deleting = active["metadata"]["deletionTimestamp"].is_string();
        let terminating = code == Some(403) && has_cause(&e, NAMESPACE_TERMINATING);
        match code {
            Some(404) => return Ok(()),
            Some(429) => {
                eprintln!(
                    "error when evicting pods/{:?} -n {ns:?} (will retry after {}): {}",
                    name(&active),
                    GoDuration(RETRY_DELAY),
                    e.go_message()
                );
                tokio::time::sleep(RETRY_DELAY).await;
            }
            // The eviction never succeeds there, but the pod is going: wait for it.
            _ if terminating && deleting => break,
            _ if terminating => {
                eprintln!(
                    "error when evicting pod {:?} from terminating namespace {ns:?} (will retry after {}): {}",
                    name(&active),
                    GoDuration(RETRY_DELAY),
                    e.go_message()
                );
                tokio::time::sleep(RETRY_DELAY).await;
            }
            _ => {
                return Err(Failure::Plain(format!(
                    "error when evicting pods/{:?} -n {ns:?}: {}",
                    name(&active),
                    e.go_message()
                )));
            }
        }
        if let Ok(fresh) = f.get_json(&url(&active)).await {
            active = fresh;
        }
    }
    if s.dry_run == DryRun::Server {
        return Ok(());
    }
    wait_for_delete(f, vec![active], deadline, true, s).await.map_err(|e| {
        Failure::Plain(format!(
            "error when waiting for pod {pod_name:?} in namespace {ns:?} to terminate: {e}"
        ))
    })
}

async fn delete_all(f: &Factory, pods: &[Value], s: &Settings) -> Result<(), Failure> {
    let body = s.delete_options().to_string().into_bytes();
    for pod in pods {
        let sent = f
            .send(
                Method::DELETE,
                &url(pod),
                Some((body.clone(), "application/json")),
                "application/json",
            )
            .await;
        match sent {
            Err(e) if !e.is_not_found() => return Err(Failure::Error(e)),
            _ => {}
        }
        if s.dry_run != DryRun::Server && s.verbose {
            print(pod, "deletion started", s.dry_run);
        }
    }
    if s.dry_run == DryRun::Server {
        return Ok(());
    }
    wait_for_delete(f, pods.to_vec(), s.deadline(), false, s).await.map_err(Failure::Plain)
}

/// What ended a wait early: the deadline, or a pod that could not be read.
type WaitError = String;

/// kubectl's `waitForDelete`: reads each pod every second until every one is gone (or
/// replaced by one with another UID), printing each as it goes; a pod deleted longer ago than
/// `--skip-wait-for-delete-timeout` is no longer waited for.
async fn wait_for_delete(
    f: &Factory,
    mut pods: Vec<Value>,
    deadline: Option<Instant>,
    using_eviction: bool,
    s: &Settings,
) -> Result<(), WaitError> {
    let (done, failed) = if using_eviction {
        ("evicted", "eviction failed")
    } else {
        ("deleted", "deletion failed")
    };
    let expired = || WaitError::from("context deadline exceeded");
    loop {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(expired());
        }
        let tick = Instant::now() + INTERVAL;
        let mut pending = Vec::new();
        for pod in pods {
            match f.get_json(&url(&pod)).await {
                Err(e) if e.is_not_found() => print(&pod, done, s.dry_run),
                Ok(p) if p["metadata"]["uid"] != pod["metadata"]["uid"] => {
                    print(&pod, done, s.dry_run)
                }
                Err(e) => {
                    print(&pod, failed, s.dry_run);
                    return Err(e.go_message());
                }
                Ok(p) => {
                    let skip = s.skip_wait_for_delete_timeout;
                    if deleted_long_ago(&p, skip, jiff::Timestamp::now()) {
                        println!(
                            "pod {:?} has DeletionTimestamp older than {skip} seconds, skipping",
                            name(&pod)
                        );
                        continue;
                    }
                    pending.push(pod);
                }
            }
        }
        pods = pending;
        if pods.is_empty() {
            return Ok(());
        }
        match deadline {
            Some(d) if d <= tick => {
                tokio::time::sleep_until(d).await;
                return Err(expired());
            }
            _ => tokio::time::sleep_until(tick).await,
        }
    }
}
