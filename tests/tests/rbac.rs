//! RBAC with the real kubectl v1.35 against apiserver-lite (`--authorization-mode` default,
//! `Node,RBAC`): a token-file user bound to `view` in one namespace reads pods there, not
//! Secrets, and nothing in another namespace; `kubectl auth can-i` agrees, also asked by the
//! admin with `--as`; `kubectl create role/clusterrole/rolebinding/clusterrolebinding` work;
//! a role or binding granting more than its creator holds is refused with upstream's message.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use e2e::apiserver::{ApiServer, KubectlRun as Run};

struct Cluster {
    api: ApiServer,
    alice: PathBuf,
    _tokens: tempfile::TempDir,
}

impl Cluster {
    fn start() -> Self {
        let tokens = tempfile::tempdir().unwrap();
        let csv = tokens.path().join("tokens.csv");
        std::fs::write(&csv, "alice-token,alice,6001,\"devs\"\n").unwrap();
        let api = ApiServer::start_with(&["--token-auth-file", csv.to_str().unwrap()]).unwrap();
        let alice = api.token_kubeconfig("alice", "alice-token").unwrap();
        Self { api, alice, _tokens: tokens }
    }

    /// kubectl as the admin (system:masters).
    fn admin(&self, args: &[&str]) -> Run {
        self.api.kubectl_run(args).unwrap()
    }

    fn admin_ok(&self, args: &[&str]) -> String {
        let r = self.admin(args);
        assert!(r.ok, "kubectl {args:?}: {}\n{}\n{}", r.out, r.err, self.api.log_tail(20));
        r.out
    }

    /// kubectl as alice (bearer token only).
    fn alice(&self, args: &[&str]) -> Run {
        as_user(&self.api, &self.alice, args)
    }

