//! What one probe or hook handler run found, as upstream's `probe.Result` with its output.

/// The result of one handler run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Healthy; the output (a body, a command's output) is kept for logs.
    Success(String),
    /// Healthy, with something the operator should know (`ProbeWarning` events), such as an
    /// HTTP redirect to another host that was not followed.
    Warning(String),
    /// Unhealthy, and why.
    Failure(String),
    /// The handler could not run (upstream's `Unknown`): the result is thrown away.
    Unknown(String),
}

impl Outcome {
    pub fn is_success(&self) -> bool {
        matches!(self, Outcome::Success(_) | Outcome::Warning(_))
    }

    pub fn output(&self) -> &str {
        match self {
            Outcome::Success(s)
            | Outcome::Warning(s)
            | Outcome::Failure(s)
            | Outcome::Unknown(s) => s,
        }
    }
}

/// The most of a handler's output (a body, a command's stdout and stderr) that is kept, as
/// upstream's 10 KiB.
pub const MAX_OUTPUT: usize = 10 * 1024;

/// `bytes` as text, cut to [`MAX_OUTPUT`] on a character boundary.
pub fn bounded_text(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(MAX_OUTPUT)];
    String::from_utf8_lossy(cut).into_owned()
}
