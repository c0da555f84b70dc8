//! `kubectl describe replicaset`: selector, replicas, the phases of the pods it controls,
//! the pod template, conditions and events.

use serde_json::Value;

use super::containers::describe_pod_template;
use super::events::{self, Involved};
use super::writer::{LEVEL_0, PrefixWriter};
use super::{Clock, Settings, fields, int, items, s};
use crate::builder::{Info, encode};
use crate::errors::Result;
use crate::factory::Factory;

/// Pods of a controller by phase: running, waiting (pending), succeeded, failed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PodPhases {
    pub running: usize,
    pub waiting: usize,
    pub succeeded: usize,
    pub failed: usize,
}

impl PodPhases {
    /// The phases of the pods controlled by `uid` (`getPodStatusForController`).
    pub fn of(pods: &[Value], uid: &str) -> PodPhases {
        let mut p = PodPhases::default();
        for pod in pods {
            let controlled = items(pod, "/metadata/ownerReferences")
                .iter()
                .any(|r| super::flag(r, "/controller") && s(r, "/uid") == uid);
            if !controlled {
                continue;
            }
            match s(pod, "/status/phase") {
                "Running" => p.running += 1,
                "Pending" => p.waiting += 1,
                "Succeeded" => p.succeeded += 1,
                "Failed" => p.failed += 1,
                _ => {}
            }
        }
        p
    }
}

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let rs = f.get_json(&info.url()).await?;
    let selector = fields::label_selector(rs.pointer("/spec/selector"));
    let url = format!(
        "/api/v1/namespaces/{}/pods?labelSelector={}",
        s(&rs, "/metadata/namespace"),
        encode(&selector)
    );
    let phases = super::list_all(f, &url, st.chunk_size)
        .await
        .map(|pods| PodPhases::of(&pods, s(&rs, "/metadata/uid")))
        .map_err(|e| match e.status() {
            Some(s) => s.message.clone(),
            None => e.to_string(),
        });
    let events = if st.show_events {
        Some(events::search(f, &Involved::of(&rs), st.chunk_size).await.unwrap_or_default())
    } else {
        None
    };
    Ok(render(&rs, phases, events.as_deref(), clock))
}

/// `describeReplicaSet`; `phases` is the error listing the pods failed with, if it did.
pub fn render(
    rs: &Value,
    phases: std::result::Result<PodPhases, String>,
    events: Option<&[Value]>,
    clock: &Clock,
) -> String {
    let mut pw = PrefixWriter::new();
    let w = &mut pw;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(rs, "/metadata/name")));
    w.write(LEVEL_0, &format!("Namespace:\t{}\n", s(rs, "/metadata/namespace")));
    let selector = fields::format_label_selector(rs.pointer("/spec/selector"));
    w.write(LEVEL_0, &format!("Selector:\t{selector}\n"));
    fields::labels_multiline(w, "Labels", rs.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", rs.pointer("/metadata/annotations"));
    if let Some(c) = super::pod::controller_of(rs) {
        w.write(LEVEL_0, &format!("Controlled By:\t{c}\n"));
    }
    w.write(
        LEVEL_0,
        &format!(
            "Replicas:\t{} current / {} desired\n",
            int(rs, "/status/replicas"),
            int(rs, "/spec/replicas")
        ),
    );
    w.write(LEVEL_0, "Pods Status:\t");
    match phases {
        Ok(p) => w.write(
            LEVEL_0,
            &format!(
                "{} Running / {} Waiting / {} Succeeded / {} Failed\n",
                p.running, p.waiting, p.succeeded, p.failed
            ),
        ),
        Err(e) => w.write(LEVEL_0, &format!("error in fetching pods: {e}\n")),
    }
    describe_pod_template(w, rs.pointer("/spec/template"), clock);
    super::deployment::conditions(w, items(rs, "/status/conditions"));
    if let Some(e) = events {
        events::describe_events(w, e, clock);
    }
    pw.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pods_are_counted_by_phase_when_the_replica_set_controls_them() {
        let pod = |phase: &str, uid: &str| {
            json!({"metadata": {"ownerReferences": [{"uid": uid, "controller": true}]},
                   "status": {"phase": phase}})
        };
        let pods =
            [pod("Running", "r"), pod("Pending", "r"), pod("Failed", "r"), pod("Running", "x")];
        let p = PodPhases::of(&pods, "r");
        assert_eq!(p, PodPhases { running: 1, waiting: 1, succeeded: 0, failed: 1 });
    }

    #[test]
    fn a_failed_pod_listing_is_said_in_the_pods_status() {
        let rs = json!({"metadata": {"name": "r", "namespace": "default"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": []}}}});
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        let text = render(&rs, Err("forbidden".into()), None, &clock);
        assert!(text.contains("error in fetching pods: forbidden\n"), "{text}");
        assert!(text.contains("Selector:     a=b\n"), "{text}");
        assert!(text.contains("  Containers: <none>\n"), "{text}");
    }
}