    /// Polls `f` (the index follows the store by a watch: a new binding takes a moment).
    fn eventually(&self, what: &str, mut f: impl FnMut() -> Option<String>) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(v) = f() {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}\n{}",
                self.api.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn as_user(api: &ApiServer, kubeconfig: &Path, args: &[&str]) -> Run {
    let mut all = vec!["--kubeconfig", kubeconfig.to_str().unwrap()];
    all.extend_from_slice(args);
    api.kubectl_run(&all).unwrap()
}

#[test]
fn a_user_bound_to_view_reads_pods_in_its_namespace_only_and_can_i_agrees() {
    let c = Cluster::start();
    for ns in ["a", "b"] {
        c.admin_ok(&["create", "namespace", ns]);
        c.admin_ok(&["-n", ns, "run", "web", "--image=busybox", "--restart=Never"]);
        c.admin_ok(&["-n", ns, "create", "secret", "generic", "s", "--from-literal=k=v"]);
    }

    // Nothing before a binding: upstream's 403, word for word.
    let r = c.alice(&["-n", "a", "get", "pods"]);
    assert!(!r.ok, "{}", r.out);
    assert!(
        r.err.contains("Error from server (Forbidden): pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"a\""),
        "{}",
        r.err
    );

    let out = c.admin_ok(&[
        "-n",
        "a",
        "create",
        "rolebinding",
        "alice-view",
        "--clusterrole=view",
        "--user=alice",
    ]);
    assert_eq!(out, "rolebinding.rbac.authorization.k8s.io/alice-view created\n");
    let pods = c.eventually("alice reads pods in a", || {
        let r = c.alice(&["-n", "a", "get", "pods", "-o", "name"]);
        r.ok.then_some(r.out)
    });
    assert_eq!(pods, "pod/web\n");
    let r = c.alice(&["-n", "a", "get", "secrets"]);
    assert!(
        !r.ok && r.err.contains("secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"a\""),
        "{}",
        r.err
    );
    let r = c.alice(&["-n", "a", "get", "secret", "s"]);
    assert!(
        !r.ok
            && r.err.contains(
                "secrets \"s\" is forbidden: User \"alice\" cannot get resource \"secrets\""
            ),
        "{}",
        r.err
    );
    let r = c.alice(&["-n", "b", "get", "pods"]);
    assert!(!r.ok && r.err.contains("in the namespace \"b\""), "{}", r.err);
    let r = c.alice(&["-n", "a", "delete", "pod", "web"]);
    assert!(!r.ok && r.err.contains("cannot delete resource \"pods\""), "{}", r.err);
    let r = c.alice(&["get", "nodes"]);
    assert!(
        !r.ok && r.err.contains("nodes is forbidden: User \"alice\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"),
        "{}",
        r.err
    );

    // kubectl auth can-i agrees, asked by alice and by the admin as alice.
    for (args, want) in [
        (vec!["auth", "can-i", "list", "pods", "-n", "a"], "yes"),
        (vec!["auth", "can-i", "get", "pods/log", "-n", "a"], "yes"),
        (vec!["auth", "can-i", "get", "secrets", "-n", "a"], "no"),
        (vec!["auth", "can-i", "list", "pods", "-n", "b"], "no"),
        (vec!["auth", "can-i", "create", "pods", "-n", "a"], "no"),
    ] {
        let mine = c.alice(&args);
        assert_eq!(mine.out.trim(), want, "alice {args:?}: {}", mine.err);
        let mut as_alice = args.clone();
        as_alice.push("--as=alice");
        let theirs = c.admin(&as_alice);
        assert_eq!(theirs.out.trim(), want, "admin --as=alice {args:?}: {}", theirs.err);
    }
    // --as needs `impersonate`: alice may not act as the admin.
    let r = c.alice(&["-n", "a", "get", "pods", "--as=bob"]);
    assert!(
        !r.ok && r.err.contains("users \"bob\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"),
        "{}",
        r.err
    );
    // --list: view's rules in a (pods among them), none of them in b.
    let listed = c.alice(&["auth", "can-i", "--list", "-n", "a"]);
    assert!(listed.ok, "{}", listed.err);
    assert!(listed.out.lines().any(|l| l.starts_with("pods ")), "{}", listed.out);
    assert!(listed.out.contains("selfsubjectaccessreviews.authorization.k8s.io"), "{}", listed.out);
    let elsewhere = c.alice(&["auth", "can-i", "--list", "-n", "b"]);
    assert!(!elsewhere.out.lines().any(|l| l.starts_with("pods ")), "{}", elsewhere.out);
}

#[test]
fn kubectl_creates_roles_and_bindings_and_escalation_is_refused() {
    let c = Cluster::start();
    c.admin_ok(&["create", "namespace", "a"]);

    // kubectl's generators (protobuf bodies), and the kinds listed back.
    assert_eq!(
        c.admin_ok(&[
            "-n",
            "a",
            "create",
            "role",
            "pod-reader",
            "--verb=get,list",
            "--resource=pods"
        ]),
        "role.rbac.authorization.k8s.io/pod-reader created\n"
    );
    assert_eq!(
        c.admin_ok(&[
            "create",
            "clusterrole",
            "secret-reader",
            "--verb=get,list",
            "--resource=secrets"
        ]),
        "clusterrole.rbac.authorization.k8s.io/secret-reader created\n"
    );
    assert_eq!(
        c.admin_ok(&[
            "create",
            "clusterrole",
            "aggregated",
            "--aggregation-rule=example.com/agg=true"
        ]),
        "clusterrole.rbac.authorization.k8s.io/aggregated created\n"
    );
    assert_eq!(
        c.admin_ok(&[
            "-n",
            "a",
            "create",
            "rolebinding",
            "bob-reads",
            "--role=pod-reader",
            "--user=bob",
            "--serviceaccount=a:web"
        ]),
        "rolebinding.rbac.authorization.k8s.io/bob-reads created\n"
    );
    assert_eq!(
        c.admin_ok(&[
            "create",
            "clusterrolebinding",
            "devs-secrets",
            "--clusterrole=secret-reader",
            "--group=devs"
        ]),
        "clusterrolebinding.rbac.authorization.k8s.io/devs-secrets created\n"
    );
    let got = c.admin_ok(&[
        "get",
        "clusterrolebinding",
        "devs-secrets",
        "-o",
        "jsonpath={.roleRef.name} {.subjects[0].kind} {.subjects[0].name} {.subjects[0].apiGroup}",
    ]);
    assert_eq!(got, "secret-reader Group devs rbac.authorization.k8s.io");
    let wide = c.admin_ok(&["-n", "a", "get", "rolebinding", "bob-reads", "-o", "wide"]);
    let columns: Vec<&str> = wide.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        (columns[0], columns[1], columns[3]),
        ("bob-reads", "Role/pod-reader", "bob"),
        "{wide}"
    );
    assert_eq!(columns.last(), Some(&"a/web"), "{wide}");
    let roles = c.admin_ok(&["-n", "a", "get", "roles"]);
    assert!(roles.starts_with("NAME") && roles.contains("CREATED AT"), "{roles}");
    assert!(roles.contains("pod-reader"), "{roles}");
    // The bootstrap policy is there, with upstream's bindings and aggregation.
    let view = c.admin_ok(&[
        "get",
        "clusterrole",
        "view",
        "-o",
        "jsonpath={.metadata.labels.kubernetes\\.io/bootstrapping} {.rules[0].resources[0]}",
    ]);
    assert_eq!(view, "rbac-defaults pods");
    c.admin_ok(&[
        "get",
        "clusterrolebinding",
        "cluster-admin",
        "system:basic-user",
        "system:controller:replicaset-controller",
    ]);

