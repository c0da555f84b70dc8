//! What a fake container "does" once started: the lines it prints, whether and when it exits,
//! and how it answers SIGTERM. The fake runs no processes; tests describe behaviour here.

use std::sync::Arc;
use std::time::Duration;

/// The stream a log line was written to, as the CRI log format names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What a container does when SIGTERM arrives (the first step of `StopContainer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSigterm {
    /// Exits at once with this code (a process with a handler, or killed by the signal: 143).
    Exit(i32),
    /// Ignores it, as PID 1 without a handler does: the runtime kills it after the timeout (137).
    Ignore,
}

/// The behaviour of a started container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Written to the container's CRI log file when it starts.
    pub output: Vec<(Stream, String)>,
    /// Exits by itself after this long with this code; `None` runs until stopped.
    pub exit: Option<(Duration, i32)>,
    pub on_sigterm: OnSigterm,
}

impl Default for Program {
    /// Runs until stopped and dies of SIGTERM (exit code 143).
    fn default() -> Self {
        Self { output: Vec::new(), exit: None, on_sigterm: OnSigterm::Exit(143) }
    }
}

impl Program {
    /// Prints `lines` to stdout, then exits with `code` at once.
    pub fn prints_and_exits(lines: &[&str], code: i32) -> Self {
        Self {
            output: lines.iter().map(|l| (Stream::Stdout, (*l).to_string())).collect(),
            exit: Some((Duration::ZERO, code)),
            ..Self::default()
        }
    }

    /// Runs until stopped and ignores SIGTERM, like `sleep` as PID 1.
    pub fn ignores_sigterm() -> Self {
        Self { on_sigterm: OnSigterm::Ignore, ..Self::default() }
    }
}

/// Which containers a [`Program`] applies to. Later rules win over earlier ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Match {
    /// Every container.
    Any,
    /// Containers whose CRI metadata name is this.
    ContainerName(String),
    /// Containers created from this image reference, as given in the config.
    Image(String),
}

/// What `ExecSync` returns for a command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

/// Decides the outcome of `ExecSync(container name, argv)`.
pub type ExecHandler = Arc<dyn Fn(&str, &[String]) -> ExecOutcome + Send + Sync>;

#[derive(Default)]
pub(crate) struct Programs {
    rules: Vec<(Match, Program)>,
    exec: Option<ExecHandler>,
}

impl std::fmt::Debug for Programs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Programs")
            .field("rules", &self.rules)
            .field("exec", &self.exec.as_ref().map(|_| "<handler>"))
            .finish()
    }
}

impl Programs {
    pub(crate) fn add(&mut self, matcher: Match, program: Program) {
        self.rules.push((matcher, program));
    }

    pub(crate) fn set_exec(&mut self, handler: ExecHandler) {
        self.exec = Some(handler);
    }

    /// The program for a container: the last matching rule, else the default.
    pub(crate) fn for_container(&self, name: &str, image: &str) -> Program {
        self.rules
            .iter()
            .rev()
            .find(|(m, _)| match m {
                Match::Any => true,
                Match::ContainerName(n) => n == name,
                Match::Image(i) => i == image,
            })
            .map(|(_, p)| p.clone())
            .unwrap_or_default()
    }

    /// `ExecSync` runs nothing: the handler decides, and with none every command succeeds
    /// silently.
    pub(crate) fn exec(&self, container: &str, cmd: &[String]) -> ExecOutcome {
        self.exec.as_ref().map(|h| h(container, cmd)).unwrap_or_default()
    }
}
