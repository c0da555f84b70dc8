//! `wait`: each named object watched until every `--for` condition holds, in order —
//! `condition=NAME[=VALUE]` (a `status.conditions` entry, not older than the spec),
//! `jsonpath='{…}'[=VALUE]`, `delete`, `create` — printing `<kind>/<name> condition met` for
//! each, within `--timeout` (30 s; 0: check once; negative: a week), as kubectl's `wait`.

use std::time::Duration;

use serde_json::Value;

use crate::builder::{self, Info, Selection};
use crate::errors::{CliError, Result};
use crate::factory::Factory;
use crate::printers::custom_columns::relaxed;
use crate::printers::jsonpath::{Template, eval::V, fmt};
use crate::watch::{self, Observation, Step, TIMED_OUT};

/// A negative `--timeout`: kubectl waits a week.
const A_WEEK: Duration = Duration::from_secs(168 * 3600);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// TYPE NAME..., TYPE/NAME..., or TYPE with -l / --all.
    pub args: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub filenames: Vec<String>,
    #[arg(short = 'R', long)]
    pub recursive: bool,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[arg(long)]
    pub field_selector: Option<String>,
    #[arg(long)]
    pub all: bool,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// create, delete, condition=NAME[=VALUE] or jsonpath='{…}'[=VALUE]; several are ANDed.
    #[arg(long = "for")]
    pub conditions: Vec<String>,
    /// How long to wait (0: check once; negative: a week).
    #[arg(long, default_value = "30s", allow_hyphen_values = true, value_parser = parse_timeout)]
    pub timeout: Timeout,
    /// Output format: name prints `<kind>/<name>` only.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
}

/// `--timeout`: check once, or wait this long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    Once,
    For(Duration),
}

fn parse_timeout(s: &str) -> std::result::Result<Timeout, String> {
    let invalid = || format!("time: invalid duration {s:?}");
    if let Some(rest) = s.strip_prefix('-') {
        return crate::duration::parse(rest).map(|_| Timeout::For(A_WEEK)).ok_or_else(invalid);
    }
    match s {
        "0" => Ok(Timeout::Once),
        _ => match crate::duration::parse(s).ok_or_else(invalid)? {
            d if d.is_zero() => Ok(Timeout::Once),
            d => Ok(Timeout::For(d)),
        },
    }
}

/// One `--for`.
#[derive(Debug, Clone, PartialEq)]
pub enum Condition {
    Create,
    Delete,
    /// A `status.conditions` entry of this type with this status (compared case-insensitively).
    Status {
        name: String,
        value: String,
    },
    /// A JSONPath; with a value, its single result must print as it; without, it must exist.
    JsonPath {
        template: Template,
        value: Option<String>,
    },
}

/// The `--for` flags, as kubectl's `conditionFuncsFor` reads them.
pub fn conditions(fors: &[String]) -> Result<Vec<Condition>> {
    if fors.is_empty() {
        return Err(CliError::Usage("unrecognized condition: \"\"".into()));
    }
    fors.iter().map(|c| condition(c)).collect()
}

fn condition(c: &str) -> Result<Condition> {
    let lower = c.to_lowercase();
    if lower == "delete" {
        return Ok(Condition::Delete);
    }
    if lower == "create" {
        return Ok(Condition::Create);
    }
    if let Some(rest) = c.strip_prefix("condition=") {
        let (name, value) = rest.split_once('=').unwrap_or((rest, "true"));
        return Ok(Condition::Status { name: name.into(), value: value.into() });
    }
    if let Some(rest) = c.strip_prefix("jsonpath=") {
        return json_path(rest);
    }
    Err(CliError::Usage(format!("unrecognized condition: {c:?}")))
}

fn json_path(input: &str) -> Result<Condition> {
    let parts = split_on_equals(input);
    if parts.len() > 2 {
        return Err(CliError::Usage(
            "jsonpath wait format must be --for=jsonpath='{.status.readyReplicas}'=3 or --for=jsonpath='{.status.readyReplicas}'".into(),
        ));
    }
    let expression = relaxed(&parts[0]).map_err(CliError::Columns)?;
    let value = match parts.get(1) {
        None => None,
        Some(v) => {
            let v = v.trim_matches(['\'', '"']);
            if v.is_empty() {
                return Err(CliError::Usage(
                    "jsonpath wait has to have a value after equal sign, like --for=jsonpath='{.status.readyReplicas}'=3".into(),
                ));
            }
            Some(v.to_string())
        }
    };
    if expression.is_empty() {
        return Err(CliError::Usage("jsonpath expression cannot be empty".into()));
    }
    Ok(Condition::JsonPath { template: Template::parse(&expression)?, value })
}

