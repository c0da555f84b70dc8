//! `rollout undo`: a workload's pod template set back to an earlier revision's, as kubectl's
//! rollbackers do — a Deployment by a JSON patch of its template and annotations, a DaemonSet
//! or StatefulSet by its ControllerRevision's own strategic merge patch.

use http::Method;
use serde_json::{Map, Value, json};

use super::history::{self, POD_TEMPLATE_HASH, REVISION, Revision};
use super::{Objects, Workload, group_kind};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The Deployment annotations a rollback keeps from the Deployment rather than the revision.
const KEPT_ANNOTATIONS: &[&str] = &[
    LAST_APPLIED,
    REVISION,
    "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas",
    "deployment.kubernetes.io/max-replicas",
    "deprecated.deployment.rollback.to",
];

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub objects: Objects,
    /// The revision to roll back to (0: the one before the current).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub to_revision: i64,
}

/// What a rollback decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Nothing to change: the template already is that revision's.
    Skip(i64),
    /// Send this patch (`content type`, body).
    Patch(&'static str, Value),
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let (infos, errors) = super::infos(f, &a.objects).await?;
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    for info in infos {
        let object = super::latest(f, &info).await?;
        if super::annotation(&object, LAST_APPLIED).is_some() {
            eprintln!(
                "Warning: resource {} was previously managed with 'kubectl apply'. Rolling back will not update the {LAST_APPLIED} annotation, which may cause unexpected behavior on future 'kubectl apply' operations. Consider using 'kubectl apply' with your previous configuration file instead.",
                info.kind_name()
            );
        }
        let Some(workload) = Workload::of(&info) else {
            return Err(CliError::Usage(format!(
                "no rollbacker has been implemented for {:?}",
                group_kind(&info)
            )));
        };
        if a.to_revision < 0 {
            return Err(not_found(a.to_revision));
        }
        let revisions = history::revisions(f, workload, &object).await?;
        let plan = match workload {
            Workload::Deployment => deployment(&object, &revisions, a.to_revision)?,
            Workload::DaemonSet | Workload::StatefulSet => {
                controller_revision(&object, &revisions, a.to_revision)?
            }
        };
        match plan {
            Plan::Skip(n) => println!(
                "{} skipped rollback (current template already matches revision {n})",
                info.kind_name()
            ),
            Plan::Patch(content_type, patch) => {
                let body =
                    serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
                f.send(Method::PATCH, &info.url(), Some((body, content_type)), "application/json")
                    .await
                    .map_err(|e| {
                        let reason =
                            e.status().map_or_else(|| e.to_string(), |s| s.message.clone());
                        CliError::Usage(format!(
                            "failed restoring revision {}: {reason}",
                            a.to_revision
                        ))
                    })?;
                println!("{} rolled back", info.kind_name());
            }
        }
    }
    Ok(())
}

fn not_found(revision: i64) -> CliError {
    CliError::Usage(format!("unable to find specified revision {revision} in history"))
}

/// The revision to go back to: `to` itself, or for 0 the one before the newest.
fn pick(revisions: &[Revision], to: i64) -> Option<&Revision> {
    if to == 0 { revisions.iter().rev().nth(1) } else { revisions.iter().find(|r| r.number == to) }
}

