//! `run NAME --image=IMAGE [-- ARGS]`: kubectl run's pod (built by
//! [`create::workloads::pod_object`](crate::cmd::create::workloads::pod_object)), created under
//! the `kubectl-run` field manager, or printed under `--dry-run=client`; `pod/NAME created`.
//! With `--expose`, a Service for the pod's port is made after it and printed before it. With
//! `--attach` (the default with `-i`) the pod is followed instead ([`attached`]).

mod attached;

use crate::cmd::create::service::SERVICE;
use crate::cmd::create::tree::Obj;
use crate::cmd::create::workloads::{POD, PodSpec, pod_object};
use crate::cmd::create::{self, Common};
use crate::cmd::dryrun::{self, DryRun};
use crate::cmd::podcmd;
use crate::errors::{CliError, Result};
use crate::factory::Factory;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NAME, then the container's arguments.
    pub args: Vec<String>,
    /// The container's arguments after `--`.
    #[arg(last = true)]
    pub rest: Vec<String>,
    /// The image for the container to run.
    #[arg(long)]
    pub image: Option<String>,
    /// The port that this container exposes.
    #[arg(long)]
    pub port: Option<String>,
    /// Environment variables to set in the container.
    #[arg(long)]
    pub env: Vec<String>,
    /// Comma separated labels to apply to the pod. Will override previous values.
    #[arg(short = 'l', long)]
    pub labels: Option<String>,
    /// Annotations to apply to the pod.
    #[arg(long)]
    pub annotations: Vec<String>,
    /// The restart policy for this Pod. Legal values [Always, OnFailure, Never].
    #[arg(long, default_value = "Always")]
    pub restart: String,
    /// If true and extra arguments are present, use them as the 'command' field in the container.
    #[arg(long)]
    pub command: bool,
    /// The image pull policy for the container.
    #[arg(long)]
    pub image_pull_policy: Option<String>,
    /// If true, run the container in privileged mode.
    #[arg(long)]
    pub privileged: bool,
    /// Keep stdin open on the container in the pod, even if nothing is attached.
    #[arg(short = 'i', long = "stdin")]
    pub stdin: bool,
    /// Allocate a TTY for the container in the pod.
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Wait for the pod to run, then attach to it (default: true with -i/--stdin).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", require_equals = true, action = clap::ArgAction::Set)]
    pub attach: Option<bool>,
    /// Delete the pod after it exits; only when attaching.
    #[arg(long)]
    pub rm: bool,
    /// Leave stdin open after the first attach completes.
    #[arg(long)]
    pub leave_stdin_open: bool,
    /// Create a ClusterIP service for the pod; requires `--port`.
    #[arg(long)]
    pub expose: bool,
    /// If true, suppress prompt messages.
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// How long to wait until the pod is running (and, attached, until it ends).
    #[arg(long, default_value = "1m0s")]
    pub pod_running_timeout: String,
    #[command(flatten)]
    pub dry_run: dryrun::Flag,
    /// Output format: json, yaml, name, jsonpath=….
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// Keep the configuration in the last-applied annotation, for a later `apply`.
    #[arg(long)]
    pub save_config: bool,
    /// Name of the manager used to track field ownership.
    #[arg(long, default_value = "kubectl-run")]
    pub field_manager: String,
}

fn usage(message: &str) -> CliError {
    CliError::Usage(format!("{message}\nSee 'kubectl run -h' for help and examples"))
}

/// `k=v,k2=v2` as kubectl's `ParseLabels`.
pub fn parse_labels(spec: &str) -> Result<Vec<(String, String)>> {
    spec.split(',')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.contains('=') => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::Usage(format!("unexpected label spec: {pair}"))),
        })
        .collect()
}

/// `--env NAME=value` as kubectl's `parseEnvs`.
pub fn parse_env(env: &str) -> Result<(String, String)> {
    let invalid = || CliError::Usage(format!("invalid env: {env}"));
    let (name, value) = env.split_once('=').ok_or_else(invalid)?;
    let mut chars = name.chars();
    let valid = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if !valid {
        return Err(invalid());
    }
    Ok((name.to_string(), value.to_string()))
}

