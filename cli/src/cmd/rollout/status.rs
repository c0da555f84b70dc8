//! `rollout status`: each object followed (list, then watch) until its controller reports the
//! rollout done, printing kubectl's status line at every change; `--watch=false` prints one
//! line; `--timeout` bounds the wait. The status viewers are pure: object in, line out.

use std::time::Duration;

use serde_json::Value;

use super::{Objects, Workload, group_kind};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::watch::{self, Observation, Step};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub objects: Objects,
    /// Watch the status of the rollout until it's done.
    #[arg(short = 'w', long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub watch: bool,
    /// Pin to a specific revision for showing its status (0: the latest).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub revision: i64,
    /// How long to wait before ending the watch (0: never).
    #[arg(long, value_parser = crate::config::parse_timeout)]
    pub timeout: Option<Duration>,
}

/// A status viewer's answer: the line to print, and whether the rollout is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub line: String,
    pub done: bool,
}

fn waiting(line: String) -> std::result::Result<Status, String> {
    Ok(Status { line, done: false })
}

fn done(line: String) -> std::result::Result<Status, String> {
    Ok(Status { line, done: true })
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let (infos, errors) = super::infos(f, &a.objects).await?;
    if a.revision < 0 {
        return Err(CliError::Usage(format!(
            "revision must be a positive integer: {}",
            a.revision
        )));
    }
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    if infos.is_empty() {
        eprintln!("No resources found in {} namespace.", f.namespace().await?);
        return Ok(());
    }
    let timeout = a.timeout.filter(|t| !t.is_zero());
    for info in infos {
        let Some(workload) = Workload::of(&info) else {
            return Err(CliError::Usage(format!(
                "no status viewer has been implemented for {}",
                group_kind(&info)
            )));
        };
        let follow = watch::until(f, &info, |o| {
            let object = match o {
                Observation::Listed(Some(v)) | Observation::Changed(v) => v,
                Observation::Listed(None) => {
                    return Err(CliError::not_found(&info.resource.group_resource(), &info.name));
                }
                Observation::Deleted(_) => {
                    return Err(CliError::Usage("object has been deleted".into()));
                }
            };
            let s = status(workload, &object, a.revision).map_err(CliError::Usage)?;
            print!("{}", s.line);
            Ok(if s.done || !a.watch { Step::Done(()) } else { Step::Continue })
        });
        watch::bounded(timeout, follow).await??;
    }
    Ok(())
}

/// kubectl's status viewer for a workload: the line it prints and whether it is done, or the
/// error that ends the wait.
pub fn status(w: Workload, o: &Value, revision: i64) -> std::result::Result<Status, String> {
    match w {
        Workload::Deployment => deployment(o, revision),
        Workload::DaemonSet => daemon_set(o),
        Workload::StatefulSet => stateful_set(o),
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or_default()
}

/// Whether the controller has seen the latest spec.
fn observed(o: &Value) -> bool {
    int(&o["metadata"]["generation"]) <= int(&o["status"]["observedGeneration"])
}

fn deployment(o: &Value, revision: i64) -> std::result::Result<Status, String> {
    let name = name(o);
    if revision > 0 {
        let current = super::annotation(o, super::history::REVISION)
            .unwrap_or("0")
            .parse::<i64>()
            .map_err(|e| format!("cannot get the revision of deployment {name:?}: {e}"))?;
        if current != revision {
            return Err(format!(
                "desired revision ({revision}) is different from the running revision ({current})"
            ));
        }
    }
    if !observed(o) {
        return waiting("Waiting for deployment spec update to be observed...\n".into());
    }
    let st = &o["status"];
    let progress_deadline_exceeded = st["conditions"].as_array().is_some_and(|cs| {
        cs.iter().any(|c| c["type"] == "Progressing" && c["reason"] == "ProgressDeadlineExceeded")
    });
    if progress_deadline_exceeded {
        return Err(format!("deployment {name:?} exceeded its progress deadline"));
    }
    let (updated, replicas, available) =
        (int(&st["updatedReplicas"]), int(&st["replicas"]), int(&st["availableReplicas"]));
    if let Some(want) = o["spec"]["replicas"].as_i64()
        && updated < want
    {
        return waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {updated} out of {want} new replicas have been updated...\n"
        ));
    }
    if replicas > updated {
        return waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {} old replicas are pending termination...\n",
            replicas - updated
        ));
    }
    if available < updated {
        return waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {available} of {updated} updated replicas are available...\n"
        ));
    }
    done(format!("deployment {name:?} successfully rolled out\n"))
}

fn daemon_set(o: &Value) -> std::result::Result<Status, String> {
    let name = name(o);
    if o["spec"]["updateStrategy"]["type"] != "RollingUpdate" {
        return Err("rollout status is only available for RollingUpdate strategy type".into());
    }
    if !observed(o) {
        return waiting("Waiting for daemon set spec update to be observed...\n".into());
    }
    let st = &o["status"];
    let (updated, desired, available) = (
        int(&st["updatedNumberScheduled"]),
        int(&st["desiredNumberScheduled"]),
        int(&st["numberAvailable"]),
    );
    if updated < desired {
        return waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {updated} out of {desired} new pods have been updated...\n"
        ));
    }
    if available < desired {
        return waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {available} of {desired} updated pods are available...\n"
        ));
    }
    done(format!("daemon set {name:?} successfully rolled out\n"))
}

