//! kubectl-lite beside the real kubectl v1.35 for `edit`: one apiserver-lite, each tool editing
//! its own copy of the objects (namespace `real` or `lite`), with `KUBE_EDITOR` set to scripts
//! that change the file as a user would (`sed -i`), break it, empty it, or fix what the server
//! refused when the file is reopened. Stdout, stderr, exit codes and the file the editor was
//! handed again must agree once namespaces, UIDs, resource versions, times and temp file names
//! are masked. `--subresource=status` edits a pod's status.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;
use std::process::{Command, Stdio};

use e2e::apiserver::{ApiServer, kubectl_binary};
use e2e::workspace_binary;

const OBJECTS: &str = "apiVersion: v1
kind: Pod
metadata: {name: seed, labels: {app: w}}
spec:
  containers: [{name: c, image: busybox:1.35}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: conf}
data: {a: \"1\"}
";

/// Sets the image empty (the server refuses it) and, handed the file again with the reasons,
/// sets a valid one.
const FIX_ON_REOPEN: &str = "#!/bin/sh
cp \"$1\" \"$(dirname \"$0\")/handed-$(ls \"$(dirname \"$0\")\" | grep -c handed)\"
if grep -q 'was not valid' \"$1\"; then
  sed -i 's/image: \"\"/image: busybox:1.37/' \"$1\"
else
  sed -i 's/image: busybox:1.3[0-9]/image: \"\"/' \"$1\"
fi
";

/// Breaks the YAML every time it is handed the file.
const BREAK: &str = "#!/bin/sh
sed -i 's/^kind: Pod$/kind: Pod oops: x/' \"$1\"
";

/// (editor, arguments): each run by both tools, in order.
const SCRIPT: &[(&str, &[&str])] = &[
    ("true", &["edit", "pod", "seed"]),
    ("sed -i 's/^    app: w$/    app: w2/'", &["edit", "pod", "seed"]),
    ("sed -i 's/busybox:1.35/busybox:1.36/'", &["edit", "pod/seed", "--output-patch"]),
    ("sed -i 's/\"a\": \"1\"/\"a\": \"2\"/'", &["edit", "cm", "conf", "-o", "json"]),
    ("sed -i 's/^  a: \"2\"$/  a: \"3\"/'", &["edit", "configmap/conf", "-o", "yaml"]),
    ("sed -i 's/^  name: seed$/  name: other/'", &["edit", "pod", "seed"]),
    ("sed -i 's/app: w2/app: w3/'", &["edit", "pod", "seed", "--save-config", "--output-patch"]),
    ("sed -i 's/app: w3/app: w4/'", &["edit", "pod", "seed", "--windows-line-endings"]),
    ("fix-on-reopen.sh", &["edit", "pod", "seed"]),
    ("break.sh", &["edit", "pod", "seed"]),
    ("sed -i d", &["edit", "pod", "seed"]),
    ("sed -i '/^apiVersion/d'", &["edit", "pod", "seed"]),
    ("true", &["edit", "pod", "seed", "-o", "name"]),
    ("sed -i 's/phase: Pending/phase: Failed/'", &["edit", "pod", "seed", "--subresource=status"]),
    ("true", &["edit", "pod", "seed", "--subresource", "status", "-o", "name"]),
    ("true", &["edit", "cm", "conf", "--subresource=status"]),
    ("true", &["edit", "pod", "seed", "--subresource=scale"]),
    ("true", &["edit", "pod", "missing"]),
    ("true", &["edit"]),
];

fn run(
    binary: &Path,
    server: &ApiServer,
    ns: &str,
    editor: &str,
    args: &[&str],
) -> (Option<i32>, String) {
    let home = server.dir().join(format!("home-{ns}"));
    std::fs::create_dir_all(&home).unwrap();
    let tools = server.dir().join(format!("tools-{ns}"));
    let editor = if editor.ends_with(".sh") {
        tools.join(editor).display().to_string()
    } else {
        editor.to_string()
    };
    let o = Command::new(binary)
        .args(["-n", ns])
        .args(args)
        .current_dir(server.dir())
        .env("KUBECONFIG", server.kubeconfig())
        .env("HOME", home)
        .env("KUBE_EDITOR", editor)
        .env("TMPDIR", &tools)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o.status.code(), text)
}

