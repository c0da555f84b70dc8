//! `kubectl describe deployment`: replicas, strategy, the pod template, conditions, the old
//! and new ReplicaSets (the ones it controls, the new one being the oldest whose template is
//! the deployment's, pod-template-hash aside), and events.

use serde_json::Value;

use super::containers::{describe_pod_template, int_or_string};
use super::events::{self, Involved};
use super::writer::{LEVEL_0, LEVEL_1, PrefixWriter};
use super::{Clock, Settings, fields, has, int, items, s};
use crate::builder::{Info, encode};
use crate::errors::Result;
use crate::factory::Factory;

const HASH_LABEL: &str = "pod-template-hash";

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let d = f.get_json(&info.url()).await?;
    let events = if st.show_events {
        Some(events::search(f, &Involved::of(&d), st.chunk_size).await.unwrap_or_default())
    } else {
        None
    };
    let selector = fields::label_selector(d.pointer("/spec/selector"));
    let url = format!(
        "/apis/apps/v1/namespaces/{}/replicasets?labelSelector={}",
        s(&d, "/metadata/namespace"),
        encode(&selector)
    );
    // kubectl shows no ReplicaSets when listing them fails.
    let (old, new) = match super::list_all(f, &url, st.chunk_size).await {
        Ok(all) => replica_sets(&d, all),
        Err(_) => (Vec::new(), None),
    };
    Ok(render(&d, &old, new.as_ref(), events.as_deref(), clock))
}

/// The ReplicaSets a deployment controls, split into the old ones still scaled up and the new
/// one (`GetAllReplicaSets`).
pub fn replica_sets(d: &Value, all: Vec<Value>) -> (Vec<Value>, Option<Value>) {
    let uid = s(d, "/metadata/uid");
    let mut owned: Vec<Value> = all
        .into_iter()
        .filter(|rs| {
            items(rs, "/metadata/ownerReferences")
                .iter()
                .any(|r| super::flag(r, "/controller") && s(r, "/uid") == uid)
        })
        .collect();
    owned.sort_by(|a, b| {
        let t = |x: &Value| s(x, "/metadata/creationTimestamp").parse::<jiff::Timestamp>().ok();
        t(a).cmp(&t(b)).then_with(|| s(a, "/metadata/name").cmp(s(b, "/metadata/name")))
    });
    let template = without_hash(d.pointer("/spec/template"));
    let new_index =
        owned.iter().position(|rs| without_hash(rs.pointer("/spec/template")) == template);
    let new = new_index.map(|i| owned.remove(i));
    let old = owned.into_iter().filter(|rs| int(rs, "/spec/replicas") != 0).collect();
    (old, new)
}

/// A template without the hash label (and without an emptied labels map), for comparison.
fn without_hash(t: Option<&Value>) -> Value {
    let mut t = t.cloned().unwrap_or(Value::Null);
    if let Some(m) = t.pointer_mut("/metadata").and_then(Value::as_object_mut) {
        if let Some(labels) = m.get_mut("labels").and_then(Value::as_object_mut) {
            labels.remove(HASH_LABEL);
        }
        if m.get("labels").and_then(Value::as_object).is_some_and(|l| l.is_empty()) {
            m.remove("labels");
        }
    }
    t
}

