//! Several apiserver-lite processes for one cluster: a peer started from a first apiserver shares
//! its PKI and flags and serves on a port of its own; on one etcd (`ApiServer::start_on` an
//! `EtcdCluster`) the two serve the same objects, stored under their `--etcd-prefix`.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::apiserver::ApiServer;
use e2e::etcd::EtcdCluster;

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
