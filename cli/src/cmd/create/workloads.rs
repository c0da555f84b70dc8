//! `create deployment`, `create job` and `create cronjob`: a pod template of one container per
//! image, as kubectl's generators build them (field order, empty structs and all); and the pod
//! of `run` ([`pod_object`]).

use super::tree::{Node, Obj};
use super::{Common, Kind, emit, enforced_namespace, metadata, one_name};
use crate::errors::{CliError, Result};
use crate::factory::Factory;

pub const DEPLOYMENT: Kind = Kind {
    group: "apps",
    version: "v1",
    plural: "deployments",
    kind: "Deployment",
    namespaced: true,
};
pub const JOB: Kind =
    Kind { group: "batch", version: "v1", plural: "jobs", kind: "Job", namespaced: true };
pub const POD: Kind =
    Kind { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true };
pub const CRONJOB: Kind =
    Kind { group: "batch", version: "v1", plural: "cronjobs", kind: "CronJob", namespaced: true };

#[derive(Debug, clap::Args)]
pub struct DeploymentArgs {
    /// NAME
    pub name: Vec<String>,
    /// Image names to run. A deployment can have multiple images set for multi-container pod.
    #[arg(long)]
    pub image: Vec<String>,
    /// Number of replicas to create. Default is 1.
    #[arg(short = 'r', long, default_value_t = 1, allow_negative_numbers = true)]
    pub replicas: i32,
    /// The containerPort that this deployment exposes.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub port: i32,
    /// The command the containers run (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct JobArgs {
    /// NAME
    pub name: Vec<String>,
    /// Image name to run.
    #[arg(long)]
    pub image: Option<String>,
    /// The name of the resource to create a Job from (only cronjob is supported).
    #[arg(long)]
    pub from: Option<String>,
    /// The command the container runs (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, clap::Args)]
pub struct CronJobArgs {
    /// NAME
    pub name: Vec<String>,
    /// Image name to run.
    #[arg(long)]
    pub image: Option<String>,
    /// A schedule in the Cron format the job should be run with.
    #[arg(long)]
    pub schedule: Option<String>,
    /// job's restart policy. supported values: OnFailure, Never
    #[arg(long, default_value = "OnFailure")]
    pub restart: String,
    /// The command the container runs (after `--`).
    #[arg(last = true)]
    pub command: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

/// A container's name from its image as kubectl derives it: the last path segment without its
/// tag or digest; `_` and `.` replaced by `-` and a random suffix added, as kubectl does.
pub fn container_name(image: &str) -> String {
    let last = image.rsplit('/').next().unwrap_or(image);
    let name = last.split(':').next().unwrap_or(last);
    let name = name.split('@').next().unwrap_or(name);
    if name.contains(['_', '.']) {
        format!("{}-{}", name.replace(['_', '.'], "-"), random_suffix())
    } else {
        name.to_string()
    }
}

/// Five characters of Kubernetes' random alphabet (no vowels, no confusable digits).
fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id());
    (0..5)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ALPHABET[((seed >> 33) % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

/// A container as the generators build it: name, image, command, ports, then empty resources.
pub fn container(name: &str, image: &str, command: &[String], port: Option<i32>) -> Obj {
    let mut c = Obj::new().with("name", name).with("image", image);
    if !command.is_empty() {
        c.set("command", command.to_vec());
    }
    if let Some(p) = port {
        c.set("ports", vec![Obj::new().with("containerPort", p)]);
    }
    c.with("resources", Obj::new())
}

fn template_meta(labels: Option<Obj>) -> Obj {
    let mut m = Obj::new();
    if let Some(l) = labels {
        m.set("labels", l);
    }
    m
}

pub fn deployment_object(
    name: &str,
    namespace: Option<&str>,
    images: &[String],
    replicas: i32,
    port: i32,
    command: &[String],
) -> Obj {
    let labels = Obj::map([("app", name)]);
    let containers: Vec<Node> = images
        .iter()
        .enumerate()
        .map(|(i, image)| {
            let port = (i == 0 && port >= 0).then_some(port);
            container(&container_name(image), image, command, port).into()
        })
        .collect();
    let spec = Obj::new()
        .with("replicas", replicas)
        .with("selector", Obj::new().with("matchLabels", labels.clone()))
        .with(
            "template",
            Obj::new()
                .with("metadata", template_meta(Some(labels.clone())))
                .with("spec", Obj::new().with("containers", containers)),
        )
        .with("strategy", Obj::new());
    DEPLOYMENT
        .head(metadata(name, namespace, Some(labels)))
        .with("spec", spec)
        .with("status", Obj::new())
}

pub async fn deployment(f: &Factory, a: DeploymentArgs) -> Result<()> {
    if a.image.is_empty() {
        return Err(super::required_flags(&["image"]));
    }
    let name = one_name(&a.name, "deployment")?;
    if a.image.len() > 1 && !a.command.is_empty() {
        return Err(CliError::Usage("cannot specify multiple --image options and command".into()));
    }
    let ns = enforced_namespace(f).await?;
    let object = deployment_object(&name, ns.as_deref(), &a.image, a.replicas, a.port, &a.command);
    emit(f, &a.common, DEPLOYMENT, &name, object, Some("failed to create deployment: ")).await
}

pub fn job_object(name: &str, namespace: Option<&str>, image: &str, command: &[String]) -> Obj {
    let spec = Obj::new().with("template", pod_template(name, image, command, "Never"));
    JOB.head(metadata(name, namespace, None)).with("spec", spec).with("status", Obj::new())
}

fn pod_template(name: &str, image: &str, command: &[String], restart: &str) -> Obj {
    Obj::new().with("metadata", template_meta(None)).with(
        "spec",
        Obj::new()
            .with("containers", vec![container(name, image, command, None)])
            .with("restartPolicy", restart),
    )
}

/// A Job from a CronJob's template, as `create job --from=cronjob/NAME` builds it.
pub fn job_from_cronjob(name: &str, namespace: Option<&str>, cronjob: &serde_json::Value) -> Obj {
    let template = &cronjob["spec"]["jobTemplate"];
    let mut annotations = vec![("cronjob.kubernetes.io/instantiate".to_string(), "manual".into())];
    if let Some(a) = template["metadata"]["annotations"].as_object() {
        annotations
            .extend(a.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())));
    }
    let mut meta = metadata(name, namespace, None);
    if let Some(l) = template["metadata"]["labels"].as_object() {
        meta.set(
            "labels",
            Obj::map(l.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))),
        );
    }
    meta.set("annotations", Obj::map(annotations));
    meta.set(
        "ownerReferences",
        vec![
            Obj::new()
                .with("apiVersion", "batch/v1")
                .with("kind", "CronJob")
                .with("name", cronjob["metadata"]["name"].as_str().unwrap_or(""))
                .with("uid", cronjob["metadata"]["uid"].as_str().unwrap_or(""))
                .with("controller", true),
        ],
    );
    JOB.head(meta).with("spec", node_of(&template["spec"])).with("status", Obj::new())
}