/// `describeDeployment`.
pub fn render(
    d: &Value,
    old: &[Value],
    new: Option<&Value>,
    events: Option<&[Value]>,
    clock: &Clock,
) -> String {
    let mut pw = PrefixWriter::new();
    let w = &mut pw;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(d, "/metadata/name")));
    w.write(LEVEL_0, &format!("Namespace:\t{}\n", s(d, "/metadata/namespace")));
    let created = fields::time(clock, d.pointer("/metadata/creationTimestamp"));
    w.write(LEVEL_0, &format!("CreationTimestamp:\t{created}\n"));
    fields::labels_multiline(w, "Labels", d.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", d.pointer("/metadata/annotations"));
    w.write(
        LEVEL_0,
        &format!("Selector:\t{}\n", fields::label_selector(d.pointer("/spec/selector"))),
    );
    w.write(
        LEVEL_0,
        &format!(
            "Replicas:\t{} desired | {} updated | {} total | {} available | {} unavailable\n",
            int(d, "/spec/replicas"),
            int(d, "/status/updatedReplicas"),
            int(d, "/status/replicas"),
            int(d, "/status/availableReplicas"),
            int(d, "/status/unavailableReplicas")
        ),
    );
    w.write(LEVEL_0, &format!("StrategyType:\t{}\n", s(d, "/spec/strategy/type")));
    w.write(LEVEL_0, &format!("MinReadySeconds:\t{}\n", int(d, "/spec/minReadySeconds")));
    if has(d, "/spec/strategy/rollingUpdate") {
        let ru = d.pointer("/spec/strategy/rollingUpdate").unwrap_or(&Value::Null);
        w.write(
            LEVEL_0,
            &format!(
                "RollingUpdateStrategy:\t{} max unavailable, {} max surge\n",
                int_or_string(ru.get("maxUnavailable")),
                int_or_string(ru.get("maxSurge"))
            ),
        );
    }
    describe_pod_template(w, d.pointer("/spec/template"), clock);
    conditions(w, items(d, "/status/conditions"));
    if !old.is_empty() || new.is_some() {
        w.write(LEVEL_0, &format!("OldReplicaSets:\t{}\n", replica_sets_text(old.iter())));
        w.write(LEVEL_0, &format!("NewReplicaSet:\t{}\n", replica_sets_text(new.into_iter())));
    }
    if let Some(e) = events {
        events::describe_events(w, e, clock);
    }
    pw.finish()
}

/// The `Type Status Reason` table of a workload's conditions.
pub fn conditions(w: &mut PrefixWriter, conditions: &[Value]) {
    if conditions.is_empty() {
        return;
    }
    w.write(LEVEL_0, "Conditions:\n  Type\tStatus\tReason\n");
    w.write(LEVEL_1, "----\t------\t------\n");
    for c in conditions {
        w.write(
            LEVEL_1,
            &format!("{} \t{}\t{}\n", s(c, "/type"), s(c, "/status"), s(c, "/reason")),
        );
    }
}

/// `printReplicaSetsByLabels`: `web-7d4b9 (2/2 replicas created), …` or `<none>`.
fn replica_sets_text<'a>(sets: impl Iterator<Item = &'a Value>) -> String {
    let list: Vec<String> = sets
        .map(|rs| {
            format!(
                "{} ({}/{} replicas created)",
                s(rs, "/metadata/name"),
                int(rs, "/status/replicas"),
                int(rs, "/spec/replicas")
            )
        })
        .collect();
    if list.is_empty() { "<none>".into() } else { list.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, created: &str, replicas: i64, image: &str, owner: &str) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created,
                "ownerReferences": [{"uid": owner, "controller": true}]},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": name}},
                "spec": {"containers": [{"name": "web", "image": image}]}}},
            "status": {"replicas": replicas}})
    }

    #[test]
    fn the_new_replica_set_has_the_template_and_old_ones_still_have_replicas() {
        let d = json!({"metadata": {"name": "web", "namespace": "default", "uid": "d1"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.9"}]}}}});
        let all = vec![
            rs("web-b", "2024-01-01T00:02:00Z", 2, "nginx:1.9", "d1"),
            rs("web-a", "2024-01-01T00:01:00Z", 1, "nginx:1.8", "d1"),
            rs("web-z", "2024-01-01T00:00:00Z", 0, "nginx:1.7", "d1"),
            rs("other", "2024-01-01T00:00:00Z", 3, "nginx:1.9", "someone-else"),
        ];
        let (old, new) = replica_sets(&d, all);
        assert_eq!(new.as_ref().map(|n| s(n, "/metadata/name")), Some("web-b"));
        let old_names: Vec<&str> = old.iter().map(|o| s(o, "/metadata/name")).collect();
        assert_eq!(old_names, ["web-a"]);
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        let text = render(&d, &old, new.as_ref(), None, &clock);
        assert!(
            text.contains(&format!("{:19}web-a (1/1 replicas created)\n", "OldReplicaSets:")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{:19}web-b (2/2 replicas created)\n", "NewReplicaSet:")),
            "{text}"
        );
        let replicas = "2 desired | 0 updated | 0 total | 0 available | 0 unavailable";
        assert!(text.contains(&format!("{:20}{replicas}\n", "Replicas:")), "{text}");
    }
}
