//! Command-line flags, parsed by hand: the server is built without crates.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use super::health::ServingStatus;

/// Longest delay accepted from `--delay-ms` or the delay file.
pub const MAX_DELAY: Duration = Duration::from_secs(600);

pub const USAGE: &str = "\
usage: grpc-health-server [flags]

Serves grpc.health.v1.Health/Check over plaintext HTTP/2 (gRPC). Watch and every other
method answer UNIMPLEMENTED.

  --port N                 port to listen on (default 9090; 0 picks a free one)
  --address IP             address to listen on (default 0.0.0.0)
  --service NAME=STATUS    status of service NAME (repeatable; NAME may be empty for the
                           whole server). STATUS: SERVING, NOT_SERVING, SERVICE_UNKNOWN,
                           UNKNOWN. Without it, \"\" is SERVING and other services are
                           unknown (Check answers NOT_FOUND, as grpc's health server).
  --status-dir DIR         a file DIR/<service> (DIR/default for \"\") holding a STATUS
                           overrides the flags; read on every request (default /tmp/health)
  --delay-ms N             wait N ms before every answer (default 0, at most 600000)
  --delay-file PATH        a file holding N overrides --delay-ms; read on every request
                           (default /tmp/health-delay-ms)
  -v, --version            print the version
  -h, --help               print this help
";

/// What the server is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub address: IpAddr,
    pub port: u16,
    /// Statuses from `--service`, in flag order (the last one for a name wins).
    pub services: Vec<(String, ServingStatus)>,
    pub status_dir: PathBuf,
    pub delay: Duration,
    pub delay_file: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            port: 9090,
            services: Vec::new(),
            status_dir: PathBuf::from("/tmp/health"),
            delay: Duration::ZERO,
            delay_file: PathBuf::from("/tmp/health-delay-ms"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Run(Config),
    Help,
    Version,
}

/// A flag the server cannot run with, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagError(pub String);

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses a delay in milliseconds, as the flag and the delay file hold it.
pub fn parse_delay(text: &str) -> Result<Duration, String> {
    let ms: u64 =
        text.trim().parse().map_err(|_| format!("{text:?} is not a number of milliseconds"))?;
    let delay = Duration::from_millis(ms);
    if delay > MAX_DELAY {
        return Err(format!("{ms} ms is over the {} ms limit", MAX_DELAY.as_millis()));
    }
    Ok(delay)
}

/// Parses the arguments after the program name. Flags take `--flag value` or `--flag=value`.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, FlagError> {
    let mut config = Config::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-v" | "--version" => return Ok(Command::Version),
            _ => {}
        }
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| FlagError(format!("{flag} needs a value")))
        };
        let bad = |v: &str, why: &str| FlagError(format!("{flag} {v:?}: {why}"));
        match flag.as_str() {
            "--port" => {
                let v = value()?;
                config.port = v.parse().map_err(|_| bad(&v, "not a port number (0-65535)"))?;
            }
            "--address" => {
                let v = value()?;
                config.address = v.parse().map_err(|_| bad(&v, "not an IP address"))?;
            }
            "--service" => {
                let v = value()?;
                let Some((name, status)) = v.rsplit_once('=') else {
                    return Err(bad(&v, "want NAME=STATUS"));
                };
                let status = ServingStatus::parse(status).ok_or_else(|| {
                    bad(&v, "STATUS must be SERVING, NOT_SERVING, SERVICE_UNKNOWN or UNKNOWN")
                })?;
                config.services.push((name.to_string(), status));
            }
            "--status-dir" => config.status_dir = PathBuf::from(value()?),
            "--delay-ms" => {
                let v = value()?;
                config.delay = parse_delay(&v).map_err(|why| bad(&v, &why))?;
            }
            "--delay-file" => config.delay_file = PathBuf::from(value()?),
            _ => return Err(FlagError(format!("unknown flag {arg:?} (see --help)"))),
        }
    }
    Ok(Command::Run(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Config, FlagError> {
        match parse(args.iter().map(|s| (*s).to_string()))? {
            Command::Run(c) => Ok(c),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn defaults_serve_on_9090_from_tmp_health() {
        let c = run(&[]).unwrap();
        assert_eq!((c.port, c.address.to_string()), (9090, "0.0.0.0".to_string()));
        assert_eq!(c.status_dir, PathBuf::from("/tmp/health"));
        assert_eq!(c.delay, Duration::ZERO);
    }

    #[test]
    fn flags_take_both_forms_and_services_repeat() {
        let c = run(&[
            "--port=0",
            "--address",
            "127.0.0.1",
            "--service",
            "a.B=NOT_SERVING",
            "--service==SERVICE_UNKNOWN",
            "--delay-ms",
            "250",
            "--status-dir=/s",
        ])
        .unwrap();
        assert_eq!(c.port, 0);
        assert_eq!(
            c.services,
            [
                ("a.B".to_string(), ServingStatus::NotServing),
                (String::new(), ServingStatus::ServiceUnknown)
            ]
        );
        assert_eq!(c.delay, Duration::from_millis(250));
        assert_eq!(c.status_dir, PathBuf::from("/s"));
        assert_eq!(parse(["-h".to_string()]), Ok(Command::Help));
    }

    #[test]
    fn bad_flags_name_the_flag_and_value() {
        let err = |args: &[&str]| run(args).unwrap_err().0;
        assert!(err(&["--port", "70000"]).contains("--port \"70000\""));
        assert!(err(&["--service", "x=MAYBE"]).contains("STATUS must be"));
        assert!(err(&["--service", "x"]).contains("NAME=STATUS"));
        assert!(err(&["--delay-ms", "600001"]).contains("limit"));
        assert!(err(&["--delay-ms", "-1"]).contains("milliseconds"));
        assert!(err(&["--port"]).contains("needs a value"));
        assert!(err(&["--bogus"]).contains("unknown flag"));
    }
}
