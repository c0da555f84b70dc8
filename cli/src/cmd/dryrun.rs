//! `--dry-run` as kubectl reads it (`GetDryRunStrategy`): `none`, `client` or `server`; a bare
//! `--dry-run` or a boolean still accepted with kubectl's deprecation notice; and the suffix
//! kubectl's printers add to an operation (`cordoned (dry run)`).

use crate::errors::{CliError, Result};

/// What a bare `--dry-run` stands for (kubectl's `NoOptDefVal`).
pub const BARE: &str = "unchanged";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DryRun {
    #[default]
    None,
    /// Nothing is sent: what would be done is printed.
    Client,
    /// Writes are sent with `dryRun=All`: the server decides, nothing is kept.
    Server,
}

/// The flag, for commands that take it.
#[derive(Debug, Clone, clap::Args)]
pub struct Flag {
    /// Must be "none", "server", or "client".
    #[arg(long = "dry-run", default_value = "none", num_args = 0..=1, require_equals = true, default_missing_value = BARE)]
    pub dry_run: String,
}

impl Flag {
    pub fn strategy(&self) -> Result<DryRun> {
        let (strategy, notice) = DryRun::parse(&self.dry_run)?;
        if let Some(n) = notice {
            eprintln!("Warning: {n}");
        }
        Ok(strategy)
    }
}

/// Go's `strconv.ParseBool`.
pub fn go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl DryRun {
    /// The strategy a flag value names, and kubectl's deprecation notice if the form is old.
    pub fn parse(value: &str) -> Result<(DryRun, Option<String>)> {
        if let Some(b) = go_bool(value) {
            let (strategy, name) =
                if b { (DryRun::Client, "client") } else { (DryRun::None, "none") };
            let notice = format!(
                "--dry-run={value} is deprecated (boolean value) and can be replaced with --dry-run={name}."
            );
            return Ok((strategy, Some(notice)));
        }
        match value {
            BARE => Ok((
                DryRun::Client,
                Some("--dry-run is deprecated and can be replaced with --dry-run=client.".into()),
            )),
            "client" => Ok((DryRun::Client, None)),
            "server" => Ok((DryRun::Server, None)),
            "none" => Ok((DryRun::None, None)),
            other => Err(CliError::Usage(format!(
                "Invalid dry-run value ({other}). Must be \"none\", \"server\", or \"client\"."
            ))),
        }
    }

    /// An operation as kubectl's printers word it under this strategy.
    pub fn operation(self, op: &str) -> String {
        match self {
            DryRun::None => op.to_string(),
            DryRun::Client => format!("{op} (dry run)"),
            DryRun::Server => format!("{op} (server dry run)"),
        }
    }

    /// The query a write carries under this strategy.
    pub fn query(self) -> &'static str {
        if self == DryRun::Server { "?dryRun=All" } else { "" }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_kubectl_reads_them() {
        assert_eq!(DryRun::parse("none").unwrap(), (DryRun::None, None));
        assert_eq!(DryRun::parse("client").unwrap(), (DryRun::Client, None));
        assert_eq!(DryRun::parse("server").unwrap(), (DryRun::Server, None));
        let (s, notice) = DryRun::parse(BARE).unwrap();
        assert_eq!(s, DryRun::Client);
        assert_eq!(
            notice.as_deref(),
            Some("--dry-run is deprecated and can be replaced with --dry-run=client.")
        );
        let (s, notice) = DryRun::parse("false").unwrap();
        assert_eq!(s, DryRun::None);
        assert_eq!(
            notice.as_deref(),
            Some(
                "--dry-run=false is deprecated (boolean value) and can be replaced with --dry-run=none."
            )
        );
        assert_eq!(DryRun::parse("T").unwrap().0, DryRun::Client);
        assert_eq!(
            DryRun::parse("maybe").unwrap_err().to_string(),
            "error: Invalid dry-run value (maybe). Must be \"none\", \"server\", or \"client\"."
        );
    }

    #[test]
    fn operations_carry_the_strategy() {
        assert_eq!(DryRun::None.operation("cordoned"), "cordoned");
        assert_eq!(DryRun::Client.operation("drained"), "drained (dry run)");
        assert_eq!(DryRun::Server.operation("drained"), "drained (server dry run)");
    }
}
