//! The harness's own logic, without etcd: refusals and the gateway's JSON.

use super::gateway::{parse_status, prefix_end};
use super::*;

#[test]
fn a_missing_binary_fails_the_start_naming_it() {
    let err = EtcdCluster::start_binary(Path::new("/nonexistent/etcd"), 1).unwrap_err();
    assert!(format!("{err:#}").contains("/nonexistent/etcd"), "{err:#}");
    let err = crate::require::tool("no-such-etcd-binary").unwrap_err().to_string();
    assert!(err.contains("no-such-etcd-binary") && err.contains("install-deps.sh"), "{err}");
}

#[test]
fn no_members_is_refused() {
    let err = EtcdCluster::start_binary(Path::new("etcd"), 0).unwrap_err();
    assert!(err.to_string().contains("at least one member"), "{err}");
}

#[test]
fn a_prefix_range_ends_past_its_last_key() {
    assert_eq!(prefix_end(b"/registry/"), b"/registry0");
    assert_eq!(prefix_end(b"a\xff"), b"b");
    assert_eq!(prefix_end(b"\xff\xff"), b"\0");
    assert_eq!(prefix_end(b""), b"\0");
}

#[test]
fn status_reads_the_gateway_strings_and_missing_zeros() {
    let body = r#"{"header":{"cluster_id":"1","member_id":"8314758726340209135","revision":"7","raft_term":"2"},"version":"3.4.23","leader":"13832262890891856316","raftTerm":"2"}"#;
    let s = parse_status(body).unwrap();
    assert_eq!(
        s,
        Status {
            member_id: 8314758726340209135,
            leader: 13832262890891856316,
            raft_term: 2,
            revision: 7
        }
    );
    let none = parse_status(r#"{"header":{"member_id":"5"}}"#).unwrap();
    assert_eq!((none.leader, none.revision), (0, 0));
    assert!(parse_status(r#"{"leader":"x"}"#).is_err());
    assert!(parse_status("not json").is_err());
}
