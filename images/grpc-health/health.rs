//! The `grpc.health.v1.Health` service: `Check` answers the status of a service from, in this
//! order, its status file, `--service`, and the default (`""`, the whole server, is SERVING;
//! any other service is unknown: NOT_FOUND, as grpc's reference health server answers Check).
//! `Watch` and every other method answer UNIMPLEMENTED.
//!
//! The messages (`HealthCheckRequest { string service = 1; }`, `HealthCheckResponse {
//! ServingStatus status = 1; }`) are small enough to encode and decode by hand.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::config::{self, Config};
use super::connection::Request;
use super::grpc::{self, Code, Reply};

pub const SERVICE: &str = "grpc.health.v1.Health";

/// `HealthCheckResponse.ServingStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServingStatus {
    Unknown = 0,
    Serving = 1,
    NotServing = 2,
    ServiceUnknown = 3,
}

impl ServingStatus {
    pub fn parse(text: &str) -> Option<ServingStatus> {
        Some(match text.trim() {
            "UNKNOWN" => ServingStatus::Unknown,
            "SERVING" => ServingStatus::Serving,
            "NOT_SERVING" => ServingStatus::NotServing,
            "SERVICE_UNKNOWN" => ServingStatus::ServiceUnknown,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ServingStatus::Unknown => "UNKNOWN",
            ServingStatus::Serving => "SERVING",
            ServingStatus::NotServing => "NOT_SERVING",
            ServingStatus::ServiceUnknown => "SERVICE_UNKNOWN",
        }
    }
}

/// The status file of `service` under `dir`: `default` for `""`, else the name itself when it
/// is one plain file name (services with `/`, `.` or `..` have none).
pub fn status_file(dir: &Path, service: &str) -> Option<PathBuf> {
    let name = if service.is_empty() { "default" } else { service };
    let plain = !name.contains(['/', '\0']) && name != "." && name != ".." && name.len() <= 255;
    plain.then(|| dir.join(name))
}

/// Reads a small control file: `None` when it does not exist.
fn read_control_file(path: &Path) -> Result<Option<String>, String> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut bytes = Vec::new();
    file.take(64).read_to_end(&mut bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// The status to answer for `service`; `None` for an unknown service.
pub fn status(service: &str, config: &Config) -> Result<Option<ServingStatus>, String> {
    if let Some(path) = status_file(&config.status_dir, service)
        && let Some(text) = read_control_file(&path)?
    {
        return ServingStatus::parse(&text).map(Some).ok_or_else(|| {
            format!(
                "{} holds {text:?}, want SERVING, NOT_SERVING, SERVICE_UNKNOWN or UNKNOWN",
                path.display()
            )
        });
    }
    if let Some((_, s)) = config.services.iter().rev().find(|(name, _)| name == service) {
        return Ok(Some(*s));
    }
    Ok(service.is_empty().then_some(ServingStatus::Serving))
}

/// How long to wait before answering: the delay file, else `--delay-ms`.
pub fn delay(config: &Config) -> Result<Duration, String> {
    match read_control_file(&config.delay_file)? {
        Some(text) => config::parse_delay(&text)
            .map_err(|why| format!("{}: {why}", config.delay_file.display())),
        None => Ok(config.delay),
    }
}

/// Reads a varint at `*pos` (at most 10 bytes).
fn varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..70).step_by(7) {
        let byte = *b.get(*pos)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f).checked_shl(shift).unwrap_or(0);
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Decodes `HealthCheckRequest`: the service name; unknown fields are skipped.
pub fn decode_request(message: &[u8]) -> Result<String, String> {
    let mut service = String::new();
    let mut pos = 0;
    while pos < message.len() {
        let key = varint(message, &mut pos).ok_or("truncated field key")?;
        let (field, wire_type) = (key >> 3, key & 7);
        match wire_type {
            0 => {
                varint(message, &mut pos).ok_or("truncated varint")?;
            }
            1 | 5 => pos += if wire_type == 1 { 8 } else { 4 },
            2 => {
                let len = varint(message, &mut pos).ok_or("truncated length")?;
                let end = usize::try_from(len)
                    .ok()
                    .and_then(|l| pos.checked_add(l))
                    .filter(|&end| end <= message.len())
                    .ok_or("length beyond the message")?;
                if field == 1 {
                    service = std::str::from_utf8(&message[pos..end])
                        .map_err(|_| "service is not UTF-8")?
                        .to_string();
                }
                pos = end;
            }
            _ => return Err(format!("wire type {wire_type} of field {field}")),
        }
        if pos > message.len() {
            return Err("field beyond the message".into());
        }
    }
    Ok(service)
}

/// Encodes `HealthCheckResponse` (proto3 leaves out the default, UNKNOWN).
pub fn encode_response(status: ServingStatus) -> Vec<u8> {
    match status {
        ServingStatus::Unknown => Vec::new(),
        s => vec![0x08, s as u8],
    }
}

/// The status in an encoded `HealthCheckResponse` (for the log).
pub fn response_status(message: &[u8]) -> ServingStatus {
    match message {
        [0x08, 1] => ServingStatus::Serving,
        [0x08, 2] => ServingStatus::NotServing,
        [0x08, 3] => ServingStatus::ServiceUnknown,
        _ => ServingStatus::Unknown,
    }
}

/// What a request is, for answering and for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Check(String),
    Watch,
    Other(String),
}