/// Splits on `=` but not on `==` (a filter's comparison).
fn split_on_equals(input: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = input.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '=' {
            if chars.peek() == Some(&'=') {
                chars.next();
                cur.push_str("==");
                continue;
            }
            out.push(std::mem::take(&mut cur));
            continue;
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

impl Condition {
    /// Whether the object, as it is now, meets the condition (`Delete` and `Create` are
    /// decided by the object's presence, not here).
    pub fn holds(&self, o: &Value) -> std::result::Result<bool, String> {
        match self {
            Condition::Create | Condition::Delete => Ok(false),
            Condition::Status { name, value } => Ok(status_condition(o, name, value)),
            Condition::JsonPath { template, value } => {
                let groups = template.find(o, true)?;
                let Some(first) = groups.first().filter(|g| !g.is_empty()) else {
                    return Ok(false);
                };
                if groups.len() > 1 {
                    return Err("given jsonpath expression matches more than one list".into());
                }
                if first.len() > 1 {
                    return Err("given jsonpath expression matches more than one value".into());
                }
                let Some(want) = value else { return Ok(true) };
                if matches!(first[0], V::J(Value::Object(_) | Value::Array(_))) {
                    return Err(
                        "jsonpath leads to a nested object or list which is not supported".into()
                    );
                }
                Ok(fmt::go_v(&first[0]).trim() == want.trim())
            }
        }
    }
}

/// kubectl's `checkCondition`: the first condition of that type decides, unless it (or the
/// status) was observed for an older generation.
fn status_condition(o: &Value, name: &str, value: &str) -> bool {
    let Some(conditions) = o["status"]["conditions"].as_array() else { return false };
    let generation = o["metadata"]["generation"].as_i64();
    for c in conditions {
        let (Some(t), Some(status)) = (c["type"].as_str(), c["status"].as_str()) else {
            continue;
        };
        if !t.eq_ignore_ascii_case(name) {
            continue;
        }
        if let Some(g) = generation {
            let observed = c["observedGeneration"]
                .as_i64()
                .or_else(|| o["status"]["observedGeneration"].as_i64());
            if observed.is_some_and(|og| og < g) {
                return false;
            }
        }
        return status.eq_ignore_ascii_case(value);
    }
    false
}

pub async fn run(f: &Factory, a: Args) -> Result<()> {
    let conditions = conditions(&a.conditions)?;
    let sel = Selection {
        filenames: a.filenames.clone(),
        recursive: a.recursive,
        args: a.args.clone(),
        selector: a.selector.clone(),
        field_selector: a.field_selector.clone(),
        all: a.all,
        all_namespaces: a.all_namespaces,
    };
    let budget = match a.timeout {
        Timeout::Once => None,
        Timeout::For(d) => Some(d),
    };
    let deadline = budget.map(|d| tokio::time::Instant::now() + d);
    if conditions.contains(&Condition::Create) {
        wait_created(f, &sel, budget).await?;
    }
    let for_delete = conditions.contains(&Condition::Delete);
    let (infos, errors) = builder::infos(f, &sel).await?;
    let errors: Vec<CliError> =
        errors.into_iter().filter(|e| !(for_delete && e.is_not_found())).collect();
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut visited = 0;
    for info in infos {
        // kubectl's builder fetches each object first; a missing one is an error, or for
        // `--for=delete` not visited at all.
        match f.get_json(&info.url()).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() && for_delete => continue,
            Err(e) => return Err(e),
        }
        visited += 1;
        for c in &conditions {
            let remaining =
                deadline.map(|d| d.saturating_duration_since(tokio::time::Instant::now()));
            wait_one(f, &info, c, remaining).await?;
            match a.output.as_deref() {
                Some("name") => println!("{}", info.kind_name()),
                _ => println!("{} condition met", info.kind_name()),
            }
        }
    }
    if visited == 0 && !for_delete {
        return Err(CliError::Usage("no matching resources found".into()));
    }
    Ok(())
}

/// `--for=create`: the selection polled every 500 ms until it names something.
async fn wait_created(f: &Factory, sel: &Selection, budget: Option<Duration>) -> Result<()> {
    let poll = async {
        loop {
            let (infos, errors) = builder::infos(f, sel).await?;
            if let Some(e) = errors.into_iter().find(|e| !e.is_not_found()) {
                return Err(e);
            }
            let mut present = false;
            for info in &infos {
                match f.get_json(&info.url()).await {
                    Ok(_) => present = true,
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
            }
            if present {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    watch::bounded(Some(budget.unwrap_or(Duration::ZERO)), poll)
        .await
        .map_err(|_| CliError::Usage(TIMED_OUT.into()))?
}

/// One condition on one object; `remaining` `None` checks once.
async fn wait_one(
    f: &Factory,
    info: &Info,
    c: &Condition,
    remaining: Option<Duration>,
) -> Result<()> {
    // kubectl names the object here by its resource (`deployments/web`), not its kind.
    let not_met =
        || CliError::Usage(format!("condition not met for {}/{}", info.resource.plural, info.name));
    let timed_out =
        || CliError::Usage(format!("{TIMED_OUT} on {}/{}", info.resource.plural, info.name));
    if *c == Condition::Create {
        return Ok(());
    }
    let Some(remaining) = remaining else {
        // Checked once, against the object as it is now.
        let now = match f.get_json(&info.url()).await {
            Ok(o) => Some(o),
            Err(e) if e.is_not_found() && *c == Condition::Delete => None,
            Err(e) => return Err(e),
        };
        return match (c, now) {
            (Condition::Delete, None) => Ok(()),
            (_, Some(o)) if c.holds(&o).map_err(CliError::Usage)? => Ok(()),
            _ => Err(not_met()),
        };
    };
    if remaining.is_zero() {
        return Err(timed_out());
    }
    let follow = watch::until(f, info, |o| match (c, o) {
        (Condition::Delete, Observation::Listed(None) | Observation::Deleted(_)) => {
            Ok(Step::Done(()))
        }
        (Condition::Delete, _) => Ok(Step::Continue),
        (_, Observation::Listed(None)) => {
            Err(CliError::not_found(&info.resource.group_resource(), &info.name))
        }
        (_, Observation::Deleted(_)) => Ok(Step::Continue),
        (_, Observation::Listed(Some(o)) | Observation::Changed(o)) => {
            if c.holds(&o).map_err(CliError::Usage)? {
                Ok(Step::Done(()))
            } else {
                Ok(Step::Continue)
            }
        }
    });
    watch::bounded(Some(remaining), follow).await.map_err(|_| timed_out())?
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn for_flags_parse_as_kubectl_reads_them() {
        let c = |s: &str| condition(s).map_err(|e| e.to_string());
        assert_eq!(c("Delete").unwrap(), Condition::Delete);
        assert_eq!(
            c("condition=Ready").unwrap(),
            Condition::Status { name: "Ready".into(), value: "true".into() }
        );
        assert_eq!(
            c("condition=ContainersReady=False").unwrap(),
            Condition::Status { name: "ContainersReady".into(), value: "False".into() }
        );
        assert_eq!(c("ready").unwrap_err(), "error: unrecognized condition: \"ready\"");
        assert_eq!(
            c("jsonpath={.status.phase}=").unwrap_err(),
            "error: jsonpath wait has to have a value after equal sign, like --for=jsonpath='{.status.readyReplicas}'=3"
        );
        assert_eq!(
            c("jsonpath={.a}=1=2").unwrap_err(),
            "error: jsonpath wait format must be --for=jsonpath='{.status.readyReplicas}'=3 or --for=jsonpath='{.status.readyReplicas}'"
        );
        assert_eq!(conditions(&[]).unwrap_err().to_string(), "error: unrecognized condition: \"\"");
        assert_eq!(split_on_equals("{.a[?(@.b==\"c\")].d}=x"), ["{.a[?(@.b==\"c\")].d}", "x"]);
    }

    #[test]
    fn timeouts_read_as_kubectl_reads_them() {
        assert_eq!(parse_timeout("0"), Ok(Timeout::Once));
        assert_eq!(parse_timeout("0s"), Ok(Timeout::Once));
        assert_eq!(parse_timeout("90s"), Ok(Timeout::For(Duration::from_secs(90))));
        assert_eq!(parse_timeout("-1s"), Ok(Timeout::For(A_WEEK)));
        assert_eq!(parse_timeout("soon"), Err("time: invalid duration \"soon\"".into()));
    }

    #[test]
    fn a_status_condition_counts_only_for_the_current_generation() {
        let o = |observed| {
            json!({"metadata": {"generation": 2},
                   "status": {"observedGeneration": observed,
                              "conditions": [{"type": "Available", "status": "True"}]}})
        };
        let available = Condition::Status { name: "available".into(), value: "true".into() };
        assert_eq!(available.holds(&o(2)), Ok(true));
        assert_eq!(available.holds(&o(1)), Ok(false));
        let pod = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
        assert_eq!(available.holds(&pod), Ok(false));
    }

    #[test]
    fn a_jsonpath_condition_compares_one_scalar() {
        let pod = json!({"status": {"phase": "Running", "podIPs": [{"ip": "a"}, {"ip": "b"}]}});
        let jp = |s: &str| condition(&format!("jsonpath={s}")).unwrap();
        assert_eq!(jp("{.status.phase}=Running").holds(&pod), Ok(true));
        assert_eq!(jp(".status.phase='Pending'").holds(&pod), Ok(false));
        assert_eq!(jp("{.status.phase}").holds(&pod), Ok(true));
        assert_eq!(jp("{.status.missing}").holds(&pod), Ok(false));
        assert_eq!(
            jp("{.status.podIPs[*].ip}=a").holds(&pod),
            Err("given jsonpath expression matches more than one value".into())
        );
        assert_eq!(
            jp("{.status}=x").holds(&pod),
            Err("jsonpath leads to a nested object or list which is not supported".into())
        );
    }
}
