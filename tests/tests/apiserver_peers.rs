//! Several apiserver-lite processes for one cluster: a peer started from a first apiserver shares
//! its PKI and flags and serves on a port of its own; on one etcd (`ApiServer::start_on` an
//! `EtcdCluster`) the two serve the same objects, stored under their `--etcd-prefix`, and keep
//! serving when the etcd leader of three members is killed.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use e2e::apiserver::ApiServer;
use e2e::etcd::EtcdCluster;
use e2e::eventually;

/// An election (1 s timeout) and the apiservers' clients finding the new leader, on a loaded
/// 2-core machine.
const WAIT: Duration = Duration::from_secs(30);

#[test]
fn a_peer_shares_the_first_pki_and_flags_and_serves_on_its_own_port() {
    let first = ApiServer::start_for_nodes(&["node-a"]).unwrap();
    let peer = first.start_peer(&["--v=1"]).unwrap();
    assert_ne!(peer.port(), first.port());
    assert_ne!(peer.dir(), first.dir());
    assert_eq!(peer.dir().parent(), first.dir().parent(), "beside the first");

    // One CA, one serving certificate, one admin identity, one service-account key.
    for file in ["ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt", "sa.key"] {
        let read = |server: &ApiServer| std::fs::read(server.dir().join("pki").join(file)).unwrap();
        assert_eq!(read(&peer), read(&first), "pki/{file} differs");
    }
    assert_eq!(peer.ca_path(), peer.dir().join("pki/ca.crt"));

    // Its kubeconfigs are its own: written by the peer for its own address.
    let kubeconfig = std::fs::read_to_string(peer.kubeconfig()).unwrap();
    assert!(kubeconfig.contains(&format!("https://127.0.0.1:{}", peer.port())), "{kubeconfig}");
    assert!(!kubeconfig.contains(&format!(":{}", first.port())), "{kubeconfig}");
    let scheduler = std::fs::read_to_string(peer.component_kubeconfig("scheduler")).unwrap();
    assert!(scheduler.contains(&format!("https://127.0.0.1:{}", peer.port())), "{scheduler}");

    // The first's flags came along, and the extra ones: the node tokens authenticate there too.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", peer.pid().unwrap())).unwrap();
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    assert!(args.contains(&&b"--token-auth-file"[..]) && args.contains(&&b"--v=1"[..]));
    let me = peer.kubectl_run(&["auth", "whoami"]).unwrap();
    assert!(me.ok && me.out.contains("system:masters"), "{}{}", me.out, me.err);
    let node = peer.node_kubeconfig("node-a").unwrap();
    let me = peer.kubectl_run(&["--kubeconfig", node.to_str().unwrap(), "auth", "whoami"]).unwrap();
    assert!(me.ok && me.out.contains("system:node:node-a"), "{}{}", me.out, me.err);

    // The first's admin kubeconfig, pointed at the peer, works as it is: same CA, same cert.
    let elsewhere = std::fs::read_to_string(first.kubeconfig())
        .unwrap()
        .replace(&format!(":{}", first.port()), &format!(":{}", peer.port()));
    let path = peer.dir().join("first-admin.kubeconfig");
    std::fs::write(&path, elsewhere).unwrap();
    let r = peer.kubectl_run(&["--kubeconfig", path.to_str().unwrap(), "get", "ns", "default"]);
    let r = r.unwrap();
    assert!(r.ok && r.out.contains("default"), "{}{}", r.out, r.err);
}

#[test]
fn a_peer_of_a_peer_is_a_peer_of_the_first() {
    let first = ApiServer::start().unwrap();
    let second = first.start_peer(&[]).unwrap();
    let third = second.start_peer(&[]).unwrap();
    let ca = |s: &ApiServer| std::fs::read(s.ca_path()).unwrap();
    assert_eq!(ca(&third), ca(&first));
    let ports = [first.port(), second.port(), third.port()];
    assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2], "{ports:?}");
    assert!(third.kubectl_run(&["get", "ns", "default"]).unwrap().ok);
}

#[test]
fn two_apiservers_on_one_etcd_serve_the_same_objects_under_its_prefix() {
    let etcd = EtcdCluster::start(1).unwrap();
    let first = ApiServer::start_on(&etcd, &["--etcd-prefix=/e2e-peers"]).unwrap();
    let peer = first.start_peer(&[]).unwrap();

    let ok = |server: &ApiServer, args: &[&str]| {
        let r = server.kubectl_run(args).unwrap();
        assert!(r.ok, "kubectl {}: {}{}", args.join(" "), r.out, r.err);
        r.out
    };
    ok(&first, &["create", "namespace", "team"]);
    assert_eq!(ok(&peer, &["get", "namespace", "team", "-o", "name"]), "namespace/team\n");
    ok(&peer, &["create", "configmap", "settings", "-n", "team", "--from-literal=a=b"]);
    let data =
        ok(&first, &["get", "configmap", "settings", "-n", "team", "-o", "jsonpath={.data.a}"]);
    assert_eq!(data, "b");

    // Both wrote under the prefix, with upstream's key layout, and nowhere else.
    let keys = etcd.keys("/e2e-peers/").unwrap();
    for key in ["/e2e-peers/namespaces/team", "/e2e-peers/configmaps/team/settings"] {
        assert!(keys.iter().any(|k| k == key), "no {key} in {keys:?}");
    }
    assert_eq!(etcd.keys("/registry/").unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn apiservers_on_three_etcd_members_keep_serving_when_the_etcd_leader_is_killed() {
    let mut etcd = EtcdCluster::start(3).unwrap();
    let first = ApiServer::start_on(&etcd, &[]).unwrap();
    let peer = first.start_peer(&[]).unwrap();
    let leader = eventually("an etcd leader", WAIT, Duration::from_millis(100), || {
        std::future::ready(etcd.leader().ok())
    })
    .await
    .unwrap();

    etcd.kill(leader).unwrap();
    // Each apiserver writes and reads again once the other two members elected a leader,
    // whichever member it was talking to.
    for (server, name) in [(&first, "after-first"), (&peer, "after-peer")] {
        eventually(&format!("creating namespace {name}"), WAIT, Duration::from_millis(500), || {
            let r = server.kubectl_run(&["create", "namespace", name]).unwrap();
            std::future::ready((r.ok || r.err.contains("AlreadyExists")).then_some(()))
        })
        .await
        .unwrap();
    }
    // From then on every request is answered, as kube-apiserver's etcd client retries an
    // unavailable member on another one: none is a 503 naming the killed member.
    for n in 0..20 {
        let server = if n % 2 == 0 { &first } else { &peer };
        let r =
            server.kubectl_run(&["get", "namespace", "after-first", "after-peer", "-o", "name"]);
        let r = r.unwrap();
        assert_eq!(r.out, "namespace/after-first\nnamespace/after-peer\n", "read {n}: {}", r.err);
    }

    // The killed member comes back and holds what was written without it.
    etcd.restart(leader).unwrap();
    let key = "/registry/namespaces/after-peer";
    eventually("the restarted member to catch up", WAIT, Duration::from_millis(100), || {
        std::future::ready(etcd.get_from(leader, key).ok().flatten().map(drop))
    })
    .await
    .unwrap();
}