    // alice (group devs) may now read secrets anywhere.
    c.eventually("devs read secrets", || {
        let r = c.alice(&["auth", "can-i", "get", "secrets", "-n", "kube-system"]);
        (r.out.trim() == "yes").then_some(r.out)
    });
    // roleRef never changes.
    let r = c.admin(&[
        "-n",
        "a",
        "patch",
        "rolebinding",
        "bob-reads",
        "--type=merge",
        "-p",
        "{\"roleRef\":{\"name\":\"other\"}}",
    ]);
    assert!(!r.ok && r.err.contains("cannot change roleRef"), "{}", r.err);

    // alice gets admin in a: she may write roles there, but only with what she holds.
    c.admin_ok(&[
        "-n",
        "a",
        "create",
        "rolebinding",
        "alice-admin",
        "--clusterrole=admin",
        "--user=alice",
    ]);
    c.eventually("alice administers a", || {
        let r = c.alice(&["auth", "can-i", "create", "roles", "-n", "a"]);
        (r.out.trim() == "yes").then_some(r.out)
    });
    let r = c.alice(&["-n", "a", "create", "role", "fine", "--verb=get", "--resource=pods"]);
    assert!(r.ok, "{}", r.err);
    let r = c.alice(&["-n", "a", "create", "role", "too-much", "--verb=get", "--resource=nodes"]);
    assert!(!r.ok);
    assert!(
        r.err.contains(
            "Error from server (Forbidden): roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}"
        ),
        "{}",
        r.err
    );
    let r = c.alice(&[
        "-n",
        "a",
        "create",
        "rolebinding",
        "grab",
        "--clusterrole=cluster-admin",
        "--user=alice",
    ]);
    assert!(
        !r.ok && r.err.contains("rolebindings.rbac.authorization.k8s.io \"grab\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:"),
        "{}",
        r.err
    );
    // Binding a role she holds is fine.
    let r = c.alice(&["-n", "a", "create", "rolebinding", "share", "--role=fine", "--user=carol"]);
    assert!(r.ok, "{}", r.err);
    // A cluster role is beyond a namespace admin.
    let r = c.alice(&["create", "clusterrole", "mine", "--verb=get", "--resource=pods"]);
    assert!(!r.ok && r.err.contains("clusterroles.rbac.authorization.k8s.io is forbidden: User \"alice\" cannot create resource \"clusterroles\""), "{}", r.err);
}