/// What differs between the two namespaces' objects by nature, and the tools' names.
fn mask(text: &str, ns: &str) -> String {
    let rules = [
        (r"kubectl-lite", "kubectl"),
        (r"/\S*/kubectl-edit-\d+\.(yaml|json)", "<file>"),
        (r#"(?m)^(\s*"?namespace"?: )"?(real|lite)"?"#, "${1}<ns>"),
        (r#"(?m)^(\s*"?uid"?: ).*"#, "${1}<uid>"),
        (r#"(?m)^(\s*"?resourceVersion"?: ).*"#, "${1}<rv>"),
        (r#"(?m)^(\s*"?(creationTimestamp|time)"?: ).*"#, "${1}<time>"),
        // The same inside the last-applied annotation's JSON, escaped in a patch or not.
        (r#"\\"(namespace|uid|resourceVersion|creationTimestamp|time)\\":\\"[^\\]*\\""#, "<m>"),
        (r#""(namespace|uid|resourceVersion|creationTimestamp|time)":"[^"]*""#, "<m>"),
    ];
    let mut t = text.replace(&format!("tools-{ns}"), "tools");
    for (re, to) in rules {
        t = regex::Regex::new(re).unwrap().replace_all(&t, to).into_owned();
    }
    t
}

#[test]
fn kubectl_lite_edits_as_kubectl_does() {
    let server = ApiServer::start().unwrap();
    std::fs::write(server.dir().join("objects.yaml"), OBJECTS).unwrap();
    for ns in ["real", "lite"] {
        let tools = server.dir().join(format!("tools-{ns}"));
        std::fs::create_dir_all(&tools).unwrap();
        for (name, text) in [("fix-on-reopen.sh", FIX_ON_REOPEN), ("break.sh", BREAK)] {
            let path = tools.join(name);
            std::fs::write(&path, text).unwrap();
            std::process::Command::new("chmod").arg("+x").arg(&path).status().unwrap();
        }
        let o = server.kubectl(&["create", "namespace", ns]).unwrap();
        assert!(o.status.success());
        let o = server.kubectl(&["-n", ns, "create", "-f", "objects.yaml"]).unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let (lite, real) = (workspace_binary("kubectl-lite").unwrap(), kubectl_binary().unwrap());
    let mut differences = Vec::new();
    for (editor, args) in SCRIPT {
        let (lc, lo) = run(&lite, &server, "lite", editor, args);
        let (rc, ro) = run(&real, &server, "real", editor, args);
        let (lo, ro) = (mask(&lo, "lite"), mask(&ro, "real"));
        if lo != ro || lc != rc {
            differences.push(format!(
                "KUBE_EDITOR={editor} kubectl {}:\n--- kubectl-lite (exit {lc:?})\n{lo}--- kubectl (exit {rc:?})\n{ro}",
                args.join(" ")
            ));
        }
    }
    // `--subresource=status` wrote the status.
    for ns in ["real", "lite"] {
        let o = server.kubectl(&["-n", ns, "get", "pod", "seed", "-o", "jsonpath={.status.phase}"]);
        assert_eq!(String::from_utf8_lossy(&o.unwrap().stdout), "Failed", "{ns}");
    }
    // The file handed again with the server's reasons, as kubectl writes it.
    for i in 0..2 {
        let read = |ns: &str| {
            let path = server.dir().join(format!("tools-{ns}/handed-{i}"));
            mask(&std::fs::read_to_string(path).unwrap_or_default(), ns)
        };
        let (l, r) = (read("lite"), read("real"));
        assert!(!r.is_empty(), "kubectl was not handed the file a {i}th time");
        if l != r {
            differences.push(format!("file handed #{i}:\n--- kubectl-lite\n{l}--- kubectl\n{r}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Several objects are edited as one `List`, each patched or skipped on its own. (Not beside
/// kubectl: its validator looks a `List` up in the OpenAPI v2 document, which apiserver-lite
/// does not serve, and refuses every edit of several objects.)
#[test]
fn kubectl_lite_edits_several_objects_as_one_list() {
    let server = ApiServer::start().unwrap();
    std::fs::write(server.dir().join("objects.yaml"), OBJECTS).unwrap();
    let o = server.kubectl(&["create", "namespace", "lite"]).unwrap();
    assert!(o.status.success());
    let o = server.kubectl(&["-n", "lite", "create", "-f", "objects.yaml"]).unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::create_dir_all(server.dir().join("tools-lite")).unwrap();
    let lite = workspace_binary("kubectl-lite").unwrap();
    let editor = "sed -i 's/^      app: w$/      app: w9/'";
    let (code, out) = run(&lite, &server, "lite", editor, &["edit", "pod/seed", "configmap/conf"]);
    assert_eq!((code, out.as_str()), (Some(0), "pod/seed edited\nconfigmap/conf skipped\n"));
    let o = server
        .kubectl(&["-n", "lite", "get", "pod", "seed", "-o", "jsonpath={.metadata.labels.app}"])
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "w9");
}
