//! kubectl-lite beside the real kubectl v1.35: one script run through each against its own
//! apiserver-lite, stdout, stderr and exit codes compared after masking what differs by
//! nature (ages, UIDs, timestamps, resource versions).

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use e2e::apiserver::ApiServer;

const CM: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: c1
  labels: {app: x, tier: web}
data:
  a: \"1\"
  html: \"<b>&\"
  text: |
    line one
    line two
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: nginx-pod
  labels:
    app: nginx
spec:
  containers:
  - name: nginx
    image: nginx:1.8
";

const MULTI: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: c2, labels: {app: x}}
data: {k: v}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
";

const DEPLOY: &str = r#"{"apiVersion": "apps/v1", "kind": "Deployment",
 "metadata": {"name": "web", "labels": {"app": "web"}},
 "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
  "template": {"metadata": {"labels": {"app": "web"}},
   "spec": {"containers": [{"name": "web", "image": "nginx:1.8"}]}}}}"#;

/// A Deployment applied, then changed: a label changed, an annotation removed, the image
/// changed and a container port added.
const APPLY_V1: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  labels: {app: app, tier: web}
  annotations: {note: first}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - name: app
        image: nginx:1.8
";

const APPLY_V2: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  labels: {app: app, tier: api}
spec:
  replicas: 1
  selector: {matchLabels: {app: app}}
  template:
    metadata: {labels: {app: app}}
    spec:
      containers:
      - name: app
        image: nginx:1.9
        ports:
        - containerPort: 80
";

const SSA: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: ssa}
data: {a: \"1\", b: \"2\"}
";

const SSA_OTHER: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: ssa}
data: {a: \"other\"}
";

/// A pending pod with most of what `describe pod` prints: init container, ports, command,
/// resources, probes, every kind of environment entry, mounts, volumes, node selector,
/// tolerations and spread constraints.
const DESCRIBE_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web, tier: front}
  annotations: {note: hello, long: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}
spec:
  nodeSelector: {disk: ssd}
  tolerations:
  - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
  - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
  initContainers:
  - name: setup
    image: busybox:1.35
    command: [sh, -c, \"echo one\\necho two\"]
  containers:
  - name: main
    image: nginx:1.8
    args: [--port, \"80\"]
    ports:
    - {containerPort: 80, name: http}
    - {containerPort: 53, protocol: UDP}
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: \"1\", memory: 128Mi}
    livenessProbe:
      httpGet: {path: /healthz, port: 80}
      initialDelaySeconds: 3
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
    startupProbe:
      tcpSocket: {port: http}
    envFrom:
    - configMapRef: {name: c1}
      prefix: CM_
    - secretRef: {name: s1, optional: true}
    env:
    - {name: PLAIN, value: v}
    - {name: MULTI, value: \"a\\nb\"}
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: NODE
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: MEM
      valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}
    - name: CPU
      valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}
    - name: PASS
      valueFrom: {secretKeyRef: {name: s1, key: password}}
    - name: COLOR
      valueFrom: {configMapKeyRef: {name: c1, key: a, optional: true}}
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: conf, mountPath: /etc/conf, readOnly: true, subPath: app.conf}
  - name: side
    image: busybox:1.35
  volumes:
  - name: data
    emptyDir: {medium: Memory, sizeLimit: 1Gi}
  - name: host
    hostPath: {path: /var/log, type: Directory}
  - name: conf
    configMap: {name: c1}
  - name: sec
    secret: {secretName: s1, optional: true}
  - name: claim
    persistentVolumeClaim: {claimName: pvc1, readOnly: true}
  - name: info
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
  - name: all
    projected:
      sources:
      - secret: {name: s1}
      - configMap: {name: c1, optional: true}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
";

