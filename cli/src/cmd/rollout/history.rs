//! `rollout history`: the revisions a workload's controller kept — a Deployment's ReplicaSets
//! (numbered by their `deployment.kubernetes.io/revision` annotation), a DaemonSet's or
//! StatefulSet's ControllerRevisions — as kubectl's history viewers list them.

use api::validation::selector::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::{Objects, Workload, group_kind};
use crate::builder::encode;
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::table::tabbed;

/// The annotation numbering a Deployment's ReplicaSets.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The annotation a revision's cause is recorded in.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";
/// The label a Deployment adds to each ReplicaSet's template.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub objects: Objects,
    /// Print the pod template of this revision.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub revision: i64,
}

/// One revision a controller kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub number: i64,
    pub change_cause: Option<String>,
    /// The pod template of that revision.
    pub template: Value,
    /// The ReplicaSet or ControllerRevision holding it.
    pub source: Value,
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
    for info in infos {
        let Some(workload) = Workload::of(&info) else {
            return Err(CliError::Usage(format!(
                "no history viewer has been implemented for {:?}",
                group_kind(&info)
            )));
        };
        let object = super::latest(f, &info).await?;
        let revisions = revisions(f, workload, &object).await?;
        if a.revision > 0 {
            let Some(r) = revisions.iter().find(|r| r.number == a.revision) else {
                return Err(CliError::Usage("unable to find the specified revision".into()));
            };
            println!("{} with revision #{}", info.kind_name(), a.revision);
            println!("{}", pod_template(&r.template));
        } else {
            println!("{} ", info.kind_name());
            println!("{}", overview(&revisions));
        }
    }
    Ok(())
}

/// One revision's pod template as kubectl's `DescribePodTemplate` prints it to a bare buffer
/// (tabs not aligned).
pub fn pod_template(template: &Value) -> String {
    let mut w = crate::describe::writer::PrefixWriter::raw();
    crate::describe::containers::describe_pod_template(
        &mut w,
        Some(template),
        &crate::describe::Clock::system(),
    );
    w.finish()
}

/// The `REVISION  CHANGE-CAUSE` table, or kubectl's line for no history.
pub fn overview(revisions: &[Revision]) -> String {
    if revisions.is_empty() {
        return "No rollout history found.".into();
    }
    let mut lines = vec![vec!["REVISION".to_string(), "CHANGE-CAUSE".to_string()]];
    for r in revisions {
        let cause = r.change_cause.clone().filter(|c| !c.is_empty());
        lines.push(vec![r.number.to_string(), cause.unwrap_or_else(|| "<none>".into())]);
    }
    tabbed(&lines, 0, 2)
}

/// The revisions of `object` (a workload of kind `w`), by number, oldest first; one per
/// number (a later duplicate wins, as kubectl's map does).
pub async fn revisions(f: &Factory, w: Workload, object: &Value) -> Result<Vec<Revision>> {
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let selector: Option<LabelSelector> =
        serde_json::from_value(object["spec"]["selector"].clone()).ok();
    let selector = Selector::from_label_selector(selector.as_ref())
        .map_err(|e| CliError::Usage(format!("failed to create selector for {name}: {e}")))?;
    let collection = match w {
        Workload::Deployment => "replicasets",
        Workload::DaemonSet | Workload::StatefulSet => "controllerrevisions",
    };
    let url = format!(
        "/apis/apps/v1/namespaces/{namespace}/{collection}?labelSelector={}",
        encode(&selector.text())
    );
    let list = f.get_json(&url).await?;
    let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
    let mut by_number = std::collections::BTreeMap::new();
    for item in list["items"].as_array().into_iter().flatten() {
        if !controlled_by(item, uid) {
            continue;
        }
        if let Some(r) = revision(w, item) {
            by_number.insert(r.number, r);
        }
    }
    Ok(by_number.into_values().collect())
}

/// Whether `item`'s controller reference names `uid`.
fn controlled_by(item: &Value, uid: &str) -> bool {
    item["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["controller"] == true && r["uid"] == uid)
}

/// The revision a ReplicaSet or ControllerRevision holds; `None` for a ReplicaSet without a
/// readable number (kubectl skips those with a warning in its log).
fn revision(w: Workload, item: &Value) -> Option<Revision> {
    let change_cause = super::annotation(item, CHANGE_CAUSE).map(str::to_string);
    let (number, template) = match w {
        Workload::Deployment => (
            super::annotation(item, REVISION).unwrap_or("0").parse::<i64>().ok()?,
            item["spec"]["template"].clone(),
        ),
        Workload::DaemonSet | Workload::StatefulSet => {
            let mut template = item["data"]["spec"]["template"].clone();
            if let Some(t) = template.as_object_mut() {
                t.remove("$patch");
            }
            (item["revision"].as_i64().unwrap_or(0), template)
        }
    };
    Some(Revision { number, change_cause, template, source: item.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_overview_lists_revisions_with_their_change_cause() {
        let r = |n, cause: Option<&str>| Revision {
            number: n,
            change_cause: cause.map(str::to_string),
            template: Value::Null,
            source: Value::Null,
        };
        assert_eq!(
            overview(&[r(1, None), r(12, Some("kubectl set image")), r(13, Some(""))]),
            "REVISION  CHANGE-CAUSE\n1         <none>\n12        kubectl set image\n13        <none>\n"
        );
        assert_eq!(overview(&[]), "No rollout history found.");
    }

    #[test]
    fn revisions_are_read_from_replica_sets_and_controller_revisions() {
        let rs = json!({"metadata": {"annotations": {REVISION: "3", CHANGE_CAUSE: "why"}},
                        "spec": {"template": {"metadata": {"labels": {"app": "web"}}}}});
        let r = revision(Workload::Deployment, &rs).unwrap();
        assert_eq!((r.number, r.change_cause.as_deref()), (3, Some("why")));
        assert_eq!(r.template, json!({"metadata": {"labels": {"app": "web"}}}));
        let unreadable = json!({"metadata": {"annotations": {REVISION: "x"}}});
        assert_eq!(revision(Workload::Deployment, &unreadable), None);
        let cr = json!({"revision": 2, "data": {"spec": {"template": {"$patch": "replace", "spec": {}}}}});
        let r = revision(Workload::DaemonSet, &cr).unwrap();
        assert_eq!((r.number, r.template), (2, json!({"spec": {}})));
    }

    #[test]
    fn only_objects_the_workload_controls_are_its_revisions() {
        let owned = json!({"metadata": {"ownerReferences": [{"uid": "u1", "controller": true}]}});
        assert!(controlled_by(&owned, "u1"));
        assert!(!controlled_by(&owned, "u2"));
        let adopted_not = json!({"metadata": {"ownerReferences": [{"uid": "u1"}]}});
        assert!(!controlled_by(&adopted_not, "u1"));
    }
}