/// A server's JSON as a node (its keys sorted: `-o json` of it differs from kubectl's order).
fn node_of(v: &serde_json::Value) -> Node {
    use serde_json::Value;
    match v {
        Value::Null => Obj::new().into(),
        Value::Bool(b) => Node::Bool(*b),
        Value::Number(n) => Node::Int(n.as_i64().unwrap_or(0)),
        Value::String(s) => Node::Str(s.clone()),
        Value::Array(a) => Node::List(a.iter().map(node_of).collect()),
        Value::Object(o) => {
            Node::Obj(Obj(o.iter().map(|(k, v)| (k.clone(), node_of(v))).collect()))
        }
    }
}

pub async fn job(f: &Factory, a: JobArgs) -> Result<()> {
    let name = one_name(&a.name, "job")?;
    if a.image.is_some() == a.from.is_some() {
        return Err(CliError::Usage("either --image or --from must be specified".into()));
    }
    if !a.command.is_empty() && a.from.is_some() {
        return Err(CliError::Usage("cannot specify --from and command".into()));
    }
    let object = match (&a.image, &a.from) {
        (Some(image), _) => {
            let ns = enforced_namespace(f).await?;
            job_object(&name, ns.as_deref(), image, &a.command)
        }
        (None, Some(from)) => {
            let (resource, source) = from.split_once('/').unwrap_or((from.as_str(), ""));
            let r = f.resource(resource).await?;
            if r.group != "batch" || r.kind != "CronJob" {
                // kubectl reads the object, then refuses its Go type.
                return Err(CliError::Usage(format!(
                    "unknown object type *{}.{}",
                    r.version, r.kind
                )));
            }
            let ns = f.namespace().await?;
            let cronjob = f.get_json(&cronjob_path(&ns, source)).await?;
            job_from_cronjob(&name, enforced_namespace(f).await?.as_deref(), &cronjob)
        }
        (None, None) => {
            return Err(CliError::Usage("either --image or --from must be specified".into()));
        }
    };
    emit(f, &a.common, JOB, &name, object, Some("failed to create job: ")).await
}

