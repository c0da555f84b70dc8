//! `rollout pause`, `resume` and `restart`: one strategic merge patch each (`spec.paused`, or
//! the `kubectl.kubernetes.io/restartedAt` template annotation that makes the controller roll
//! every pod), sent as the `kubectl-rollout` field manager, as kubectl's object pausers,
//! resumers and restarters compute them.

use http::Method;
use serde_json::{Value, json};

use super::{Objects, Workload};
use crate::builder::Info;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

/// The annotation a restart stamps on the pod template.
pub const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Pause,
    Resume,
    Restart,
}

impl Action {
    fn done(self) -> &'static str {
        match self {
            Action::Pause => "paused",
            Action::Resume => "resumed",
            Action::Restart => "restarted",
        }
    }

    /// The patch for `o` (a `w`, or no workload at all), or why there is none; `now` is the
    /// restart time as Go's RFC 3339.
    pub fn patch(
        self,
        w: Option<Workload>,
        o: &Value,
        now: &str,
    ) -> std::result::Result<Value, String> {
        let paused = o["spec"]["paused"] == true;
        match (self, w) {
            (Action::Pause, Some(Workload::Deployment)) if paused => {
                Err("is already paused".into())
            }
            (Action::Pause, Some(Workload::Deployment)) => Ok(json!({"spec": {"paused": true}})),
            (Action::Pause, _) => Err("pausing is not supported".into()),
            (Action::Resume, Some(Workload::Deployment)) if !paused => Err("is not paused".into()),
            (Action::Resume, Some(Workload::Deployment)) => Ok(json!({"spec": {"paused": null}})),
            (Action::Resume, _) => Err("resuming is not supported".into()),
            (Action::Restart, Some(Workload::Deployment)) if paused => {
                Err("can't restart paused deployment (run rollout resume first)".into())
            }
            (Action::Restart, Some(_)) => Ok(json!({"spec": {"template": {"metadata": {
                "annotations": {RESTARTED_AT: now}}}}})),
            (Action::Restart, None) => Err("restarting is not supported".into()),
        }
    }
}

pub async fn run(f: &Factory, action: Action, o: Objects) -> Result<()> {
    let (infos, mut errors) = super::infos(f, &o).await?;
    if infos.is_empty() && errors.is_empty() {
        eprintln!("No resources found in {} namespace.", f.namespace().await?);
        return Ok(());
    }
    let now = rfc3339_now();
    for info in infos {
        match act(f, action, &info, &now).await {
            Ok(()) => println!("{} {}", info.kind_name(), action.done()),
            Err(e) => errors.push(e),
        }
    }
    crate::cmd::finish(errors)
}

async fn act(f: &Factory, action: Action, info: &Info, now: &str) -> Result<()> {
    let object = super::latest(f, info).await?;
    let patch = action.patch(Workload::of(info), &object, now).map_err(|why| {
        CliError::Usage(format!("{} {:?} {why}", info.resource.group_resource(), info.name))
    })?;
    let body = serde_json::to_vec(&patch).map_err(|e| CliError::Usage(e.to_string()))?;
    let url = format!("{}?fieldManager=kubectl-rollout", info.url());
    f.send(
        Method::PATCH,
        &url,
        Some((body, "application/strategic-merge-patch+json")),
        "application/json",
    )
    .await
    .map_err(|e| {
        let reason = e.status().map_or_else(|| e.to_string(), |s| s.message.clone());
        CliError::Usage(format!("failed to patch: {reason}"))
    })?;
    Ok(())
}

/// Now as Go's `time.Now().Format(time.RFC3339)` in the local zone (`Z` for UTC).
fn rfc3339_now() -> String {
    let now = jiff::Zoned::now();
    if now.offset().seconds() == 0 {
        now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        now.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2026-11-26T10:00:00Z";

    #[test]
    fn pausing_and_resuming_a_deployment_flip_spec_paused() {
        let running = json!({"spec": {}});
        let paused = json!({"spec": {"paused": true}});
        let d = Some(Workload::Deployment);
        assert_eq!(Action::Pause.patch(d, &running, NOW), Ok(json!({"spec": {"paused": true}})));
        assert_eq!(Action::Pause.patch(d, &paused, NOW), Err("is already paused".into()));
        assert_eq!(Action::Resume.patch(d, &paused, NOW), Ok(json!({"spec": {"paused": null}})));
        assert_eq!(Action::Resume.patch(d, &running, NOW), Err("is not paused".into()));
        assert_eq!(
            Action::Pause.patch(Some(Workload::DaemonSet), &running, NOW),
            Err("pausing is not supported".into())
        );
    }

    #[test]
    fn a_restart_stamps_the_template_unless_the_deployment_is_paused() {
        let want =
            json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: NOW}}}}});
        for w in [Workload::Deployment, Workload::DaemonSet, Workload::StatefulSet] {
            assert_eq!(Action::Restart.patch(Some(w), &json!({}), NOW), Ok(want.clone()));
        }
        assert_eq!(
            Action::Restart.patch(
                Some(Workload::Deployment),
                &json!({"spec": {"paused": true}}),
                NOW
            ),
            Err("can't restart paused deployment (run rollout resume first)".into())
        );
        assert_eq!(
            Action::Restart.patch(None, &json!({}), NOW),
            Err("restarting is not supported".into())
        );
    }

    #[test]
    fn the_restart_time_is_go_rfc3339() {
        let t = rfc3339_now();
        assert_eq!(t.len(), if t.ends_with('Z') { 20 } else { 25 }, "{t}");
    }
}
