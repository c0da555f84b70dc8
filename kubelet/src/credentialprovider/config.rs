//! Docker-style registry credentials as upstream's `credentialprovider` reads them: a
//! `config.json` (`{"auths": {...}}`, also a `kubernetes.io/dockerconfigjson` Secret) or a legacy
//! `.dockercfg` (the map alone, also a `kubernetes.io/dockercfg` Secret), each entry a
//! `username`/`password` or an `auth` (`base64(username:password)`, which wins). As Go decodes
//! them, field names match whatever their case and fields the entry does not have are ignored.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use serde_json::{Map, Value};

/// One registry's credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    pub username: String,
    pub password: String,
}

/// Credentials by registry location (`host[:port][/path]`, optionally with a scheme or a `*`
/// in the host).
pub type DockerConfig = BTreeMap<String, Entry>;

/// Why credentials could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("{field}: must be {expected}")]
    Type { field: String, expected: &'static str },
    #[error("{field}: {reason}")]
    Auth { field: String, reason: String },
}

fn type_error(field: &str, expected: &'static str) -> ConfigError {
    ConfigError::Type { field: field.to_string(), expected }
}

/// A member of `object` whose name matches `name` in any case, as Go's decoder finds fields
/// (an exact match first).
fn member<'a>(object: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    object
        .get(name)
        .or_else(|| object.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v))
}

/// A string field; `null` and absence are empty.
fn string_field(entry: &Map<String, Value>, name: &str, at: &str) -> Result<String, ConfigError> {
    match member(entry, name) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(type_error(&format!("{at}.{name}"), "a string")),
    }
}

/// Upstream's `decodeDockerConfigFieldAuth`: padded or unpadded standard base64 of
/// `username:password`.
fn decode_auth(auth: &str, at: &str) -> Result<Entry, ConfigError> {
    let bad = |reason: String| ConfigError::Auth { field: format!("{at}.auth"), reason };
    let cleaned: String = auth.chars().filter(|c| *c != '\r' && *c != '\n').collect();
    let decoded = if cleaned.trim().ends_with('=') {
        STANDARD.decode(cleaned.trim_end())
    } else {
        STANDARD_NO_PAD.decode(&cleaned)
    }
    .map_err(|e| bad(format!("not base64: {e}")))?;
    let text = String::from_utf8_lossy(&decoded);
    let (username, password) = text.split_once(':').ok_or_else(|| {
        bad("unable to parse auth field, must be formatted as base64(username:password)".into())
    })?;
    Ok(Entry { username: username.to_string(), password: password.to_string() })
}

/// One entry: an object (or `null`, no credentials).
fn entry(v: &Value, at: &str) -> Result<Entry, ConfigError> {
    let object = match v {
        Value::Null => return Ok(Entry::default()),
        Value::Object(o) => o,
        _ => return Err(type_error(at, "an object")),
    };
    let auth = string_field(object, "auth", at)?;
    if !auth.is_empty() {
        // Email is read but unused; its type is still checked, as Go's decoder would.
        string_field(object, "email", at)?;
        return decode_auth(&auth, at);
    }
    Ok(Entry {
        username: string_field(object, "username", at)?,
        password: string_field(object, "password", at)?,
    })
}

/// A map of entries (`null`: none).
fn entries(v: &Value, at: &str) -> Result<DockerConfig, ConfigError> {
    let object = match v {
        Value::Null => return Ok(DockerConfig::new()),
        Value::Object(o) => o,
        _ => return Err(type_error(at, "an object of registries")),
    };
    object
        .iter()
        .map(|(registry, v)| Ok((registry.clone(), entry(v, &format!("{at}[{registry}]"))?)))
        .collect()
}

fn parse(bytes: &[u8]) -> Result<Value, ConfigError> {
    serde_json::from_slice(bytes).map_err(|e| ConfigError::Json(e.to_string()))
}

