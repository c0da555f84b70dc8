//! `completion bash|zsh|fish|powershell`: a shell completion script for kubectl-lite, with
//! kubectl's argument checks and wording. The script is generated from the clap command tree by
//! `clap_complete`, so it differs from the one cobra writes for kubectl: it completes commands
//! and flags only (no resource types or names asked of the server), and carries no boilerplate
//! header.

use std::io::Write;

use clap::Command;
use clap_complete::Shell;

use crate::errors::{CliError, Result};

const HELP: &str = "See 'kubectl-lite completion -h' for help and examples";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// SHELL: bash, zsh, fish or powershell.
    pub args: Vec<String>,
}

/// Writes the script for the shell named to stdout; `tree` is the whole command tree.
pub fn run(a: Args, tree: Command) -> Result<()> {
    let shell = shell(&a.args)?;
    // Written whole from memory: `clap_complete` panics on a failed write (`| head`).
    let mut script = Vec::new();
    let mut tree = tree;
    clap_complete::generate(shell, &mut tree, "kubectl-lite", &mut script);
    let mut out = std::io::stdout().lock();
    // A closed stdout ends the command quietly, as kubectl's.
    let _ = out.write_all(&script).and_then(|()| out.flush());
    Ok(())
}

/// The shell the arguments name, or kubectl's usage error.
pub fn shell(args: &[String]) -> Result<Shell> {
    let usage = |m: String| CliError::Usage(format!("{m}\n{HELP}"));
    match args {
        [] => Err(usage("Shell not specified.".into())),
        [one] => match one.as_str() {
            "bash" => Ok(Shell::Bash),
            "zsh" => Ok(Shell::Zsh),
            "fish" => Ok(Shell::Fish),
            "powershell" => Ok(Shell::PowerShell),
            other => Err(usage(format!("Unsupported shell type {other:?}."))),
        },
        _ => Err(usage("Too many arguments. Expected only the shell type.".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    #[test]
    fn kubectls_shells_are_known() {
        assert_eq!(shell(&strings(&["bash"])).unwrap(), Shell::Bash);
        assert_eq!(shell(&strings(&["zsh"])).unwrap(), Shell::Zsh);
        assert_eq!(shell(&strings(&["fish"])).unwrap(), Shell::Fish);
        assert_eq!(shell(&strings(&["powershell"])).unwrap(), Shell::PowerShell);
    }

    #[test]
    fn a_missing_extra_or_unknown_shell_is_kubectls_usage_error() {
        let err = |a: &[&str]| shell(&strings(a)).unwrap_err().to_string();
        assert_eq!(err(&[]), format!("error: Shell not specified.\n{HELP}"));
        assert_eq!(
            err(&["bash", "zsh"]),
            format!("error: Too many arguments. Expected only the shell type.\n{HELP}")
        );
        assert_eq!(err(&["tcsh"]), format!("error: Unsupported shell type \"tcsh\".\n{HELP}"));
    }

    #[test]
    fn the_bash_script_completes_the_commands_of_the_tree() {
        let tree = Command::new("kubectl-lite")
            .subcommand(Command::new("taint"))
            .subcommand(Command::new("get"));
        let mut out = Vec::new();
        clap_complete::generate(Shell::Bash, &mut tree.clone(), "kubectl-lite", &mut out);
        let script = String::from_utf8(out).unwrap();
        assert!(script.contains("taint"), "{script}");
        assert!(script.contains("complete -F"), "{script}");
    }
}