/// A Deployment's rollback: kubectl's `DeploymentRollbacker`.
pub fn deployment(d: &Value, revisions: &[Revision], to: i64) -> Result<Plan> {
    let Some(target) = pick(revisions, to) else {
        return Err(if to > 0 {
            not_found(to)
        } else {
            let name = d["metadata"]["name"].as_str().unwrap_or_default();
            CliError::Usage(format!("no rollout history found for deployment {name:?}"))
        });
    };
    if d["spec"]["paused"] == true {
        return Err(CliError::Usage(
            "you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume' and try again".into(),
        ));
    }
    if equal_ignoring_hash(&target.template, &d["spec"]["template"]) {
        return Ok(Plan::Skip(to));
    }
    let mut template = target.template.clone();
    if let Some(labels) = template["metadata"]["labels"].as_object_mut() {
        labels.remove(POD_TEMPLATE_HASH);
    }
    let mut annotations = Map::new();
    for k in KEPT_ANNOTATIONS {
        if let Some(v) = d["metadata"]["annotations"].get(*k) {
            annotations.insert((*k).to_string(), v.clone());
        }
    }
    for (k, v) in target.source["metadata"]["annotations"].as_object().into_iter().flatten() {
        if !KEPT_ANNOTATIONS.contains(&k.as_str()) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    Ok(Plan::Patch(
        "application/json-patch+json",
        json!([
            {"op": "replace", "path": "/spec/template", "value": template},
            {"op": "replace", "path": "/metadata/annotations", "value": annotations},
        ]),
    ))
}

/// A DaemonSet's or StatefulSet's rollback: its ControllerRevision's data is the patch.
pub fn controller_revision(o: &Value, revisions: &[Revision], to: i64) -> Result<Plan> {
    if to == 0 && revisions.len() <= 1 {
        return Err(CliError::Usage("no last revision to roll back to".into()));
    }
    let target = pick(revisions, to).ok_or_else(|| not_found(to))?;
    if equal_ignoring_hash(&target.template, &o["spec"]["template"]) {
        return Ok(Plan::Skip(to));
    }
    Ok(Plan::Patch("application/strategic-merge-patch+json", target.source["data"].clone()))
}

/// apimachinery's semantic equality of two pod templates, the Deployment's hash label aside:
/// empty and missing fields are the same.
pub fn equal_ignoring_hash(a: &Value, b: &Value) -> bool {
    let strip = |t: &Value| {
        let mut t = t.clone();
        if let Some(labels) = t["metadata"]["labels"].as_object_mut() {
            labels.remove(POD_TEMPLATE_HASH);
        }
        pruned(t)
    };
    strip(a) == strip(b)
}

/// `v` without nulls, empty objects and empty arrays, at every depth.
fn pruned(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter().map(|(k, v)| (k, pruned(v))).filter(|(_, v)| !is_empty(v)).collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(pruned).collect()),
        other => other,
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(n: i64, image: &str) -> Revision {
        let template = json!({"metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH: format!("h{n}")}},
                              "spec": {"containers": [{"name": "c", "image": image}]}});
        Revision {
            number: n,
            change_cause: None,
            template,
            source: json!({"metadata": {"annotations": {REVISION: n.to_string(), "team": "a"}}}),
        }
    }

    fn deploy(image: &str, paused: bool) -> Value {
        json!({"metadata": {"name": "web", "annotations": {REVISION: "2", LAST_APPLIED: "{}"}},
               "spec": {"paused": paused, "template": {"metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "c", "image": image, "env": []}]}}}})
    }

    #[test]
    fn a_deployment_goes_back_to_the_previous_revision_without_its_hash_label() {
        let revs = [rs(1, "busybox:1.35"), rs(2, "busybox:1.36")];
        let Plan::Patch(ct, patch) = deployment(&deploy("busybox:1.36", false), &revs, 0).unwrap()
        else {
            panic!("a patch was expected")
        };
        assert_eq!(ct, "application/json-patch+json");
        assert_eq!(patch[0]["value"]["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(patch[0]["value"]["spec"]["containers"][0]["image"], "busybox:1.35");
        assert_eq!(
            patch[1]["value"],
            json!({REVISION: "2", LAST_APPLIED: "{}", "team": "a"}),
            "the revision's own annotations, the Deployment's bookkeeping kept"
        );
    }

    #[test]
    fn a_deployment_rollback_is_refused_or_skipped_as_kubectl_does() {
        let revs = [rs(1, "busybox:1.35"), rs(2, "busybox:1.36")];
        let err = |d: &Value, to| deployment(d, &revs, to).unwrap_err().to_string();
        assert_eq!(
            err(&deploy("x", true), 0),
            "error: you cannot rollback a paused deployment; resume it first with 'kubectl rollout resume' and try again"
        );
        assert_eq!(
            err(&deploy("x", false), 7),
            "error: unable to find specified revision 7 in history"
        );
        assert_eq!(
            deployment(&deploy("x", false), &revs[..1], 0).unwrap_err().to_string(),
            "error: no rollout history found for deployment \"web\""
        );
        assert_eq!(
            deployment(&deploy("busybox:1.36", false), &revs, 2).unwrap(),
            Plan::Skip(2),
            "an empty env list is the same as none"
        );
    }

    #[test]
    fn a_daemon_set_needs_a_revision_before_the_current_one() {
        let ds = json!({"spec": {"template": {}}});
        let cr = |n| Revision {
            number: n,
            change_cause: None,
            template: json!({"spec": {"containers": [{"name": "c", "image": format!("i{n}")}]}}),
            source: json!({"data": {"spec": {"template": {"$patch": "replace"}}}}),
        };
        assert_eq!(
            controller_revision(&ds, &[cr(1)], 0).unwrap_err().to_string(),
            "error: no last revision to roll back to"
        );
        let Plan::Patch(ct, patch) = controller_revision(&ds, &[cr(1), cr(2)], 0).unwrap() else {
            panic!("a patch was expected")
        };
        assert_eq!(ct, "application/strategic-merge-patch+json");
        assert_eq!(patch, json!({"spec": {"template": {"$patch": "replace"}}}));
    }
}