#[test]
fn kubectl_auth_reconcile_creates_and_extends_roles_and_a_binding_to_a_missing_role_grants_nothing()
{
    let c = Cluster::start();
    c.admin_ok(&["create", "namespace", "a"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rbac.yaml");
    let policy = |verbs: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: cm-reader, namespace: a}}\n\
             rules: [{{apiGroups: [\"\"], resources: [configmaps], verbs: [{verbs}]}}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: cm-reader, namespace: a}}\n\
             roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}}\n\
             subjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}}]\n"
        )
    };
    let f = file.to_str().unwrap();

    // Reconcile creates what is missing: the role and its binding.
    std::fs::write(&file, policy("get")).unwrap();
    let out = c.admin_ok(&["auth", "reconcile", "-f", f]);
    assert!(out.contains("role.rbac.authorization.k8s.io/cm-reader reconciled"), "{out}");
    assert!(out.contains("rolebinding.rbac.authorization.k8s.io/cm-reader reconciled"), "{out}");
    let can = |verb: &str| c.alice(&["auth", "can-i", verb, "configmaps", "-n", "a"]).out;
    c.eventually("the reconciled binding to take effect", || {
        (can("get") == "yes\n").then_some(String::new())
    });
    assert_eq!(can("list"), "no\n");

    // Run again with a rule widened: the role gains the verb (reconcile adds, never removes
    // without --remove-extra-permissions), the binding is left as it is.
    std::fs::write(&file, policy("get, list")).unwrap();
    c.admin_ok(&["auth", "reconcile", "-f", f]);
    let verbs =
        c.admin_ok(&["-n", "a", "get", "role", "cm-reader", "-o", "jsonpath={.rules[*].verbs}"]);
    assert_eq!(verbs, r#"["get"] ["list"]"#, "reconcile adds what was missing beside the old rule");
    c.eventually("the widened role to take effect", || {
        (can("list") == "yes\n").then_some(String::new())
    });
    std::fs::write(&file, policy("get")).unwrap();
    c.admin_ok(&["auth", "reconcile", "-f", f]);
    let kept =
        c.admin_ok(&["-n", "a", "get", "role", "cm-reader", "-o", "jsonpath={.rules[*].verbs}"]);
    assert!(kept.contains("list"), "reconcile without --remove-extra-permissions keeps: {kept}");
    c.admin_ok(&["auth", "reconcile", "-f", f, "--remove-extra-permissions"]);
    let verbs =
        c.admin_ok(&["-n", "a", "get", "role", "cm-reader", "-o", "jsonpath={.rules[*].verbs}"]);
    assert_eq!(verbs, r#"["get"]"#);

    // A binding to a role that does not exist is stored and grants nothing (as upstream);
    // the write warns, and describe shows the name the binding waits for.
    let r =
        c.admin(&["-n", "a", "create", "rolebinding", "ghost", "--role=missing", "--user=alice"]);
    assert!(r.ok, "{}", r.err);
    assert!(
        r.err.contains(
            "Warning: roleRef names Role \"missing\", which does not exist in namespace \"a\": this binding grants nothing until it does"
        ),
        "{}",
        r.err
    );
    // can-i answers no, with the evaluation error upstream's RBAC reports for the binding
    // (once the authorizer's index, kept from a watch, has the binding).
    let want = "no - RBAC: role.rbac.authorization.k8s.io \"missing\" not found\n";
    c.eventually("can-i to name the missing role", || {
        let out = c.alice(&["auth", "can-i", "get", "secrets", "-n", "a"]).out;
        (out == want).then_some(out)
    });
    let described = c.admin_ok(&["-n", "a", "describe", "rolebinding", "ghost"]);
    assert!(
        described.contains("Kind:  Role") && described.contains("Name:  missing"),
        "{described}"
    );
    let r = c.admin(&["-n", "a", "describe", "role", "missing"]);
    assert!(
        !r.ok && r.err.contains("roles.rbac.authorization.k8s.io \"missing\" not found"),
        "{}",
        r.err
    );
    // Once the role exists the binding grants it, and a further write no longer warns.
    c.admin_ok(&["-n", "a", "create", "role", "missing", "--verb=get", "--resource=secrets"]);
    c.eventually("the late role to take effect", || {
        (c.alice(&["auth", "can-i", "get", "secrets", "-n", "a"]).out == "yes\n")
            .then_some(String::new())
    });
    let r = c.admin(&["-n", "a", "label", "rolebinding", "ghost", "seen=yes"]);
    assert!(r.ok && !r.err.contains("Warning"), "{}", r.err);
}