/// Answers one request; `call` says what it was, for the log.
pub fn answer(request: &Request, config: &Config) -> (Option<Call>, Reply) {
    let path = request.head.path.as_str();
    let Some((service, method)) = path.strip_prefix('/').and_then(|p| p.split_once('/')) else {
        let reply = Reply::error(Code::Unimplemented, format!("malformed method name {path:?}"));
        return (None, reply);
    };
    let message = match grpc::unary_message(&request.head, &request.body) {
        Ok(m) => m,
        Err(reply) => return (None, reply),
    };
    let call = match (service, method) {
        (SERVICE, "Check") => match decode_request(message) {
            Ok(name) => Call::Check(name),
            Err(why) => {
                let reply = Reply::error(Code::Internal, format!("bad HealthCheckRequest: {why}"));
                return (None, reply);
            }
        },
        (SERVICE, "Watch") => Call::Watch,
        _ => Call::Other(path.to_string()),
    };
    let reply = match &call {
        Call::Check(name) => match status(name, config) {
            Ok(Some(s)) => Reply::ok(encode_response(s)),
            Ok(None) => Reply::error(Code::NotFound, "unknown service"),
            Err(why) => Reply::error(Code::Internal, why),
        },
        Call::Watch => Reply::error(Code::Unimplemented, "Watch is not implemented by this server"),
        Call::Other(_) if service == SERVICE => Reply::error(
            Code::Unimplemented,
            format!("unknown method {method} for service {service}"),
        ),
        Call::Other(_) => Reply::error(Code::Unimplemented, format!("unknown service {service}")),
    };
    (Some(call), reply)
}

#[cfg(test)]
mod tests {
    use super::super::connection::Head;
    use super::*;

    fn check(service: &str) -> Request {
        let mut message = vec![0x0a, service.len() as u8];
        message.extend_from_slice(service.as_bytes());
        request("/grpc.health.v1.Health/Check", &message)
    }

    fn request(path: &str, message: &[u8]) -> Request {
        let mut body = vec![0];
        body.extend_from_slice(&(message.len() as u32).to_be_bytes());
        body.extend_from_slice(message);
        let head = Head {
            method: "POST".into(),
            path: path.into(),
            content_type: Some("application/grpc".into()),
            grpc_encoding: None,
        };
        Request { stream: 1, head, body }
    }

    fn config(dir: &Path) -> Config {
        Config {
            status_dir: dir.join("health"),
            delay_file: dir.join("delay-ms"),
            ..Config::default()
        }
    }

    #[test]
    fn check_answers_from_file_then_flags_then_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.services.push(("svc".into(), ServingStatus::NotServing));
        let reply = |service: &str, c: &Config| answer(&check(service), c).1;
        assert_eq!(reply("", &c), Reply::ok(vec![8, 1]));
        assert_eq!(reply("svc", &c), Reply::ok(vec![8, 2]));
        assert_eq!(reply("other", &c).code, Code::NotFound);