fn cronjob_path(namespace: &str, name: &str) -> String {
    format!("/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}")
}

pub fn cronjob_object(
    name: &str,
    namespace: Option<&str>,
    image: &str,
    schedule: &str,
    restart: &str,
    command: &[String],
) -> Obj {
    let job_template = Obj::new()
        .with("metadata", Obj::new().with("name", name))
        .with("spec", Obj::new().with("template", pod_template(name, image, command, restart)));
    let spec = Obj::new().with("schedule", schedule).with("jobTemplate", job_template);
    CRONJOB.head(metadata(name, namespace, None)).with("spec", spec).with("status", Obj::new())
}

pub async fn cronjob(f: &Factory, a: CronJobArgs) -> Result<()> {
    let (image, schedule) = match (a.image.as_deref(), a.schedule.as_deref()) {
        (Some(i), Some(s)) => (i, s),
        (i, s) => {
            let missing = [("image", i.is_none()), ("schedule", s.is_none())];
            let names: Vec<&str> = missing.iter().filter(|m| m.1).map(|m| m.0).collect();
            return Err(super::required_flags(&names));
        }
    };
    let name = one_name(&a.name, "cronjob")?;
    let ns = enforced_namespace(f).await?;
    let object = cronjob_object(&name, ns.as_deref(), image, schedule, &a.restart, &a.command);
    emit(f, &a.common, CRONJOB, &name, object, Some("failed to create cronjob: ")).await
}

/// What `run` builds a pod from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodSpec {
    pub name: String,
    pub image: String,
    /// `--labels`; `run=NAME` when empty.
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    pub port: Option<i32>,
    /// `Always`, `OnFailure` or `Never`.
    pub restart: String,
    /// The arguments after `--`: the command with `--command`, else the container's args.
    pub args: Vec<String>,
    pub command: bool,
    pub image_pull_policy: Option<String>,
    pub stdin: bool,
    pub tty: bool,
    pub leave_stdin_open: bool,
    pub service_account: Option<String>,
    pub privileged: bool,
}

