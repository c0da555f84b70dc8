//! Service accounts end to end, apiserver side, with the real kubectl v1.35 and kube-rs:
//! apiserver-lite with the `ServiceAccount` admission plugin and a controller-manager making
//! each namespace's `default` account and `kube-root-ca.crt`. Tokens from `kubectl create
//! token` are JWTs that authenticate as their account (`kubectl auth whoami`), and are refused
//! (401) when expired, for another audience, signed by another key or bound to a deleted pod;
//! pods get `default` and the `kube-api-access-*` volume unless they opt out; a missing account
//! refuses the pod; the issuer's JWKS serves the key that verifies the tokens. No pod runs here:
//! the kubelet's side of these volumes is tested with the kubelet.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::time::Duration;

use apiserver_lite::serviceaccount::claims::{Claims, Issue, Ref};
use apiserver_lite::serviceaccount::jwt::{self, Token};
use apiserver_lite::serviceaccount::keys::SigningKey;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use e2e::apiserver::{ApiServer, SERVICE_ACCOUNTS};
use e2e::controllers::ControllerManager;
use e2e::eventually;
use k8s_openapi::api::authentication::v1::{
    TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(200);

struct Cluster {
    api: ApiServer,
    manager: ControllerManager,
}

impl Cluster {
    /// apiserver-lite with the plugin on, and the controllers that make namespace defaults;
    /// ready once `default/default` exists.
    async fn start() -> Self {
        let api = ApiServer::start_with(&[SERVICE_ACCOUNTS]).unwrap();
        let manager = ControllerManager::start(
            &api,
            &[
                "--leader-elect=false",
                "--controllers=serviceaccount-controller,root-ca-certificate-publisher-controller",
            ],
        )
        .unwrap();
        let me = Cluster { api, manager };
        eventually("the default ServiceAccount", WAIT, POLL, || async {
            me.api
                .kubectl(&["get", "serviceaccount", "default"])
                .ok()
                .filter(|o| o.status.success())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", me.logs()));
        me
    }

    fn logs(&self) -> String {
        format!(
            "apiserver:\n{}\ncontroller-manager:\n{}",
            self.api.log_tail(20),
            self.manager.log_tail(20)
        )
    }

    /// kubectl as the admin: (success, stdout, stderr).
    fn k(&self, args: &[&str]) -> (bool, String, String) {
        let o = self.api.kubectl(args).unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (o.status.success(), text(&o.stdout), text(&o.stderr))
    }

    fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.k(args);
        assert!(ok, "kubectl {args:?}: {err}\n{}", self.logs());
        out
    }

    /// `kubectl auth whoami -o json` with only `token` (a kubeconfig with no client
    /// certificate, as a pod has): the user info, or kubectl's error.
    fn whoami(&self, token: &str) -> Result<Value, String> {
        let kubeconfig = self.api.dir().join("token.kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
                self.api.port(),
                self.api.ca_path().display()
            ),
        )
        .unwrap();
        let kc = kubeconfig.to_str().unwrap();
        let (ok, out, err) =
            self.k(&["--kubeconfig", kc, "--token", token, "auth", "whoami", "-o", "json"]);
        if ok {
            Ok(serde_json::from_str::<Value>(&out).unwrap()["status"]["userInfo"].clone())
        } else {
            Err(err)
        }
    }

    /// The generated signing key (`<cert-dir>/sa.key`).
    fn signing_key(&self) -> SigningKey {
        SigningKey::from_file(&self.api.dir().join("pki/sa.key")).unwrap()
    }
}

fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// Claims for `ns/default` with uid `uid`, issued at `now` for `seconds`, for the API.
fn forged(uid: &str, now: i64, seconds: i64) -> Claims {
    Claims::new(Issue {
        issuer: ISSUER.into(),
        namespace: "default".into(),
        service_account: Ref::new("default", uid),
        bound: None,
        audiences: vec![ISSUER.into()],
        now,
        expiration_seconds: seconds,
        warn_after_seconds: None,
        jti: "forged".into(),
    })
}

fn unauthorized(r: Result<Value, String>, what: &str) {
    match r {
        Err(e) => assert!(e.contains("Unauthorized"), "{what}: {e}"),
        Ok(u) => panic!("{what} authenticated as {u}"),
    }
}

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: c\n    image: busybox:1.35\n";

#[tokio::test(flavor = "multi_thread")]
async fn tokens_authenticate_as_their_account_until_they_should_not() {
    let c = Cluster::start().await;

    // kubectl create token: a JWT for the audience asked.
    let token = c.ok(&["create", "token", "default", "--audience", "x"]);
    let token = token.trim();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let cl = claims(token);
    assert_eq!(cl["aud"], json!(["x"]));
    assert_eq!(cl["iss"], ISSUER);
    assert_eq!(cl["sub"], "system:serviceaccount:default:default");
    assert_eq!(cl["exp"].as_i64().unwrap() - cl["iat"].as_i64().unwrap(), 3600);
    unauthorized(c.whoami(token), "a token for audience x");

    // A token bound to a pod is the account, with the pod as extra; deleting the pod
    // revokes it.
    let pod_file = c.api.dir().join("web.yaml");
    std::fs::write(&pod_file, POD).unwrap();
    c.ok(&["create", "-f", pod_file.to_str().unwrap()]);
    let pod_uid = c.ok(&["get", "pod", "web", "-o", "jsonpath={.metadata.uid}"]);
    let bound = c.ok(&[
        "create",
        "token",
        "default",
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        "web",
    ]);
    let bound = bound.trim();
    let who = c.whoami(bound).unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
    let sa_uid = c.ok(&["get", "serviceaccount", "default", "-o", "jsonpath={.metadata.uid}"]);
    assert_eq!(who["username"], "system:serviceaccount:default:default");
    assert_eq!(who["uid"], sa_uid.as_str());
    assert_eq!(
        who["groups"],
        json!(["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"])
    );
    assert_eq!(who["extra"]["authentication.kubernetes.io/pod-name"], json!(["web"]));
    assert_eq!(who["extra"]["authentication.kubernetes.io/pod-uid"], json!([pod_uid]));
    // A kubelet checks tokens with a TokenReview: the same answer.
    let client = c.api.admin_client().await.unwrap();
    let reviews: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec { token: Some(bound.to_string()), audiences: None },
        ..Default::default()
    };
    let answer = reviews.create(&PostParams::default(), &review).await.unwrap().status.unwrap();
    assert_eq!(answer.authenticated, Some(true), "{:?}", answer.error);
    assert_eq!(answer.audiences.unwrap(), [ISSUER]);
    c.ok(&["delete", "pod", "web", "--wait=false"]);
    eventually("the pod gone", WAIT, POLL, || async {
        let (ok, _, _) = c.k(&["get", "pod", "web"]);
        (!ok).then_some(())
    })
    .await
    .unwrap();
    unauthorized(c.whoami(bound), "a token of a deleted pod");
    let answer = reviews.create(&PostParams::default(), &review).await.unwrap().status.unwrap();
    assert_eq!(
        (answer.authenticated, answer.error.as_deref()),
        (Some(false), Some("service account token has been invalidated"))
    );

    // kube-rs's TokenRequest; then tokens made with the real key but expired, and with
    // another key: only the well-formed one authenticates.
    let accounts: Api<ServiceAccount> = Api::namespaced(client, "default");
    let asked = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(600), ..Default::default() },
        ..Default::default()
    };
    let got =
        accounts.create_token_request("default", &PostParams::default(), &asked).await.unwrap();
    let kube_token = got.status.unwrap().token;
    assert!(c.whoami(&kube_token).is_ok());
    // Authenticated is not authorized (Node,RBAC): the account reads pods only once it is
    // bound to a role that grants it.
    let list_pods = || {
        let kc = c.api.dir().join("token.kubeconfig");
        c.k(&["--kubeconfig", kc.to_str().unwrap(), "--token", &kube_token, "get", "pods"])
    };
    let (ok, _, err) = list_pods();
    assert!(
        !ok && err.contains("pods is forbidden: User \"system:serviceaccount:default:default\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""),
        "{err}"
    );
    c.ok(&[
        "create",
        "rolebinding",
        "default-view",
        "--clusterrole=view",
        "--serviceaccount=default:default",
    ]);
    e2e::eventually::eventually(
        "the bound account to read pods",
        Duration::from_secs(10),
        Duration::from_millis(100),
        || async { list_pods().0.then_some(()) },
    )
    .await
    .unwrap();
    let now = jiff::Timestamp::now().as_second();
    let key = c.signing_key();
    let fresh = jwt::sign(&key, &forged(&sa_uid, now, 600)).unwrap();
    assert!(c.whoami(&fresh).is_ok(), "a token made with the key authenticates");
    let expired = jwt::sign(&key, &forged(&sa_uid, now - 7200, 600)).unwrap();
    unauthorized(c.whoami(&expired), "an expired token");
    let (other, _) = SigningKey::generate().unwrap();
    let foreign = jwt::sign(&other, &forged(&sa_uid, now, 600)).unwrap();
    unauthorized(c.whoami(&foreign), "a token signed by another key");

    // The issuer's documents: the JWKS holds the key that verifies the tokens.
    let config: Value =
        serde_json::from_str(&c.ok(&["get", "--raw", "/.well-known/openid-configuration"]))
            .unwrap();
    assert_eq!(config["issuer"], ISSUER);
    assert_eq!(config["jwks_uri"], format!("https://127.0.0.1:{}/openid/v1/jwks", c.api.port()));
    assert_eq!(config["id_token_signing_alg_values_supported"], json!(["ES256"]));
    let jwks: Value = serde_json::from_str(&c.ok(&["get", "--raw", "/openid/v1/jwks"])).unwrap();
    let header: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(bound.split('.').next().unwrap()).unwrap())
            .unwrap();
    let served = jwks["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kid"] == header["kid"])
        .unwrap_or_else(|| panic!("no key {} in {jwks}", header["kid"]));
    assert_eq!(served, &key.public().jwk());
    assert_eq!(Token::parse(bound).unwrap().verify(&[key.public().clone()]), Ok(()));
}

