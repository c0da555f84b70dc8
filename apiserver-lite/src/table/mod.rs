//! `as=Table` responses with kubectl's usual columns per kind (the `api` crate's printers and
//! Table; each kind's printer named by its strategy). Each row carries the object's metadata
//! (or the whole object with `includeObject=Object`), which `-A`, `--show-labels` and `-L`
//! read.

pub(crate) use api::table::printers;
pub use api::table::{IncludeObject, human_duration};
use serde_json::Value;

use crate::resources::ResourceType;

/// The column definitions of `r`.
pub fn column_definitions(r: &ResourceType) -> Value {
    api::table::column_definitions(r.strategy.printer, r.singular)
}

/// A Table of `objects`; `with_columns` is false for watch events after the first.
pub fn table(
    r: &ResourceType,
    objects: &[Value],
    include: IncludeObject,
    metadata: Value,
    with_columns: bool,
) -> Value {
    api::table::table(r.strategy.printer, r.singular, objects, include, metadata, with_columns)
}

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=Table"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::find;
    use serde_json::json;

    #[test]
    fn durations_read_like_kubectl() {
        let cases = [
            (5, "5s"),
            (119, "119s"),
            (150, "2m30s"),
            (600, "10m"),
            (3 * 3600 + 60, "3h1m"),
            (10 * 3600, "10h"),
            (3 * 86400, "3d"),
            (3 * 86400 + 3600, "3d1h"),
            (400 * 86400, "400d"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn role_bindings_show_the_role_and_their_subjects_by_kind() {
        let rb = &crate::resources::ROLE_BINDINGS;
        let o = serde_json::json!({
            "metadata": {"name": "b", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [
                {"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                {"kind": "User", "name": "bob"},
                {"kind": "ServiceAccount", "name": "web", "namespace": "a"},
            ],
        });
        let row = (rb.strategy.printer)(&o, jiff::Timestamp::now());
        let cells: Vec<(&str, String)> =
            row.iter().map(|(c, v)| (c.name, v.as_str().unwrap_or_default().to_string())).collect();
        assert_eq!(cells[1], ("Role", "ClusterRole/view".to_string()));
        assert_eq!(cells[3], ("Users", "alice, bob".to_string()));
        assert_eq!(cells[4], ("Groups", "devs".to_string()));
        assert_eq!(cells[5], ("ServiceAccounts", "a/web".to_string()));
        let roles = &crate::resources::CLUSTER_ROLES;
        let names: Vec<&str> =
            printers::columns(roles.strategy.printer).iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Created At"]);
    }

    #[test]
    fn pod_rows_have_kubectls_columns() {
        let pods = &crate::resources::PODS;
        let pod = json!({
            "metadata": {"name": "nginx-pod", "namespace": "default", "labels": {"app": "nginx"}, "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "nginx"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.5", "containerStatuses": [{"name": "nginx", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
        });
        let t = table(pods, &[pod], IncludeObject::Metadata, json!({"resourceVersion": "7"}), true);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(
            (cells[0].as_str(), cells[1].as_str(), cells[2].as_str(), cells[3].as_str()),
            (Some("nginx-pod"), Some("1/1"), Some("Running"), Some("0"))
        );
        assert_eq!((cells[5].as_str(), cells[6].as_str()), (Some("10.0.0.5"), Some("node-1")));
        assert_eq!(t["rows"][0]["object"]["metadata"]["labels"]["app"], "nginx");
        assert_eq!(t["columnDefinitions"][1]["name"], "Ready");
        let crash = json!({"metadata": {"name": "c", "deletionTimestamp": null}, "spec": {"containers": [{"name": "a"}]}, "status": {"phase": "Running", "containerStatuses": [{"ready": false, "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        let crash = printers::PodSummary::of(&crash);
        assert_eq!(crash.status, "CrashLoopBackOff");
        assert_eq!(crash.restarts(jiff::Timestamp::now()), "3");
    }

    /// Upstream's STATUS strings for the pod states the kubelet reports.
    #[test]
    fn pod_status_reads_like_kubectl_in_each_state() {
        let waiting = |r: &str| json!({"waiting": {"reason": r}});
        let running = json!({"running": {}});
        let done = |code: i64, r: &str| json!({"terminated": {"exitCode": code, "reason": r}});
        let status = |init: Value, app: Value, extra: Value| {
            let mut p = json!({
                "metadata": {"name": "p"},
                "spec": {"initContainers": [{"name": "i0"}, {"name": "i1"}], "containers": [{"name": "a"}, {"name": "b"}]},
                "status": {"phase": "Pending", "initContainerStatuses": init, "containerStatuses": app},
            });
            if let (Some(o), Some(e)) = (p.as_object_mut(), extra.as_object()) {
                for (k, v) in e {
                    o.insert(k.clone(), v.clone());
                }
            }
            printers::PodSummary::of(&p)
        };
        let ic =
            |name: &str, state: Value| json!({"name": name, "state": state, "restartCount": 0});
        let c = |name: &str, state: Value, ready: bool| json!({"name": name, "state": state, "ready": ready, "restartCount": 0});
        let app_waiting = json!([
            c("a", waiting("PodInitializing"), false),
            c("b", waiting("PodInitializing"), false)
        ]);
        let s = status(
            json!([ic("i0", done(0, "Completed")), ic("i1", running.clone())]),
            app_waiting.clone(),
            json!({}),
        );
        assert_eq!(s.status, "Init:1/2");
        let s = status(
            json!([ic("i0", waiting("CrashLoopBackOff")), ic("i1", waiting("PodInitializing"))]),
            app_waiting.clone(),
            json!({}),
        );
        assert_eq!(s.status, "Init:CrashLoopBackOff");
        let s = status(json!([ic("i0", done(1, "Error"))]), app_waiting.clone(), json!({}));
        assert_eq!(s.status, "Init:Error");
        let inited = json!([ic("i0", done(0, "Completed")), ic("i1", done(0, "Completed"))]);
        let s = status(inited.clone(), app_waiting.clone(), json!({}));
        assert_eq!(s.status, "PodInitializing");
        let s = status(
            inited.clone(),
            json!([c("a", done(0, "Completed"), false), c("b", running.clone(), true)]),
            json!({"status": {"phase": "Running", "initContainerStatuses": inited.clone(), "containerStatuses": [c("a", done(0, "Completed"), false), c("b", running.clone(), true)], "conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        assert_eq!(s.status, "NotReady");
        let both_done =
            json!([c("a", done(0, "Completed"), false), c("b", done(0, "Completed"), false)]);
        let s = status(
            inited.clone(),
            both_done.clone(),
            json!({"status": {"phase": "Succeeded", "initContainerStatuses": inited.clone(), "containerStatuses": both_done}}),
        );
        assert_eq!(s.status, "Completed");
        let s = status(
            inited.clone(),
            json!([c("a", running.clone(), true), c("b", running.clone(), true)]),
            json!({"metadata": {"name": "p", "deletionTimestamp": "2020-01-01T00:00:00Z"}}),
        );
        assert_eq!(s.status, "Terminating");
    }

    #[test]
    fn sidecars_count_in_ready_and_do_not_hold_initialization() {
        let p = json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "side", "restartPolicy": "Always"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Running",
                "conditions": [{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}],
                "initContainerStatuses": [{"name": "side", "started": true, "ready": true, "restartCount": 2, "state": {"running": {}}}],
                "containerStatuses": [{"name": "a", "ready": true, "restartCount": 0, "state": {"running": {}}}]},
        });
        let s = printers::PodSummary::of(&p);
        assert_eq!((s.ready, s.total, s.status.as_str(), s.restart_count), (2, 2, "Running", 2));
        let mut starting = p.clone();
        starting["status"]["initContainerStatuses"][0]["started"] = json!(false);
        starting["status"]["conditions"] = json!([]);
        starting["status"]["containerStatuses"][0]["state"] =
            json!({"waiting": {"reason": "PodInitializing"}});
        assert_eq!(printers::PodSummary::of(&starting).status, "Init:0/1");
    }

    #[test]
    fn event_sources_read_as_kubectl_prints_them() {
        let source = |o: serde_json::Value| {
            let row = printers::event(&o, jiff::Timestamp::now(), printers::Event::Core);
            row.into_iter().find(|(c, _)| c.name == "Source").map(|(_, v)| v).unwrap()
        };
        let kubelet = json!({"source": {"component": "kubelet", "host": "node-a"}});
        assert_eq!(source(kubelet), "kubelet, node-a");
        assert_eq!(
            source(json!({"source": {"component": "default-scheduler"}})),
            "default-scheduler"
        );
        let reported = json!({"reportingController": "c", "reportingInstance": "i"});
        assert_eq!(source(reported), "c, i");
        assert_eq!(source(json!({})), "<unknown>");
    }

    #[test]
    fn job_and_cronjob_rows_read_as_kubectls() {
        let jobs = &crate::resources::JOBS;
        let cells = |r, o: Value| {
            table(r, &[o], IncludeObject::None, json!({}), true)["rows"][0]["cells"].clone()
        };
        let done = json!({"metadata": {"name": "pi", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"completions": 3, "parallelism": 2, "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}},
                     "template": {"spec": {"containers": [{"name": "pi", "image": "perl:5"}]}}},
            "status": {"succeeded": 3, "startTime": "2020-01-01T00:00:00Z", "completionTime": "2020-01-01T00:01:05Z",
                       "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}});
        assert_eq!(
            cells(jobs, done),
            json!([
                "pi",
                "Complete",
                "3/3",
                "65s",
                human_duration(
                    (jiff::Timestamp::now()
                        - "2020-01-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap())
                    .get_seconds()
                ),
                "pi",
                "perl:5",
                "batch.kubernetes.io/controller-uid=u"
            ])
        );
        let open = json!({"metadata": {"name": "w"}, "spec": {"parallelism": 4}, "status": {}});
        let c = cells(jobs, open);
        assert_eq!(
            (c[1].as_str(), c[2].as_str(), c[3].as_str()),
            (Some("Running"), Some("0/1 of 4"), Some(""))
        );
        let failed = json!({"metadata": {"name": "f"}, "spec": {"completions": 1}, "status": {"failed": 7,
            "conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]}});
        assert_eq!(cells(jobs, failed)[1], "Failed");

        let cronjobs = &crate::resources::CRON_JOBS;
        let cj = json!({"metadata": {"name": "tick"}, "spec": {"schedule": "*/1 * * * *", "suspend": false,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "tick", "image": "busybox:1.35"}]}}}}},
            "status": {"active": [{"name": "tick-1"}]}});
        let c = cells(cronjobs, cj);
        assert_eq!(
            &c.as_array().unwrap()[..6],
            &[
                json!("tick"),
                json!("*/1 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("<none>")
            ]
        );
        assert_eq!(
            &c.as_array().unwrap()[7..],
            &[json!("tick"), json!("busybox:1.35"), json!("<none>")]
        );
    }

    #[test]
    fn default_columns_are_kubectls_for_each_kind() {
        let headers = |group: &str, name: &str| -> Vec<String> {
            let r = find(group, "v1", name).unwrap();
            let defs = column_definitions(r);
            defs.as_array()
                .unwrap()
                .iter()
                .filter(|c| c["priority"] == 0)
                .map(|c| c["name"].as_str().unwrap().to_uppercase())
                .collect()
        };
        assert_eq!(headers("", "pods"), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
        assert_eq!(headers("", "nodes"), ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
        assert_eq!(
            headers("apps", "deployments"),
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        );
        assert_eq!(headers("", "events"), ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
        assert_eq!(headers("batch", "jobs"), ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]);
        assert_eq!(
            headers("batch", "cronjobs"),
            ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
        );
        // Every row has a cell per column, whatever the object holds.
        for r in crate::resources::RESOURCES {
            let t = table(
                r,
                &[json!({"metadata": {"name": "x"}})],
                IncludeObject::None,
                json!({}),
                true,
            );
            let columns = t["columnDefinitions"].as_array().unwrap().len();
            assert_eq!(t["rows"][0]["cells"].as_array().unwrap().len(), columns, "{}", r.name);
        }
    }
}