/// A node as a file gives it (status included), a pod bound to it, its lease and an event
/// the kubelet would record about it (UID = the node's name).
const DESCRIBE_NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: n-desc
  labels: {node-role.kubernetes.io/worker: \"\", kubernetes.io/hostname: n-desc, disk: ssd}
  annotations: {node.alpha.kubernetes.io/ttl: \"0\"}
spec:
  podCIDR: 10.1.0.0/24
  podCIDRs: [10.1.0.0/24]
  taints:
  - {key: dedicated, value: web, effect: NoSchedule}
  - {key: gpu, effect: PreferNoSchedule}
status:
  capacity: {cpu: \"4\", memory: 8Gi, pods: \"110\", ephemeral-storage: 100Gi, hugepages-2Mi: \"0\", example.com/dongle: \"2\"}
  allocatable: {cpu: 3800m, memory: 7Gi, pods: \"110\", ephemeral-storage: 90Gi, hugepages-2Mi: \"0\", example.com/dongle: \"2\"}
  addresses:
  - {type: InternalIP, address: 192.0.2.10}
  - {type: Hostname, address: n-desc}
  nodeInfo: {machineID: m1, systemUUID: s1, bootID: b1, kernelVersion: 6.1.0, osImage: Debian, containerRuntimeVersion: containerd://1.7.0, kubeletVersion: v1.35.0, kubeProxyVersion: \"\", operatingSystem: linux, architecture: amd64}
";

const DESCRIBE_BOUND: &str = "apiVersion: v1
kind: Pod
metadata: {name: bound, labels: {app: bound}}
spec:
  nodeName: n-desc
  containers:
  - name: a
    image: nginx:1.8
    resources:
      requests: {cpu: 250m, memory: 256Mi}
      limits: {cpu: 500m, memory: 512Mi}
  - name: b
    image: nginx:1.8
    resources:
      requests: {cpu: 250m, memory: 256Mi, example.com/dongle: \"1\"}
      limits: {example.com/dongle: \"1\"}
---
apiVersion: v1
kind: Event
metadata: {name: n-desc.1, namespace: default}
involvedObject: {kind: Node, name: n-desc, uid: n-desc}
reason: NodeReady
message: Node n-desc status is now NodeReady
type: Normal
source: {component: kubelet, host: n-desc}
count: 3
firstTimestamp: \"2024-01-01T00:00:00Z\"
lastTimestamp: \"2024-01-01T00:05:00Z\"
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: l1, labels: {owner: me}}
spec: {holderIdentity: me, leaseDurationSeconds: 40}
";

const DESCRIBE_RS: &str = "apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-rs, labels: {app: web-rs}, annotations: {deployment.kubernetes.io/revision: \"1\"}}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web-rs}
    matchExpressions: [{key: tier, operator: In, values: [b, a]}]
  template:
    metadata: {labels: {app: web-rs, tier: a}, annotations: {x: z}}
    spec:
      serviceAccountName: default
      containers:
      - {name: c, image: nginx:1.8, ports: [{containerPort: 80}]}
      tolerations: [{operator: Exists}]
";

const DESCRIBE_SVC: &str = "apiVersion: v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: metrics, port: 9090, targetPort: metrics, protocol: TCP}
";

fn write_files(server: &ApiServer) {
    let d = server.dir();
    std::fs::write(d.join("apply-v1.yaml"), APPLY_V1).unwrap();
    std::fs::write(d.join("apply-v2.yaml"), APPLY_V2).unwrap();
    std::fs::write(d.join("ssa.yaml"), SSA).unwrap();
    std::fs::write(d.join("ssa-other.yaml"), SSA_OTHER).unwrap();
    std::fs::write(d.join("cm.yaml"), CM).unwrap();
    std::fs::write(d.join("pod.yaml"), POD).unwrap();
    std::fs::write(d.join("multi.yaml"), MULTI).unwrap();
    std::fs::write(d.join("deploy.json"), DEPLOY).unwrap();
    std::fs::write(d.join("describe-pod.yaml"), DESCRIBE_POD).unwrap();
    std::fs::write(d.join("describe-node.yaml"), DESCRIBE_NODE).unwrap();
    std::fs::write(d.join("describe-bound.yaml"), DESCRIBE_BOUND).unwrap();
    std::fs::write(d.join("describe-svc.yaml"), DESCRIBE_SVC).unwrap();
    std::fs::write(d.join("describe-rs.yaml"), DESCRIBE_RS).unwrap();
    std::fs::create_dir_all(d.join("dir")).unwrap();
    std::fs::write(
        d.join("dir/a-good.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c3}\n",
    )
    .unwrap();
    std::fs::write(d.join("dir/b-nokind.yaml"), "apiVersion: v1\nmetadata: {name: c4}\n").unwrap();
    std::fs::write(
        d.join("dir/c-good.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c5}\n",
    )
    .unwrap();
    std::fs::write(d.join("not-yaml.yaml"), "kind: [\n").unwrap();
    std::fs::write(
        d.join("node.yaml"),
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {pool: a}}\n",
    )
    .unwrap();
    std::fs::write(d.join("columns.txt"), "NAME   APP\n.metadata.name  {.metadata.labels.app}\n")
        .unwrap();
    std::fs::write(d.join("template.txt"), "{range .items[*]}{.metadata.name}{\"\\n\"}{end}")
        .unwrap();
}

/// The script: every step's arguments.
const SCRIPT: &[&[&str]] = &[
    &["create", "-f", "cm.yaml"],
    &["create", "-f", "cm.yaml"],
    &["create", "-f", "pod.yaml"],
    &["create", "-f", "multi.yaml"],
    &["create", "-f", "deploy.json"],
    &["create", "-f", "dir"],
    &["create", "-f", "missing.yaml"],
    &["get", "cm"],
    &["get", "configmaps", "-o", "wide"],
    &["get", "cm", "c1", "-o", "yaml"],
    &["get", "cm", "c1", "-o", "json"],
    &["get", "cm", "-o", "yaml"],
    &["get", "cm", "-o", "json"],
    &["get", "cm", "-o", "name"],
    &["get", "cm", "-l", "app=x"],
    &["get", "cm", "-l", "app=x", "-L", "tier"],
    &["get", "cm", "--show-labels"],
    &["get", "cm", "--no-headers"],
    &["get", "cm,pods"],
    &["get", "pod/nginx-pod", "configmap/c1", "-o", "name"],
    &["get", "pods", "-A"],
    &["get", "pod", "nginx-pod", "--subresource", "status"],
    &["get", "pod", "nginx-pod", "--subresource=status", "-o", "name"],
    &["get", "deploy", "web", "--subresource", "scale", "-o", "json"],
    &["get", "deploy", "web", "--subresource", "status", "-o", "wide"],
    &["get", "pods", "--subresource", "status"],
    &["get", "pod", "nginx-pod", "--subresource", "scale"],
    &["get", "pod", "nope", "--subresource", "status"],
    &["get", "pods", "nginx-pod", "-o", "wide"],
    &["get", "pod", "nginx-pod", "-o", "yaml"],
    &["get", "deploy"],
    &["get", "deployments.apps", "web", "-o", "json"],
    &["get", "ns"],
    &["get", "ns", "team-a", "-o", "yaml"],
    &["get", "pods", "-n", "team-a"],
    &["get", "nodes"],
    &["get", "x"],
    &["get", "cm", "nope"],
    &["get", "cm", "nope", "-o", "yaml"],
    &["get", "cm", "-n", "team-a", "-o", "yaml"],
    &["get", "cm", "-n", "team-a", "-o", "name"],
    &["get", "cm", "c1", "nope", "c2"],
    &["get", "-f", "cm.yaml"],
    &["get", "cm", "c1", "-o", "jsonpath={.metadata.name} {.data.a} {.data.html}"],
    &["get", "cm", "c1", "-o", "jsonpath={.metadata.labels}"],
    &["get", "cm", "-o", "jsonpath={.items[*].metadata.name}"],
    &["get", "cm", "-o", r#"jsonpath={range .items[*]}{.metadata.name}{"\t"}{.data}{"\n"}{end}"#],
    &["get", "cm", "-o", r#"jsonpath={.items[?(@.metadata.name=="c2")].data.k}"#],
    &["get", "cm", "-o", r#"jsonpath={.items[?(@.metadata.name!="c2")].metadata.name}"#],
    &["get", "cm", "c1", "-o", "jsonpath={..app}"],
    &["get", "cm", "c1", "-o", "jsonpath={.nope}|{.metadata.name}"],
    &["get", "cm", "c1", "-o", "jsonpath={.nope}", "--allow-missing-template-keys=false"],
    &["get", "cm", "c1", "-o", "jsonpath={.metadata.managedFields}"],
    &["get", "cm", "-o", "jsonpath={.items[9]}"],
    &["get", "cm", "-o", "jsonpath={.x"],
    &["get", "cm", "-o", "jsonpath="],
    &["get", "cm", "-o", "jsonpath-file=template.txt"],
    &["get", "cm", "-o", "jsonpath-file=nope.txt"],
    &[
        "get",
        "deploy",
        "web",
        "-o",
        r"jsonpath={.spec.replicas} {.metadata.labels.app} {.spec.template.spec.containers[-1].image}",
    ],
    &[
        "get",
        "cm",
        "-o",
        "custom-columns=NAME:.metadata.name,APP:.metadata.labels.app,DATA:{.data}",
    ],
    &["get", "cm", "c1", "-o", "custom-columns=NAME:metadata.name,KEYS:.data.a"],
    &["get", "cm", "-o", "custom-columns=NAME:.metadata.name", "--no-headers"],
    &["get", "cm", "-o", "custom-columns-file=columns.txt"],
    &["get", "cm", "-o", "custom-columns=NAME"],
    &["get", "cm", "-o", "custom-columns="],
    &["get", "cm", "-o", "custom-columns=N:{.a"],
    &["get", "cm", "-o", "custom-columns-file=nope.txt"],
    &["apply", "-f", "apply-v1.yaml"],
    &["apply", "-f", "apply-v1.yaml"],
    &["apply", "-f", "apply-v2.yaml"],
    &["get", "deploy", "app", "-o", "yaml"],
    &["apply", "-f", "apply-v2.yaml"],
    &["apply", "-f", "apply-v1.yaml", "-o", "name"],
    &["get", "deploy", "app", "-o", "json"],
    &["apply", "--server-side", "-f", "ssa.yaml"],
    &["apply", "--server-side", "--field-manager=other", "-f", "ssa-other.yaml"],
    &[
        "apply",
        "--server-side",
        "--field-manager=other",
        "--force-conflicts",
        "-f",
        "ssa-other.yaml",
    ],
    &["get", "cm", "ssa", "-o", "yaml"],
    &["apply", "--server-side", "-f", "ssa.yaml"],
    &["delete", "cm", "c2"],
    &["delete", "cm", "nope"],
    &["delete", "cm", "-l", "app=x"],
    &["delete", "-f", "pod.yaml", "--wait=false"],
    &["delete", "ns", "team-a", "--wait=false"],
    &["delete", "deploy", "web", "--cascade=orphan", "--wait=false"],
    &["get", "cm"],
];

/// Masks what differs between two servers by nature.
fn mask(text: &str) -> String {
    let age = regex::Regex::new(r"\b\d+(s|m|h|d|y)(\d+(s|m|h|d))?\b").unwrap();
    let stamp = regex::Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z").unwrap();
    let uid =
        regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap();
    let rv = regex::Regex::new(r#"(resourceVersion"?:\s*)"\d+""#).unwrap();
    let ws = regex::Regex::new(r" +").unwrap();
    let port = regex::Regex::new(r"127\.0\.0\.1:\d+").unwrap();
    // Go's RFC 1123 times with a numeric zone, as describe prints them.
    let rfc1123 =
        regex::Regex::new(r"[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} [+-]\d{4}")
            .unwrap();
    let t = text.replace("kubectl-lite ", "kubectl ");
    let t = port.replace_all(&t, "<server>");
    let t = stamp.replace_all(&t, "<time>");
    let t = rfc1123.replace_all(&t, "<time>");
    let t = uid.replace_all(&t, "<uid>");
    let t = rv.replace_all(&t, "$1<rv>");
    let t = age.replace_all(&t, "<age>");
    // Column widths follow the masked cells' lengths.
    ws.replace_all(&t, " ").into_owned()
}

#[test]
fn kubectl_lite_prints_what_kubectl_prints_for_create_get_apply_and_delete() {
    compare(SCRIPT);
}

/// `describe` of every kind with a describer of its own, the generic one, by file, by
/// selector, by name prefix, and of what does not exist.
const DESCRIBE: &[&[&str]] = &[
    &["create", "-f", "cm.yaml"],
    &["create", "-f", "describe-pod.yaml"],
    &["create", "-f", "describe-node.yaml"],
    &["create", "-f", "describe-bound.yaml"],
    &["create", "-f", "describe-svc.yaml"],
    &["create", "-f", "deploy.json"],
    &["create", "-f", "describe-rs.yaml"],
    &["describe", "pod", "web-1"],
    &["describe", "pods", "bound"],
    &["describe", "node", "n-desc"],
    &["describe", "nodes"],
    &["describe", "deployment", "web"],
    &["describe", "svc", "web"],
    &["describe", "rs", "web-rs"],
    &["describe", "replicasets"],
    &["describe", "configmap", "c1"],
    &["describe", "lease", "l1"],
    &["describe", "lease", "l1", "--show-events=false"],
    &["describe", "-f", "cm.yaml"],
    &["describe", "-f", "describe-svc.yaml", "-f", "cm.yaml"],
    &["describe", "cm", "-l", "app=x"],
    &["describe", "pods", "-l", "app=nope"],
    &["describe", "pods", "-A", "-l", "app=nope"],
    &["describe", "pod", "web"],
    &["describe", "pod", "b"],
    &["describe", "pod", "nope"],
    &["describe", "pod", "nope", "web-1"],
    &["describe", "pod/nope"],
    &["describe", "nope"],
    &["describe"],
];

#[test]
fn kubectl_lite_describes_as_kubectl_does() {
    compare(DESCRIBE);
}

/// Changes to objects that exist: labels, annotations, patches, scale.
const EDITS: &[&[&str]] = &[
    &["create", "-f", "cm.yaml"],
    &["create", "-f", "pod.yaml"],
    &["create", "-f", "deploy.json"],
    &["label", "pod", "nginx-pod", "a=b"],
    &["label", "pod", "nginx-pod", "a=c"],
    &["label", "pod", "nginx-pod", "a=c", "--overwrite"],
    &["label", "pod", "nginx-pod", "a=c", "--overwrite"],
    &["label", "pod", "nginx-pod", "a-"],
    &["label", "pod", "nginx-pod", "a-"],
    &["label", "pods,cm", "--all", "z=1"],
    &["label", "pod", "nginx-pod", "bad/key/x=1"],
    &["label", "pod", "nginx-pod", "a=b=c"],
    &["label", "pod", "nginx-pod"],
    &["label", "pod", "nope", "a=b"],
    &["label", "cm", "-l", "app=x", "sel=yes", "-o", "name"],
    &["label", "-f", "cm.yaml", "from=file"],
    &["annotate", "pod", "nginx-pod", "n=1"],
    &["annotate", "pod", "nginx-pod", "n=2"],
    &["annotate", "pod", "nginx-pod", "n=2", "--overwrite"],
    &["annotate", "pod", "nginx-pod", "n-"],
    &["annotate", "pod/nginx-pod", "configmap/c1", "both=yes"],
    &["get", "pod", "nginx-pod", "cm", "--show-labels"],
    &["patch", "pod", "nginx-pod", "-p", r#"{"metadata":{"labels":{"q":"1"}}}"#],
    &["patch", "pod", "nginx-pod", "-p", r#"{"metadata":{"labels":{"q":"1"}}}"#],
    &[
        "patch",
        "pod",
        "nginx-pod",
        "-p",
        r#"{"spec":{"containers":[{"name":"nginx","image":"nginx:1.9"}]}}"#,
    ],
    &["patch", "cm", "c1", "--type", "merge", "-p", r#"{"data":{"a":"2"}}"#],
    &["patch", "cm", "c1", "--type", "json", "-p", r#"[{"op":"remove","path":"/data/a"}]"#],
    &["patch", "cm", "c1", "--type", "json", "-p", r#"[{"op":"remove","path":"/data/nope"}]"#],
    &["patch", "cm", "c1", "-p", "notjson"],
    &["patch", "cm", "c1", "--type", "bad", "-p", "{}"],
    &["patch", "cm", "nope", "-p", "{}"],
    &["get", "pod", "nginx-pod", "-o", "yaml"],
    &["get", "cm", "c1", "-o", "json"],
    &["scale", "deploy", "web", "--replicas=3"],
    &["scale", "deploy", "web", "--replicas=3"],
    &["scale", "deploy", "web", "--replicas=2", "--current-replicas=5"],
    &["scale", "deploy/web", "--replicas=1", "--current-replicas=3"],
    &["scale", "deploy", "nope", "--replicas=1"],
    &["scale", "deploy", "web", "--replicas=-1"],
    &["scale", "cm", "c1", "--replicas=2"],
    &["get", "deploy", "web", "-o", "yaml"],
];

#[test]
fn kubectl_lite_edits_objects_as_kubectl_does_with_label_annotate_patch_and_scale() {
    compare(EDITS);
}

/// The kubeconfig read and changed (each server's admin kubeconfig is the file changed).
const CONFIG: &[&[&str]] = &[
    &["config", "view"],
    &["config", "view", "--minify"],
    &["config", "current-context"],
    &["config", "get-contexts"],
    &["config", "set-context", "dev", "--namespace=team", "--cluster=nope", "--user=u"],
    &["config", "set-context", "dev", "--namespace=team2"],
    &["config", "get-contexts"],
    &["config", "get-contexts", "dev", "--no-headers"],
    &["config", "use-context", "nope"],
    &["config", "use-context", "dev"],
    &["config", "current-context"],
    &["config", "view", "--minify"],
    &["config", "set-context", "--current", "--namespace=x"],
    &["config", "view"],
];

#[test]
fn kubectl_lite_reads_and_changes_the_kubeconfig_as_kubectl_does() {
    compare(CONFIG);
}

/// Node scheduling and what the server lets us do.
const ADMIN: &[&[&str]] = &[
    &["create", "-f", "node.yaml"],
    &["cordon", "n1"],
    &["cordon", "n1"],
    &["get", "nodes"],
    &["uncordon", "n1"],
    &["uncordon", "n1"],
    &["cordon", "-l", "pool=a"],
    &["cordon", "nope"],
    &["auth", "whoami"],
    &["auth", "can-i", "get", "pods"],
    &["auth", "can-i", "get", "pods", "--as=bob"],
    &["auth", "can-i", "get", "pods", "-q", "--as=bob"],
    &["auth", "can-i", "create", "deployments.apps", "-n", "x"],
    &["auth", "can-i", "get", "nodes/n1", "--as=bob"],
    &["auth", "can-i", "get", "pods", "--subresource=log", "-A"],
    &["auth", "can-i", "get", "/healthz", "--as=bob", "--as-group=system:authenticated"],
    &["auth", "can-i", "get"],
    &["get", "pods", "--as=bob"],
];

#[test]
fn kubectl_lite_cordons_nodes_and_asks_the_authorizer_as_kubectl_does() {
    compare(ADMIN);
}

/// Runs `script` through kubectl-lite and the real kubectl, each against a server of its own,
/// and fails listing every step whose masked output or exit code differs.
fn compare(script: &[&[&str]]) {
    let lite = ApiServer::start().unwrap();
    let real = ApiServer::start().unwrap();
    write_files(&lite);
    write_files(&real);
    let mut differences = Vec::new();
    for args in script {
        let l = lite.kubectl_lite(args).unwrap();
        let r = real.kubectl(args).unwrap();
        // KUBECTL_LITE_DUMP=dir keeps each step's raw output (stdout, then stderr), unmasked,
        // for comparing alignment by hand.
        if let Ok(dir) = std::env::var("KUBECTL_LITE_DUMP") {
            let n = args.join("_").replace('/', "~");
            std::fs::write(format!("{dir}/{n}.lite"), [&l.stdout[..], &l.stderr[..]].concat())
                .unwrap();
            std::fs::write(format!("{dir}/{n}.real"), [&r.stdout[..], &r.stderr[..]].concat())
                .unwrap();
        }
        let (lo, ro) =
            (mask(&String::from_utf8_lossy(&l.stdout)), mask(&String::from_utf8_lossy(&r.stdout)));
        let (le, re) =
            (mask(&String::from_utf8_lossy(&l.stderr)), mask(&String::from_utf8_lossy(&r.stderr)));
        if lo != ro || l.status.code() != r.status.code() {
            differences.push(format!(
                "kubectl {}:\n--- kubectl-lite (exit {:?})\n{lo}{le}--- kubectl (exit {:?})\n{ro}{re}",
                args.join(" "),
                l.status.code(),
                r.status.code()
            ));
        } else if le != re && !args.contains(&"missing.yaml") && !args.contains(&"dir") {
            differences.push(format!(
                "kubectl {} (stderr):\n--- kubectl-lite\n{le}--- kubectl\n{re}",
                args.join(" ")
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[test]
fn kubectl_lite_names_the_unreachable_server_and_a_broken_file() {
    let server = ApiServer::start().unwrap();
    write_files(&server);
    let down = server.kubectl_lite(&["--server", "https://127.0.0.1:1", "get", "pods"]).unwrap();
    assert_eq!(down.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&down.stderr),
        "The connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?\n"
    );
    let bad = server.kubectl_lite(&["create", "-f", "not-yaml.yaml"]).unwrap();
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.starts_with("error: error parsing not-yaml.yaml: error converting YAML to JSON:"),
        "{err}"
    );
    // A directory with one bad manifest creates the others and names the bad one.
    let dir = server.kubectl_lite(&["create", "-f", "dir"]).unwrap();
    assert_eq!(dir.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&dir.stdout),
        "configmap/c3 created\nconfigmap/c5 created\n"
    );
    assert!(String::from_utf8_lossy(&dir.stderr).contains("dir/b-nokind.yaml"));
    let bad_config = server.dir().join("bad-kubeconfig");
    std::fs::write(&bad_config, "clusters: [\n").unwrap();
    let cfg = server
        .kubectl_lite(&["--kubeconfig", bad_config.to_str().unwrap(), "get", "pods"])
        .unwrap();
    assert_eq!(cfg.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&cfg.stderr).contains("bad-kubeconfig"));
}