/// kubectl run's pod (its `BasicPod` generator): one container named as the pod.
pub fn pod_object(p: &PodSpec) -> Obj {
    let labels = if p.labels.is_empty() {
        Obj::map([("run", p.name.as_str())])
    } else {
        Obj::map(p.labels.iter().map(|(k, v)| (k, v)))
    };
    let mut meta = metadata(&p.name, None, Some(labels));
    if !p.annotations.is_empty() {
        meta.set("annotations", Obj::map(p.annotations.iter().map(|(k, v)| (k, v))));
    }
    let mut c = Obj::new().with("name", p.name.as_str()).with("image", p.image.as_str());
    if !p.args.is_empty() {
        c.set(if p.command { "command" } else { "args" }, p.args.clone());
    }
    if let Some(port) = p.port {
        c.set("ports", vec![Obj::new().with("containerPort", port)]);
    }
    if !p.env.is_empty() {
        let env: Vec<Node> = p
            .env
            .iter()
            .map(|(k, v)| Obj::new().with("name", k.as_str()).with("value", v.as_str()).into())
            .collect();
        c.set("env", env);
    }
    c.set("resources", Obj::new());
    if let Some(policy) = &p.image_pull_policy {
        c.set("imagePullPolicy", policy.as_str());
    }
    if p.privileged {
        c.set("securityContext", Obj::new().with("privileged", true));
    }
    if p.stdin {
        c.set("stdin", true);
        if !p.leave_stdin_open {
            c.set("stdinOnce", true);
        }
    }
    if p.tty {
        c.set("tty", true);
    }
    let mut spec = Obj::new().with("containers", vec![c]).with("restartPolicy", p.restart.as_str());
    spec.set("dnsPolicy", "ClusterFirst");
    if let Some(sa) = p.service_account.as_deref().filter(|s| !s.is_empty()) {
        spec.set("serviceAccountName", sa);
    }
    POD.head(meta).with("spec", spec).with("status", Obj::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_deployment_is_kubectls_in_field_order() {
        let d = deployment_object("web", None, &s(&["nginx"]), 2, 80, &s(&["sleep", "10"]));
        assert_eq!(
            Node::Obj(d).compact(),
            r#"{"kind":"Deployment","apiVersion":"apps/v1","metadata":{"name":"web","labels":{"app":"web"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx","command":["sleep","10"],"ports":[{"containerPort":80}],"resources":{}}]}},"strategy":{}},"status":{}}"#
        );
    }

    #[test]
    fn container_names_drop_registry_tag_and_digest() {
        assert_eq!(container_name("registry.k8s.io/pause:3.9"), "pause");
        assert_eq!(container_name("busybox@sha256:abc"), "busybox");
        let n = container_name("my_app.v2");
        assert!(n.starts_with("my-app-v2-") && n.len() == "my-app-v2-".len() + 5, "{n}");
    }

    #[test]
    fn a_job_never_restarts_and_runs_the_command() {
        let j = job_object("j", Some("ns"), "busybox", &s(&["echo", "hi"]));
        assert_eq!(
            Node::Obj(j).compact(),
            r#"{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j","namespace":"ns"},"spec":{"template":{"metadata":{},"spec":{"containers":[{"name":"j","image":"busybox","command":["echo","hi"],"resources":{}}],"restartPolicy":"Never"}}},"status":{}}"#
        );
    }

    #[test]
    fn a_cronjob_names_its_job_template() {
        let c = cronjob_object("cj", None, "busybox", "*/1 * * * *", "OnFailure", &s(&["echo"]));
        assert_eq!(
            Node::Obj(c).compact(),
            r#"{"kind":"CronJob","apiVersion":"batch/v1","metadata":{"name":"cj"},"spec":{"schedule":"*/1 * * * *","jobTemplate":{"metadata":{"name":"cj"},"spec":{"template":{"metadata":{},"spec":{"containers":[{"name":"cj","image":"busybox","command":["echo"],"resources":{}}],"restartPolicy":"OnFailure"}}}}},"status":{}}"#
        );
    }

    #[test]
    fn a_job_from_a_cronjob_is_owned_by_it_and_marked_manual() {
        let cj = serde_json::json!({"metadata": {"name": "cj", "uid": "u1"},
            "spec": {"jobTemplate": {"metadata": {"labels": {"a": "b"}}, "spec": {"backoffLimit": 2}}}});
        let v = Node::Obj(job_from_cronjob("j", None, &cj)).to_value();
        assert_eq!(v["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"], "manual");
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(v["spec"]["backoffLimit"], 2);
    }

    #[test]
    fn a_run_pod_is_labelled_run_name_and_never_restarts_when_asked() {
        let p = PodSpec {
            name: "p".into(),
            image: "nginx".into(),
            restart: "Never".into(),
            args: s(&["a", "b"]),
            port: Some(80),
            env: vec![("A".into(), "1".into())],
            ..PodSpec::default()
        };
        assert_eq!(
            Node::Obj(pod_object(&p)).compact(),
            r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"run":"p"}},"spec":{"containers":[{"name":"p","image":"nginx","args":["a","b"],"ports":[{"containerPort":80}],"env":[{"name":"A","value":"1"}],"resources":{}}],"restartPolicy":"Never","dnsPolicy":"ClusterFirst"},"status":{}}"#
        );
        let cmd = PodSpec { command: true, labels: vec![("x".into(), "y".into())], ..p };
        let v = Node::Obj(pod_object(&cmd)).to_value();
        assert_eq!(v["spec"]["containers"][0]["command"][1], "b");
        assert_eq!(v["metadata"]["labels"], serde_json::json!({"x": "y"}));
    }
}