/// The pod a command line asks for, checked as kubectl checks it.
pub fn pod_spec(a: &Args) -> Result<PodSpec> {
    if a.image.is_none() {
        return Err(crate::cmd::create::required_flags(&["image"]));
    }
    let all: Vec<String> = a.args.iter().chain(&a.rest).cloned().collect();
    let Some((name, args)) = all.split_first().filter(|_| !a.args.is_empty()) else {
        return Err(usage("NAME is required for run"));
    };
    podcmd::parse_running_timeout(&a.pod_running_timeout).map_err(|e| usage(&e))?;
    let image = a.image.clone().unwrap_or_default();
    if image.is_empty() {
        return Err(CliError::Usage("--image is required".into()));
    }
    if image.chars().any(char::is_whitespace) {
        return Err(CliError::Usage(format!(
            "Invalid image name \"{image}\": invalid reference format"
        )));
    }
    if a.tty && !a.stdin {
        return Err(usage("-i/--stdin is required for containers with -t/--tty=true"));
    }
    if a.expose && a.port.as_deref().is_none_or(str::is_empty) {
        return Err(usage("--port must be set when exposing a service"));
    }
    let restart = match a.restart.as_str() {
        "" if a.stdin => "OnFailure".to_string(),
        "" => "Always".to_string(),
        r @ ("Always" | "OnFailure" | "Never") => r.to_string(),
        other => return Err(usage(&format!("invalid restart policy: {other}"))),
    };
    if a.rm && !attaching(a) {
        return Err(usage("--rm should only be used for attached containers"));
    }
    if attaching(a) && DryRun::parse(&a.dry_run.dry_run)?.0 != DryRun::None {
        return Err(usage(
            "--dry-run=[server|client] can't be used with attached containers options (--attach, --stdin, or --tty)",
        ));
    }
    if let Some(p) = &a.image_pull_policy
        && !["Always", "IfNotPresent", "Never", ""].contains(&p.as_str())
    {
        return Err(usage(&format!(
            "invalid image pull policy: {p}. Valid values are: Always, IfNotPresent, Never"
        )));
    }
    let port = match a.port.as_deref().filter(|p| !p.is_empty()) {
        Some(p) => Some(p.parse::<i32>().map_err(|_| {
            CliError::Usage(format!("strconv.Atoi: parsing {p:?}: invalid syntax"))
        })?),
        None => None,
    };
    let labels = match a.labels.as_deref().filter(|l| !l.is_empty()) {
        Some(l) => parse_labels(l)?,
        None => Vec::new(),
    };
    let annotations = a
        .annotations
        .iter()
        .map(|s| {
            s.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| CliError::Usage(format!("invalid annotation spec: {s}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let env = a.env.iter().map(|e| parse_env(e)).collect::<Result<Vec<_>>>()?;
    Ok(PodSpec {
        name: name.clone(),
        image,
        labels,
        annotations,
        env,
        port,
        restart,
        args: args.to_vec(),
        command: a.command,
        image_pull_policy: a.image_pull_policy.clone().filter(|p| !p.is_empty()),
        privileged: a.privileged,
        stdin: a.stdin,
        tty: a.tty,
        leave_stdin_open: a.leave_stdin_open,
        ..PodSpec::default()
    })
}

/// Whether the pod is followed once made: `--attach`, which `-i` turns on unless it is given.
fn attaching(a: &Args) -> bool {
    a.attach.unwrap_or(a.stdin)
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let spec = pod_spec(&a)?;
    if attaching(&a) {
        return attached::run(f, &a, &spec).await;
    }
    let common = Common {
        dry_run: a.dry_run,
        output: a.output,
        save_config: a.save_config,
        field_manager: a.field_manager,
        validate: "strict".into(),
    };
    let pod = create::make(f, &common, POD, &spec.name, pod_object(&spec), None).await?;
    let mut errors = Vec::new();
    if a.expose {
        match create::make(f, &common, SERVICE, &spec.name, service_object(&spec), None).await {
            Ok(service) => {
                service.print()?;
                if service.is_yaml() {
                    // kubectl's own separator, then its YAML printer's before a second object.
                    println!("---\n---");
                }
            }
            Err(e) => errors.push(e),
        }
    }
    pod.print()?;
    crate::cmd::finish(errors)
}

/// `run --expose`'s Service, as kubectl's `ServiceGeneratorV2` makes it for `run`: the pod's
/// port as its port and target port, selecting the pod by its labels (`run=NAME` when none are
/// given), labelled only with the labels given.
pub fn service_object(spec: &PodSpec) -> Obj {
    let labels = || Obj::map(spec.labels.iter().map(|(k, v)| (k, v)));
    let selector =
        if spec.labels.is_empty() { Obj::map([("run", spec.name.as_str())]) } else { labels() };
    let given = (!spec.labels.is_empty()).then(labels);
    let port = spec.port.unwrap_or_default();
    let ports =
        vec![Obj::new().with("protocol", "TCP").with("port", port).with("targetPort", port)];
    SERVICE
        .head(create::metadata(&spec.name, None, given))
        .with("spec", Obj::new().with("ports", ports).with("selector", selector))
        .with("status", Obj::new().with("loadBalancer", Obj::new()))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cmd::create::tree::Node;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        a: Args,
    }

    fn spec(argv: &[&str]) -> Result<PodSpec> {
        let cli = Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied())).unwrap();
        pod_spec(&cli.a)
    }

    #[test]
    fn arguments_after_the_name_are_the_containers() {
        let s = spec(&["p", "--image=nginx", "--", "sleep", "1"]).unwrap();
        assert_eq!((s.name.as_str(), s.args.clone()), ("p", vec!["sleep".into(), "1".into()]));
        let s = spec(&["p", "--image=nginx", "--command", "--restart=Never", "--", "a"]).unwrap();
        assert!(s.command);
        assert_eq!(s.restart, "Never");
    }

    #[test]
    fn the_exposing_service_selects_the_pods_labels_on_its_port() {
        let s = spec(&["web", "--image=x", "--port=8080", "--expose"]).unwrap();
        let v = Node::Obj(service_object(&s)).to_value();
        assert_eq!(v["metadata"], serde_json::json!({"name": "web"}));
        assert_eq!(v["spec"]["selector"], serde_json::json!({"run": "web"}));
        assert_eq!(
            v["spec"]["ports"],
            serde_json::json!([{"protocol": "TCP", "port": 8080, "targetPort": 8080}])
        );
        let s = spec(&["web", "--image=x", "--port=80", "--expose", "-l", "app=w"]).unwrap();
        let v = Node::Obj(service_object(&s)).to_value();
        assert_eq!(v["metadata"]["labels"], serde_json::json!({"app": "w"}));
        assert_eq!(v["spec"]["selector"], serde_json::json!({"app": "w"}));
    }

    #[test]
    fn stdin_attaches_and_an_empty_restart_policy_follows_it() {
        let s = spec(&["p", "--image=x", "-i", "--rm", "--restart="]).unwrap();
        assert_eq!((s.stdin, s.restart.as_str()), (true, "OnFailure"));
        let s = spec(&["p", "--image=x", "--restart="]).unwrap();
        assert_eq!((s.stdin, s.restart.as_str()), (false, "Always"));
        let s = spec(&["p", "--image=x", "--attach", "--rm", "-i", "-t", "--leave-stdin-open"]);
        let s = s.unwrap();
        assert!(s.stdin && s.tty && s.leave_stdin_open);
    }

    #[test]
    fn bad_input_is_refused_as_kubectl_words_it() {
        let err = |argv: &[&str]| spec(argv).unwrap_err().to_string();
        assert_eq!(
            err(&["--image=x"]),
            "error: NAME is required for run\nSee 'kubectl run -h' for help and examples"
        );
        assert_eq!(err(&["p"]), "error: required flag(s) \"image\" not set");
        assert_eq!(err(&["p", "--image="]), "error: --image is required");
        assert_eq!(
            err(&["p", "--image=x", "--restart=Sometimes"]),
            "error: invalid restart policy: Sometimes\nSee 'kubectl run -h' for help and examples"
        );
        assert_eq!(err(&["p", "--image=x", "--env=NOEQUALS"]), "error: invalid env: NOEQUALS");
        assert_eq!(err(&["p", "--image=x", "--env=1A=b"]), "error: invalid env: 1A=b");
        assert_eq!(err(&["p", "--image=x", "--labels=a"]), "error: unexpected label spec: a");
        let see = "\nSee 'kubectl run -h' for help and examples";
        assert_eq!(
            err(&["p", "--image=x", "--expose"]),
            format!("error: --port must be set when exposing a service{see}")
        );
        assert_eq!(
            err(&["p", "--image=x", "-t"]),
            format!("error: -i/--stdin is required for containers with -t/--tty=true{see}")
        );
        assert_eq!(
            err(&["p", "--image=x", "--rm"]),
            format!("error: --rm should only be used for attached containers{see}")
        );
        assert_eq!(
            err(&["p", "--image=x", "-i", "--attach=false", "--rm"]),
            format!("error: --rm should only be used for attached containers{see}")
        );
        assert_eq!(
            err(&["p", "--image=x", "-i", "--dry-run=client"]),
            format!(
                "error: --dry-run=[server|client] can't be used with attached containers options (--attach, --stdin, or --tty){see}"
            )
        );
        assert_eq!(
            err(&["p", "--image=x", "-i", "--pod-running-timeout=0s"]),
            format!("error: --pod-running-timeout must be higher than zero{see}")
        );
        assert_eq!(
            err(&["p", "--image=x", "--port=http"]),
            "error: strconv.Atoi: parsing \"http\": invalid syntax"
        );
    }
}
