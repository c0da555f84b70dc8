//! What goes wrong, worded as kubectl words it: `Error from server (NotFound): …` for a
//! server's `Status`, `The connection to the server … was refused …` for an unreachable one,
//! `error: …` for everything decided on this side. Every error exits 1, as kubectl's do.

use std::path::PathBuf;

use kube::core::Status;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The server answered with a `Status`.
    #[error("{}", server_message(.0))]
    Server(Box<Status>),
    /// No TCP connection to the server.
    #[error(
        "The connection to the server {server} was refused - did you specify the right host or port?"
    )]
    Refused { server: String },
    /// Anything else between us and the server (TLS, DNS, a cut connection, a timeout).
    #[error("Unable to connect to the server: {reason}")]
    Unreachable { reason: String },
    /// The kubeconfig, or a flag overriding it, is unusable.
    #[error("error: {0}")]
    Config(String),
    /// A resource type the server's discovery does not list.
    #[error("error: the server doesn't have a resource type \"{0}\"")]
    UnknownResource(String),
    /// A file or document that cannot be read as objects.
    #[error("error: error parsing {path}: {reason}")]
    Parse { path: String, reason: String },
    /// A document that parses but is no object kubectl could send.
    #[error(
        "error: error validating \"{path}\": error validating data: {reason}; if you choose to ignore these errors, turn validation off with --validate=false"
    )]
    Validation { path: String, reason: String },
    /// A file or directory that cannot be read.
    #[error("error: the path \"{}\" does not exist", .0.display())]
    NoPath(PathBuf),
    /// The command line asks for something that cannot be done.
    #[error("error: {0}")]
    Usage(String),
    /// A failure already reported on stdout (`auth can-i` answering `no`): exit 1, print nothing.
    #[error("")]
    Silent,
    /// An `-o jsonpath` template that does not parse, or failed on the objects.
    #[error("error: {0}")]
    Template(#[from] crate::printers::jsonpath::TemplateError),
    /// An `-o custom-columns` spec that does not parse, or failed on the objects.
    #[error("error: {0}")]
    Columns(#[from] crate::printers::custom_columns::SpecError),
    /// A remote command (`exec`, `cp`) ended with this non-zero exit code: kubectl prints this
    /// line (without `error: `) and exits with the same code.
    #[error("command terminated with exit code {0}")]
    Exit(u8),
    /// A pod `run --attach` followed ended with a non-zero exit code: kubectl prints its
    /// message as it is (`pod default/p terminated (Error)` and the container's message) and
    /// exits with the container's code.
    #[error("{message}")]
    Terminated { message: String, code: u8 },
    /// A message kubectl prints as it is, without `error: ` (its `MultipleErrors` of an
    /// aggregate: `drain`'s refusals, one a line).
    #[error("{0}")]
    Plain(String),
    /// Several errors, reported together at the end (one per document or object).
    #[error("{}", join(.0))]
    Many(Vec<CliError>),
}

fn join(errors: &[CliError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

/// kubectl's wording of a server error: `Error from server (Reason): message`, or without a
/// reason `Error from server: message`.
fn server_message(status: &Status) -> String {
    let reason = status.reason.as_str();
    // kubectl words a refused object by its causes: `The Pod "p" is invalid: field: message`.
    if reason == "Invalid" {
        let mut s = "The request is invalid".to_string();
        let Some(d) = &status.details else {
            return format!("{s}: {}", status.message);
        };
        if !d.kind.is_empty() || !d.name.is_empty() {
            s = format!("The {} \"{}\" is invalid", d.kind, d.name);
        }
        let causes: Vec<String> =
            d.causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
        return match causes.as_slice() {
            [] if status.message.is_empty() => s,
            [] => format!("{s}: {}", status.message),
            [one] => format!("{s}: {one}"),
            // kubectl's `MultilineError`: the prefix on a line of its own, a `* ` line per cause.
            many => format!(
                "{s}: \n{}",
                many.iter().map(|c| format!("* {c}")).collect::<Vec<_>>().join("\n")
            ),
        };
    }
    if reason.is_empty() || reason == "Unknown" {
        format!("Error from server: {}", status.message)
    } else {
        format!("Error from server ({reason}): {}", status.message)
    }
}

impl CliError {
    /// The error a kube-rs call returned, worded for `server` (`host:port`).
    pub fn from_kube(server: &str, e: kube::Error) -> CliError {
        match e {
            kube::Error::Api(status) => CliError::Server(status),
            kube::Error::HyperError(ref h) if refused(h) => {
                CliError::Refused { server: server.to_string() }
            }
            kube::Error::Service(ref s) if refused(s.as_ref()) => {
                CliError::Refused { server: server.to_string() }
            }
            other => CliError::Unreachable { reason: other.to_string() },
        }
    }

    /// The server's `NotFound` for an object (`pods "x" not found`), for absences noticed on
    /// this side: a list that does not hold it, a kubelet that does not run it.
    pub fn not_found(group_resource: &str, name: &str) -> CliError {
        CliError::Server(Box::new(Status {
            code: 404,
            reason: "NotFound".into(),
            message: format!("{group_resource} \"{name}\" not found"),
            ..Status::default()
        }))
    }

    /// The server's `Status`, when it was the server that refused.
    pub fn status(&self) -> Option<&Status> {
        match self {
            CliError::Server(s) => Some(s),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status().is_some_and(|s| s.code == 404)
    }

    /// What Go's `err.Error()` says of it, as kubectl embeds an error in a message of its own:
    /// a server's message alone, else ours.
    pub fn go_message(&self) -> String {
        match self.status() {
            Some(s) => s.message.clone(),
            None => self.to_string(),
        }
    }
}

/// Whether an error, or one of its sources, is a refused TCP connection.
fn refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        cur = err.source();
    }
    false
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_status_reads_as_kubectl_prints_it() {
        let status = Status {
            reason: "NotFound".into(),
            message: "pods \"x\" not found".into(),
            code: 404,
            ..Status::default()
        };
        let e = CliError::Server(Box::new(status));
        assert_eq!(e.to_string(), "Error from server (NotFound): pods \"x\" not found");
        assert!(e.is_not_found());
    }

    #[test]
    fn an_invalid_object_is_worded_by_its_causes() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "code": 422, "reason": "Invalid", "message": "Pod \"p1\" is invalid: ...",
            "details": {"kind": "Pod", "name": "p1", "causes": [
                {"field": "metadata.labels", "message": "Invalid value: \"a/b/c\": bad"}]}}))
        .unwrap();
        assert_eq!(
            CliError::Server(Box::new(status)).to_string(),
            "The Pod \"p1\" is invalid: metadata.labels: Invalid value: \"a/b/c\": bad"
        );
    }

    #[test]
    fn an_object_invalid_for_several_causes_lists_them_on_lines_of_their_own() {
        let status: Status = serde_json::from_value(serde_json::json!({
            "code": 422, "reason": "Invalid", "message": "...",
            "details": {"kind": "Deployment", "name": "web", "causes": [
                {"field": "spec.replicas", "message": "Invalid value: -1: must be greater than or equal to 0"},
                {"field": "spec.selector", "message": "Required value"}]}}))
        .unwrap();
        assert_eq!(
            CliError::Server(Box::new(status)).to_string(),
            "The Deployment \"web\" is invalid: \n* spec.replicas: Invalid value: -1: must be greater than or equal to 0\n* spec.selector: Required value"
        );
    }

    #[test]
    fn a_status_without_reason_has_no_parentheses() {
        let status = Status { message: "boom".into(), code: 500, ..Status::default() };
        assert_eq!(CliError::Server(Box::new(status)).to_string(), "Error from server: boom");
    }

    #[test]
    fn a_refused_connection_names_the_server() {
        let e = CliError::Refused { server: "127.0.0.1:1".into() };
        assert_eq!(
            e.to_string(),
            "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?"
        );
    }
}