        std::fs::create_dir(&c.status_dir).unwrap();
        std::fs::write(c.status_dir.join("default"), "NOT_SERVING\n").unwrap();
        std::fs::write(c.status_dir.join("svc"), "SERVING").unwrap();
        std::fs::write(c.status_dir.join("other"), "SERVICE_UNKNOWN").unwrap();
        assert_eq!(reply("", &c), Reply::ok(vec![8, 2]));
        assert_eq!(reply("svc", &c), Reply::ok(vec![8, 1]));
        assert_eq!(reply("other", &c), Reply::ok(vec![8, 3]));
        for s in [
            ServingStatus::Unknown,
            ServingStatus::Serving,
            ServingStatus::NotServing,
            ServingStatus::ServiceUnknown,
        ] {
            assert_eq!(response_status(&encode_response(s)), s);
            assert_eq!(ServingStatus::parse(s.name()), Some(s));
        }

        std::fs::write(c.status_dir.join("default"), "MAYBE").unwrap();
        let bad = reply("", &c);
        assert_eq!(bad.code, Code::Internal);
        assert!(bad.detail.contains("default") && bad.detail.contains("MAYBE"), "{}", bad.detail);
    }

    #[test]
    fn watch_and_other_methods_are_unimplemented() {
        let c = config(Path::new("/nonexistent"));
        let (call, reply) = answer(&request("/grpc.health.v1.Health/Watch", &[]), &c);
        assert_eq!((call, reply.code), (Some(Call::Watch), Code::Unimplemented));
        let (_, reply) = answer(&request("/grpc.health.v1.Health/List", &[]), &c);
        assert_eq!(reply.detail, "unknown method List for service grpc.health.v1.Health");
        let (_, reply) = answer(&request("/foo.Bar/Baz", &[]), &c);
        assert_eq!(
            (reply.code, reply.detail.as_str()),
            (Code::Unimplemented, "unknown service foo.Bar")
        );
        let (_, reply) = answer(&request("nonsense", &[]), &c);
        assert_eq!(reply.code, Code::Unimplemented);
    }

    #[test]
    fn requests_decode_with_unknown_fields_and_bad_ones_are_errors() {
        assert_eq!(decode_request(&[]), Ok(String::new()));
        assert_eq!(decode_request(&[0x0a, 2, b'a', b'b']), Ok("ab".into()));
        // Unknown varint, fixed64, fixed32 and bytes fields around the service.
        let mut m = vec![0x10, 0x96, 0x01, 0x19, 1, 2, 3, 4, 5, 6, 7, 8, 0x25, 1, 2, 3, 4];
        m.extend_from_slice(&[0x1a, 1, 0, 0x0a, 1, b'z']);
        assert_eq!(decode_request(&m), Ok("z".into()));
        assert!(decode_request(&[0x0a, 5, b'a']).is_err());
        assert!(decode_request(&[0x0a, 1, 0xff]).is_err());
        assert!(decode_request(&[0x0b]).is_err());
        assert!(decode_request(&[0x19, 1]).is_err());
        assert!(decode_request(&[0x80]).is_err());
        assert!(
            decode_request(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
                .is_err()
        );
    }

    #[test]
    fn status_files_are_plain_names_only() {
        let dir = Path::new("/h");
        assert_eq!(status_file(dir, ""), Some(PathBuf::from("/h/default")));
        assert_eq!(status_file(dir, "pkg.Svc"), Some(PathBuf::from("/h/pkg.Svc")));
        assert_eq!(status_file(dir, "a/b"), None);
        assert_eq!(status_file(dir, ".."), None);
    }

    #[test]
    fn the_delay_file_overrides_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path());
        c.delay = Duration::from_millis(5);
        assert_eq!(delay(&c), Ok(Duration::from_millis(5)));
        std::fs::write(&c.delay_file, "1500\n").unwrap();
        assert_eq!(delay(&c), Ok(Duration::from_millis(1500)));
        std::fs::write(&c.delay_file, "soon").unwrap();
        assert!(delay(&c).unwrap_err().contains("delay-ms"));
    }
}