/// A `config.json` (`.dockerconfigjson`): the credentials under `auths`.
pub fn parse_config_json(bytes: &[u8]) -> Result<DockerConfig, ConfigError> {
    let doc = parse(bytes)?;
    let object = match &doc {
        Value::Null => return Ok(DockerConfig::new()),
        Value::Object(o) => o,
        _ => return Err(type_error("(top level)", "an object")),
    };
    if let Some(headers) = member(object, "HttpHeaders") {
        let strings = headers.is_null()
            || headers
                .as_object()
                .is_some_and(|h| h.values().all(|v| v.is_string() || v.is_null()));
        if !strings {
            return Err(type_error("HttpHeaders", "an object of strings"));
        }
    }
    member(object, "auths").map_or_else(|| Ok(DockerConfig::new()), |a| entries(a, "auths"))
}

/// A legacy `.dockercfg`: the credentials map itself.
pub fn parse_dockercfg(bytes: &[u8]) -> Result<DockerConfig, ConfigError> {
    entries(&parse(bytes)?, "(top level)")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn entry(u: &str, p: &str) -> Entry {
        Entry { username: u.into(), password: p.into() }
    }

    #[test]
    fn config_json_reads_auths_with_auth_or_username_and_password() {
        let cfg = parse_config_json(
            br#"{"auths": {
                "r.example.com": {"auth": "YWxpY2U6czNjcjp0"},
                "https://index.docker.io/v1/": {"Username": "bob", "PASSWORD": "pw", "email": "b@x"},
                "unpadded.io": {"auth": "YTpi"},
                "nothing.io": null
            }, "credsStore": "desktop", "HttpHeaders": {"User-Agent": "x"}}"#,
        )
        .unwrap();
        assert_eq!(cfg["r.example.com"], entry("alice", "s3cr:t"), "the password keeps its colons");
        assert_eq!(cfg["https://index.docker.io/v1/"], entry("bob", "pw"));
        assert_eq!(cfg["unpadded.io"], entry("a", "b"));
        assert_eq!(cfg["nothing.io"], Entry::default());
        // auth wins over username and password.
        let both = parse_config_json(br#"{"auths": {"r": {"auth": "YTpi", "username": "x"}}}"#);
        assert_eq!(both.unwrap()["r"], entry("a", "b"));
        assert!(parse_config_json(b"{}").unwrap().is_empty());
        assert!(parse_config_json(b"null").unwrap().is_empty());
    }

    #[test]
    fn dockercfg_is_the_map_alone() {
        let cfg = parse_dockercfg(br#"{"127.0.0.1:5000": {"auth": "dTpw"}}"#).unwrap();
        assert_eq!(cfg["127.0.0.1:5000"], entry("u", "p"));
    }

    #[test]
    fn wrong_shapes_say_where() {
        let err = |b: &[u8]| parse_config_json(b).unwrap_err().to_string();
        assert!(err(b"{").starts_with("not JSON: "), "{}", err(b"{"));
        assert_eq!(err(b"[]"), "(top level): must be an object");
        assert_eq!(err(br#"{"auths": []}"#), "auths: must be an object of registries");
        assert_eq!(err(br#"{"auths": {"r": 1}}"#), "auths[r]: must be an object");
        assert_eq!(
            err(br#"{"auths": {"r": {"password": 1}}}"#),
            "auths[r].password: must be a string"
        );
        assert_eq!(
            err(br#"{"auths": {"r": {"auth": "bm9jb2xvbg=="}}}"#),
            "auths[r].auth: unable to parse auth field, must be formatted as base64(username:password)"
        );
        assert!(
            err(br#"{"auths": {"r": {"auth": "!!"}}}"#).starts_with("auths[r].auth: not base64")
        );
        assert_eq!(err(br#"{"HttpHeaders": 1}"#), "HttpHeaders: must be an object of strings");
        assert_eq!(
            parse_dockercfg(b"[1]").unwrap_err().to_string(),
            "(top level): must be an object of registries"
        );
    }
}
