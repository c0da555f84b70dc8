//! Node mode (`--kubelet URL`): a kubelet's own API read where there is no API server — the
//! pods it runs (static ones included) as kubectl's pod table, its manifest directories'
//! files with what became of each (`get manifests`), its local events (`get events`), and a
//! container's log (`logs`, through [`crate::cmd::logs`]). Credentials and the CA come from
//! the kubeconfig and flags as for an API server; the URL replaces the server.

use api::table::IncludeObject;
use serde_json::{Value, json};

use crate::cmd::get;
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::{self, Output, table};

/// What node mode serves, for the error naming a command it does not.
pub const SERVED: &str = "--kubelet serves get (pods, manifests, events) and logs";

/// The kubelet's pods (`GET /pods`).
pub async fn pods(f: &Factory) -> Result<Vec<Value>> {
    let list = f.get_json("/pods").await?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// One pod of the kubelet's, or the API server's `NotFound` wording for it.
pub async fn pod(f: &Factory, namespace: &str, name: &str) -> Result<Value> {
    pods(f)
        .await?
        .into_iter()
        .find(|p| p["metadata"]["namespace"] == namespace && p["metadata"]["name"] == name)
        .ok_or_else(|| not_found(name))
}

fn not_found(name: &str) -> CliError {
    CliError::not_found("pods", name)
}

/// What `get` can name in node mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pods,
    Manifests,
    Events,
}

fn kind(arg: &str) -> Option<Kind> {
    match arg {
        "pods" | "pod" | "po" => Some(Kind::Pods),
        "manifests" | "manifest" => Some(Kind::Manifests),
        "events" | "event" | "ev" => Some(Kind::Events),
        _ => None,
    }
}

/// `get` against a kubelet.
pub async fn get(f: &Factory, a: get::Args) -> Result<()> {
    let output = Output::parse(a.output.as_deref())?;
    if a.selector.is_some() || a.field_selector.is_some() || !a.filenames.is_empty() {
        return Err(CliError::Usage(
            "-l, --field-selector and -f are not served by a kubelet's API (--kubelet)".into(),
        ));
    }
    if a.watch || a.watch_only {
        return Err(CliError::Usage(
            "--watch and --watch-only are not served by a kubelet's API (--kubelet): it has no watch".into(),
        ));
    }
    let Some((what, names)) = a.args.split_first() else {
        return Err(CliError::Usage(format!("{SERVED}: name what to get")));
    };
    match kind(what) {
        Some(Kind::Pods) => get_pods(f, &a, names, &output).await,
        Some(Kind::Manifests | Kind::Events) if !names.is_empty() => {
            Err(CliError::Usage(format!("{what} are listed whole by a kubelet: it takes no names")))
        }
        Some(Kind::Manifests) => {
            let files = f.get_json("/manifests").await?;
            print_listing(&output, &files, &manifest_lines(&files), "No manifest files found")
        }
        Some(Kind::Events) => {
            let events = f.get_json("/events").await?;
            let now = jiff::Timestamp::now();
            print_listing(&output, &events, &event_lines(&events, now), "No events found")
        }
        None => Err(CliError::UnknownResource(what.clone())),
    }
}

async fn get_pods(f: &Factory, a: &get::Args, names: &[String], output: &Output) -> Result<()> {
    let namespace = f.namespace().await?;
    let all = pods(f).await?;
    let in_scope: Vec<Value> = all
        .into_iter()
        .filter(|p| a.all_namespaces || p["metadata"]["namespace"] == namespace.as_str())
        .map(|mut p| {
            p["apiVersion"] = json!("v1");
            p["kind"] = json!("Pod");
            p
        })
        .collect();
    let mut errors = Vec::new();
    let items: Vec<Value> = if names.is_empty() {
        in_scope
    } else {
        let mut picked = Vec::new();
        for n in names {
            match in_scope.iter().find(|p| p["metadata"]["name"] == n.as_str()) {
                Some(p) => picked.push(p.clone()),
                None => errors.push(not_found(n)),
            }
        }
        picked
    };
    let listed = names.len() != 1;
    match output {
        Output::Table | Output::Wide => {
            let t = api::table::table(
                api::table::printers::pod,
                "pod",
                &items,
                IncludeObject::Object,
                json!({}),
                true,
            );
            let o = a.table_options(output);
            let (header, rows) = table::rows(&table::Table::of(&t), &o);
            if rows.is_empty() {
                if names.is_empty() {
                    eprintln!("No resources found in {namespace} namespace.");
                }
            } else {
                let mut lines = if a.no_headers { Vec::new() } else { vec![header] };
                lines.extend(rows);
                print!("{}", table::align(&lines));
            }
        }
        Output::Name => {
            for p in &items {
                println!("pod/{}", p["metadata"]["name"].as_str().unwrap_or_default());
            }
        }
        Output::Json => print!("{}", crate::printers::json_of(&items, listed)),
        Output::Yaml => print!("{}", crate::printers::yaml_of(&items, listed)),
        Output::Kyaml => print!("{}", crate::printers::kyaml_of(&items, listed)),
        Output::JsonPath(t) => {
            print!(
                "{}",
                crate::printers::jsonpath_of(t, &items, listed, a.allow_missing_template_keys)?
            )
        }
        Output::CustomColumns(c) => {
            print!("{}", crate::printers::custom_columns_of(c, &items, a.no_headers)?)
        }
    }
    crate::cmd::finish(errors)
}