#[tokio::test(flavor = "multi_thread")]
async fn pods_get_their_account_and_its_token_volume_unless_they_opt_out() {
    let c = Cluster::start().await;
    let dir = c.api.dir().to_path_buf();
    let create = |name: &str, extra: &str| {
        let f = dir.join(format!("{name}.yaml"));
        std::fs::write(
            &f,
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra}  containers:\n  - name: c\n    image: busybox:1.35\n"
            ),
        )
        .unwrap();
        c.k(&["create", "-f", f.to_str().unwrap()])
    };

    let (ok, _, err) = create("plain", "");
    assert!(ok, "{err}");
    let pod: Value = serde_json::from_str(&c.ok(&["get", "pod", "plain", "-o", "json"])).unwrap();
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    let volume = &spec["volumes"][0];
    let name = volume["name"].as_str().unwrap();
    assert!(
        name.starts_with("kube-api-access-") && name.len() == "kube-api-access-".len() + 5,
        "{name}"
    );
    assert_eq!(
        volume["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]})
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": name, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );

    let (ok, _, err) = create("opted-out", "  automountServiceAccountToken: false\n");
    assert!(ok, "{err}");
    let pod: Value =
        serde_json::from_str(&c.ok(&["get", "pod", "opted-out", "-o", "json"])).unwrap();
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default");
    assert!(
        spec.get("volumes").is_none() && spec["containers"][0].get("volumeMounts").is_none(),
        "{spec}"
    );

    let (ok, _, err) = create("lost", "  serviceAccountName: missing\n");
    assert!(!ok);
    assert!(
        err.contains("Error from server (Forbidden)")
            && err.contains("pods \"lost\" is forbidden: error looking up service account default/missing: serviceaccount \"missing\" not found"),
        "{err}"
    );

    // The CA the volume carries: the controller-manager publishes the apiserver's CA in every
    // namespace, new ones too.
    let ca = std::fs::read_to_string(c.api.ca_path()).unwrap();
    c.ok(&["create", "namespace", "team-a"]);
    for ns in ["default", "team-a"] {
        let published = eventually("kube-root-ca.crt", WAIT, POLL, || async {
            let (ok, out, _) = c.k(&[
                "get",
                "configmap",
                "kube-root-ca.crt",
                "-n",
                ns,
                "-o",
                "jsonpath={.data.ca\\.crt}",
            ]);
            ok.then_some(out)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", c.logs()));
        assert_eq!(published.trim(), ca.trim(), "in {ns}");
    }
}