fn stateful_set(o: &Value) -> std::result::Result<Status, String> {
    let strategy = &o["spec"]["updateStrategy"];
    if strategy["type"] != "RollingUpdate" {
        return Err("rollout status is only available for RollingUpdate strategy type".into());
    }
    let st = &o["status"];
    let observed_generation = int(&st["observedGeneration"]);
    if observed_generation == 0 || int(&o["metadata"]["generation"]) > observed_generation {
        return waiting("Waiting for statefulset spec update to be observed...\n".into());
    }
    let replicas = o["spec"]["replicas"].as_i64();
    let (ready, updated) = (int(&st["readyReplicas"]), int(&st["updatedReplicas"]));
    if let Some(want) = replicas
        && ready < want
    {
        return waiting(format!("Waiting for {} pods to be ready...\n", want - ready));
    }
    if strategy["rollingUpdate"].is_object() {
        if let (Some(want), Some(partition)) =
            (replicas, strategy["rollingUpdate"]["partition"].as_i64())
            && updated < want - partition
        {
            return waiting(format!(
                "Waiting for partitioned roll out to finish: {updated} out of {} new pods have been updated...\n",
                want - partition
            ));
        }
        return done(format!(
            "partitioned roll out complete: {updated} new pods have been updated...\n"
        ));
    }
    let (update_revision, current_revision) = (
        st["updateRevision"].as_str().unwrap_or_default(),
        st["currentRevision"].as_str().unwrap_or_default(),
    );
    if update_revision != current_revision {
        return waiting(format!(
            "waiting for statefulset rolling update to complete {updated} pods at revision {update_revision}...\n"
        ));
    }
    done(format!(
        "statefulset rolling update complete {} pods at revision {current_revision}...\n",
        int(&st["currentReplicas"])
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(generation: i64, status: Value) -> Value {
        json!({"metadata": {"name": "web", "generation": generation,
                            "annotations": {"deployment.kubernetes.io/revision": "2"}},
               "spec": {"replicas": 3}, "status": status})
    }

    #[test]
    fn a_deployment_rollout_is_followed_through_kubectls_four_stages() {
        let line = |g, s| status(Workload::Deployment, &deploy(g, s), 0).unwrap();
        assert_eq!(
            line(2, json!({"observedGeneration": 1})).line,
            "Waiting for deployment spec update to be observed...\n"
        );
        let s = line(2, json!({"observedGeneration": 2, "updatedReplicas": 1, "replicas": 3}));
        assert_eq!(
            s.line,
            "Waiting for deployment \"web\" rollout to finish: 1 out of 3 new replicas have been updated...\n"
        );
        assert!(!s.done);
        let s = line(2, json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 4}));
        assert_eq!(
            s.line,
            "Waiting for deployment \"web\" rollout to finish: 1 old replicas are pending termination...\n"
        );
        let s = line(
            2,
            json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 2}),
        );
        assert_eq!(
            s.line,
            "Waiting for deployment \"web\" rollout to finish: 2 of 3 updated replicas are available...\n"
        );
        let s = line(
            2,
            json!({"observedGeneration": 2, "updatedReplicas": 3, "replicas": 3, "availableReplicas": 3}),
        );
        assert_eq!(
            s,
            Status { line: "deployment \"web\" successfully rolled out\n".into(), done: true }
        );
    }

    #[test]
    fn a_deployment_past_its_deadline_or_at_another_revision_is_an_error() {
        let stuck = deploy(
            1,
            json!({"observedGeneration": 1, "conditions": [
                {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded"}]}),
        );
        assert_eq!(
            status(Workload::Deployment, &stuck, 0).unwrap_err(),
            "deployment \"web\" exceeded its progress deadline"
        );
        assert_eq!(
            status(Workload::Deployment, &stuck, 1).unwrap_err(),
            "desired revision (1) is different from the running revision (2)"
        );
    }

    #[test]
    fn daemon_sets_and_stateful_sets_report_as_kubectl_does() {
        let ds = json!({"metadata": {"name": "agent", "generation": 1},
            "spec": {"updateStrategy": {"type": "RollingUpdate"}},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 2,
                       "updatedNumberScheduled": 2, "numberAvailable": 1}});
        assert_eq!(
            status(Workload::DaemonSet, &ds, 0).unwrap().line,
            "Waiting for daemon set \"agent\" rollout to finish: 1 of 2 updated pods are available...\n"
        );
        let on_delete = json!({"spec": {"updateStrategy": {"type": "OnDelete"}}});
        assert_eq!(
            status(Workload::DaemonSet, &on_delete, 0).unwrap_err(),
            "rollout status is only available for RollingUpdate strategy type"
        );
        let sts = json!({"metadata": {"name": "db", "generation": 1},
            "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate"}},
            "status": {"observedGeneration": 1, "readyReplicas": 1}});
        assert_eq!(
            status(Workload::StatefulSet, &sts, 0).unwrap().line,
            "Waiting for 1 pods to be ready...\n"
        );
    }
}