/// A listing of ours (manifests, events): aligned lines, or the JSON the kubelet answered.
fn print_listing(output: &Output, raw: &Value, lines: &[Vec<String>], empty: &str) -> Result<()> {
    match output {
        Output::Table | Output::Wide if lines.len() <= 1 => eprintln!("{empty}"),
        Output::Table | Output::Wide => print!("{}", table::align(lines)),
        Output::Json => print!("{}", printers::json::to_string(raw)),
        Output::Yaml => print!("{}", printers::yaml::to_string(raw)),
        Output::Kyaml => print!("{}", printers::kyaml::document(raw)),
        _ => {
            return Err(CliError::Usage(
                "manifests and events print as a table, -o json, -o yaml or -o kyaml".into(),
            ));
        }
    }
    Ok(())
}

fn cell(v: &Value) -> String {
    match v.as_str() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<none>".into(),
    }
}

/// `FILE STATE POD REASON`: each file of the manifest and static config directories; who else
/// could change a file follows its reason as `warning: …`.
fn manifest_lines(files: &Value) -> Vec<Vec<String>> {
    let mut lines = vec![vec!["FILE".into(), "STATE".into(), "POD".into(), "REASON".into()]];
    for m in files.as_array().into_iter().flatten() {
        let mut state = m["state"].as_str().unwrap_or_default().to_string();
        if m["runningPreviousVersion"] == true {
            state.push_str(" (previous version running)");
        }
        let pod = match m["pod"].as_str() {
            Some(p) => p.to_string(),
            None => m["objects"]
                .as_array()
                .map(|o| o.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(","))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "<none>".into()),
        };
        let reason = match (m["reason"].as_str(), m["warning"].as_str()) {
            (Some(r), Some(w)) => format!("{r}; warning: {w}"),
            (None, Some(w)) => format!("warning: {w}"),
            _ => cell(&m["reason"]),
        };
        lines.push(vec![cell(&m["file"]), state, pod, reason]);
    }
    lines
}

/// `LAST SEEN TYPE REASON OBJECT MESSAGE`, oldest first, as `kubectl get events`.
fn event_lines(events: &Value, now: jiff::Timestamp) -> Vec<Vec<String>> {
    let mut lines: Vec<Vec<String>> =
        vec![["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"].map(String::from).to_vec()];
    for e in events.as_array().into_iter().flatten() {
        let seen = e["time"].as_str().and_then(|t| t.parse::<jiff::Timestamp>().ok()).map_or_else(
            || "<unknown>".into(),
            |t| api::table::human_duration((now - t).get_seconds()),
        );
        let object = match e["fieldPath"].as_str() {
            Some(p) => format!("{} ({p})", cell(&e["object"])),
            None => cell(&e["object"]),
        };
        lines.push(vec![seen, cell(&e["type"]), cell(&e["reason"]), object, cell(&e["message"])]);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_files_list_with_their_state_pod_and_reason() {
        let files = json!([
            {"file": "/etc/kubernetes/manifests/web.yaml", "state": "accepted", "pod": "default/web-node-a"},
            {"file": "/etc/kubernetes/manifests/bad.yaml", "state": "rejected", "reason": "spec.containers: Required value",
             "runningPreviousVersion": true},
            {"file": "/etc/kubernetes/static-config/cm.yaml", "state": "accepted", "objects": ["configMap default/a"]},
            {"file": "/etc/kubernetes/manifests/open.yaml", "state": "accepted", "pod": "default/open-node-a",
             "warning": "world-writable (mode 0646)"},
        ]);
        let lines = manifest_lines(&files);
        assert_eq!(
            lines[1],
            ["/etc/kubernetes/manifests/web.yaml", "accepted", "default/web-node-a", "<none>"]
        );
        assert_eq!(
            lines[2],
            [
                "/etc/kubernetes/manifests/bad.yaml",
                "rejected (previous version running)",
                "<none>",
                "spec.containers: Required value"
            ]
        );
        assert_eq!(lines[3][2], "configMap default/a");
        assert_eq!(lines[4][3], "warning: world-writable (mode 0646)");
    }

    #[test]
    fn events_show_their_age_and_the_field_they_are_about() {
        let now: jiff::Timestamp = "2026-01-01T00:10:00Z".parse().unwrap();
        let events = json!([{"time": "2026-01-01T00:05:30Z", "type": "Warning", "reason": "BackOff",
            "object": "pod/default/web", "fieldPath": "spec.containers{c}", "message": "Back-off"}]);
        assert_eq!(
            event_lines(&events, now)[1],
            ["4m30s", "Warning", "BackOff", "pod/default/web (spec.containers{c})", "Back-off"]
        );
    }

    #[test]
    fn only_pods_manifests_and_events_are_named() {
        assert_eq!(kind("po"), Some(Kind::Pods));
        assert_eq!(kind("manifests"), Some(Kind::Manifests));
        assert_eq!(kind("ev"), Some(Kind::Events));
        assert_eq!(kind("deployments"), None);
    }
}
