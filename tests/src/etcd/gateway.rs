//! What the harness asks etcd, over plain TCP (HTTP/1.0): `GET /health`, and the gRPC
//! gateway's JSON (`/v3/maintenance/status`, `/v3/kv/{put,range}`: keys and values base64,
//! uint64 fields JSON strings, zero values left out).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;

use super::EtcdCluster;

/// One request's timeout: loopback, so a slow answer is a member in trouble.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// A member's status, as `POST /v3/maintenance/status` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The member's own raft ID.
    pub member_id: u64,
    /// The leader's raft ID as this member sees it; 0 when it knows of none.
    pub leader: u64,
    pub raft_term: u64,
    /// The store's revision.
    pub revision: u64,
}

impl EtcdCluster {
    /// Member `i`'s status as it reports it.
    pub fn status(&self, i: usize) -> anyhow::Result<Status> {
        let m = self.member(i)?;
        let (code, body) = http(m.client, "POST", "/v3/maintenance/status", "{}")
            .with_context(|| format!("etcd {} status", m.name))?;
        if code != 200 {
            bail!("etcd {} status: HTTP {code}: {body}", m.name);
        }
        parse_status(&body).with_context(|| format!("etcd {} status: {body}", m.name))
    }

    /// Writes `key` through the first running member.
    pub fn put(&self, key: &str, value: &[u8]) -> anyhow::Result<()> {
        let body = serde_json::json!({"key": B64.encode(key), "value": B64.encode(value)});
        self.gateway(self.running()?, "/v3/kv/put", &body).map(drop)
    }

    /// Reads `key` (linearizable) through the first running member.
    pub fn get(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        self.range(self.running()?, key, false)
    }

    /// Reads `key` from member `i`'s own copy (a serializable read: no leader asked), to see
    /// what that member has applied.
    pub fn get_from(&self, i: usize, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        self.range(i, key, true)
    }

    /// Every key starting with `prefix`, sorted (e.g. what apiserver-lite stored under its
    /// `--etcd-prefix`).
    pub fn keys(&self, prefix: &str) -> anyhow::Result<Vec<String>> {
        let body = serde_json::json!({
            "key": B64.encode(prefix),
            "range_end": B64.encode(prefix_end(prefix.as_bytes())),
            "keys_only": true,
        });
        let answer = self.gateway(self.running()?, "/v3/kv/range", &body)?;
        let kvs = answer["kvs"].as_array().cloned().unwrap_or_default();
        kvs.iter()
            .map(|kv| {
                let key = B64.decode(kv["key"].as_str().unwrap_or_default())?;
                Ok(String::from_utf8_lossy(&key).into_owned())
            })
            .collect()
    }

    fn range(&self, i: usize, key: &str, serializable: bool) -> anyhow::Result<Option<Vec<u8>>> {
        let body = serde_json::json!({"key": B64.encode(key), "serializable": serializable});
        let answer = self.gateway(i, "/v3/kv/range", &body)?;
        match answer["kvs"][0]["value"].as_str() {
            Some(value) => Ok(Some(B64.decode(value)?)),
            // A key with an empty value has its value left out (proto3 JSON).
            None if answer["kvs"][0].is_object() => Ok(Some(Vec::new())),
            None => Ok(None),
        }
    }

    /// One gRPC-gateway call on member `i`; its JSON answer, or the error it gave.
    fn gateway(
        &self,
        i: usize,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<serde_json::Value> {
        let m = self.member(i)?;
        let (code, answer) = http(m.client, "POST", path, &body.to_string())
            .with_context(|| format!("etcd {} {path}", m.name))?;
        if code != 200 {
            bail!("etcd {} {path}: HTTP {code}: {}", m.name, answer.trim());
        }
        serde_json::from_str(&answer).with_context(|| format!("etcd {} {path}: {answer}", m.name))
    }

    /// The first running member.
    fn running(&self) -> anyhow::Result<usize> {
        (0..self.members.len()).find(|&i| self.is_running(i)).context("no etcd member is running")
    }
}

/// `GET /health` answered `{"health":"true"}`, or why not.
pub(super) fn health(addr: SocketAddr) -> anyhow::Result<()> {
    let (code, body) = http(addr, "GET", "/health", "")?;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    if code == 200 && v["health"] == "true" {
        Ok(())
    } else {
        bail!("/health: HTTP {code}: {}", body.trim())
    }
}

/// The fields of a status answer; uint64s come as JSON strings from the gRPC gateway.
pub(super) fn parse_status(body: &str) -> anyhow::Result<Status> {
    let v: serde_json::Value = serde_json::from_str(body)?;
    let number = |value: &serde_json::Value, what: &str| -> anyhow::Result<u64> {
        match value {
            serde_json::Value::String(s) => s.parse().with_context(|| format!("{what}: {s}")),
            serde_json::Value::Number(n) => n.as_u64().with_context(|| format!("{what}: {n}")),
            // proto3 JSON leaves zero values out.
            serde_json::Value::Null => Ok(0),
            other => bail!("{what}: {other}"),
        }
    };
    Ok(Status {
        member_id: number(&v["header"]["member_id"], "header.member_id")?,
        leader: number(&v["leader"], "leader")?,
        raft_term: number(&v["raftTerm"], "raftTerm")?,
        revision: number(&v["header"]["revision"], "header.revision")?,
    })
}

/// The end of the range of keys starting with `prefix`, as etcd's clients compute it: the
/// prefix with its last byte below 0xff incremented (and what follows dropped); `\0` (every
/// key) when there is none.
pub(super) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// One HTTP/1.0 request on loopback; the status code and body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, REQUEST_TIMEOUT)?;
    s.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    s.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = String::new();
    s.read_to_string(&mut response)?;
    let code = response.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((code, body))
}
