//! Files → documents → objects: multi-document YAML and JSON, empty documents skipped, `List`
//! kinds flattened, each object knowing the file and document it came from. A document that
//! does not parse, or has no `kind` or `apiVersion`, is an error of its own; the others stand.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::errors::CliError;

/// The largest file read (as a bound, not a limit kubectl has: a manifest is kilobytes).
const MAX_FILE: u64 = 64 << 20;

/// Where an object came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The path as the user named it (or found under a named directory), `-` for stdin.
    pub path: String,
    /// The document's index in the file, from 0.
    pub document: usize,
}

/// One object read from a file.
#[derive(Debug, Clone)]
pub struct Document {
    pub origin: Origin,
    pub object: Value,
}

/// The files `-f` names: a file, every `.json`/`.yaml`/`.yml` file of a directory (and its
/// subdirectories with `-R`), in name order, as kubectl's `FileVisitor` walks them.
pub fn expand(name: &str, recursive: bool) -> Result<Vec<PathBuf>, CliError> {
    if name == "-" {
        return Ok(vec![PathBuf::from("-")]);
    }
    let path = Path::new(name);
    let meta = std::fs::metadata(path).map_err(|_| CliError::NoPath(path.to_path_buf()))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    walk(path, recursive, &mut out)?;
    Ok(out)
}

fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| CliError::Usage(format!("error reading {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if recursive {
                walk(&p, recursive, out)?;
            }
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "yaml" | "yml")) {
            out.push(p);
        }
    }
    Ok(())
}

/// Reads one file (or stdin for `-`) into its objects, and the errors of its bad documents.
pub fn read(path: &Path) -> (Vec<Document>, Vec<CliError>) {
    let shown = path.display().to_string();
    let text = if shown == "-" {
        let mut s = String::new();
        match std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut s) {
            Ok(_) => s,
            Err(e) => return (Vec::new(), vec![parse_error(&shown, e.to_string())]),
        }
    } else {
        match std::fs::metadata(path) {
            Ok(m) if m.len() > MAX_FILE => {
                return (
                    Vec::new(),
                    vec![parse_error(&shown, format!("file is larger than {MAX_FILE} bytes"))],
                );
            }
            Ok(_) => {}
            Err(_) => return (Vec::new(), vec![CliError::NoPath(path.to_path_buf())]),
        }
        match std::fs::read_to_string(path) {
            Ok(s) => s,
            Err(e) => return (Vec::new(), vec![parse_error(&shown, e.to_string())]),
        }
    };
    parse(&shown, &text)
}

fn parse_error(path: &str, reason: String) -> CliError {
    CliError::Parse { path: path.to_string(), reason }
}

/// The objects of a file's text.
pub fn parse(path: &str, text: &str) -> (Vec<Document>, Vec<CliError>) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    let values = if text.trim_start().starts_with(['{', '[']) {
        json_values(text)
    } else {
        yaml_values(text)
    };
    for (index, value) in values.into_iter().enumerate() {
        let origin = Origin { path: path.to_string(), document: index };
        match value {
            Err(reason) => errors.push(parse_error(path, reason)),
            Ok(Value::Null) => {}
            Ok(v) => flatten(v, &origin, &mut docs, &mut errors),
        }
    }
    (docs, errors)
}

/// A JSON stream's values. As kubectl 1.35's decoder, JSON documents may be followed by YAML
/// ones (`{...}\n---\n{...}`, as tools that join JSON with YAML separators write): where the
/// JSON stream stops parsing after at least one value, the rest is read as YAML.
fn json_values(text: &str) -> Vec<Result<Value, String>> {
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let mut consumed = 0;
    while let Some(v) = stream.next() {
        match v {
            Ok(v) => {
                values.push(Ok(v));
                consumed = stream.byte_offset();
            }
            Err(_) if !values.is_empty() => {
                values.extend(yaml_values(&text[consumed..]));
                break;
            }
            Err(e) => {
                values.push(Err(e.to_string()));
                break;
            }
        }
    }
    values
}

/// A YAML stream's documents; a broken one ends the stream (the parser cannot resynchronise).
fn yaml_values(text: &str) -> Vec<Result<Value, String>> {
    let mut values = Vec::new();
    for d in serde_yaml_ng::Deserializer::from_str(text) {
        let v: Result<Value, String> = serde::Deserialize::deserialize(d)
            .map_err(|e: serde_yaml_ng::Error| format!("error converting YAML to JSON: {e}"));
        let broken = v.is_err();
        values.push(v);
        if broken {
            break;
        }
    }
    values
}

/// An object, or a `List`'s items; objects missing `apiVersion` or `kind` are errors.
fn flatten(v: Value, origin: &Origin, docs: &mut Vec<Document>, errors: &mut Vec<CliError>) {
    if !v.is_object() {
        errors.push(parse_error(
            &origin.path,
            format!("document {} is not an object", origin.document),
        ));
        return;
    }
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.ends_with("List")
        && let Some(items) = v.get("items").and_then(Value::as_array)
    {
        for item in items {
            flatten(item.clone(), origin, docs, errors);
        }
        return;
    }
    let mut missing = Vec::new();
    if v.get("apiVersion").and_then(Value::as_str).is_none_or(str::is_empty) {
        missing.push("apiVersion not set");
    }
    if kind.is_empty() {
        missing.push("kind not set");
    }
    let reason = match missing.as_slice() {
        [] => {
            docs.push(Document { origin: origin.clone(), object: v });
            return;
        }
        [one] => one.to_string(),
        many => format!("[{}]", many.join(", ")),
    };
    errors.push(CliError::Validation { path: origin.path.clone(), reason });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_yaml_documents_become_several_objects_and_empty_ones_are_skipped() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
        let (docs, errors) = parse("f.yaml", text);
        assert!(errors.is_empty(), "{errors:?}");
        let names: Vec<_> =
            docs.iter().map(|d| d.object["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(docs[1].origin.document, 2);
    }

    #[test]
    fn json_documents_joined_by_yaml_separators_are_each_read_as_kubectl_reads_them() {
        let cm = |n: u8| {
            format!(r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c{n}"}}}}"#)
        };
        let text = format!("{}\n---\n{}\n---\n{}\n", cm(1), cm(2), cm(3));
        let (docs, errors) = parse("j.yaml", &text);
        assert!(errors.is_empty(), "{errors:?}");
        let names: Vec<&str> =
            docs.iter().filter_map(|d| d.object["metadata"]["name"].as_str()).collect();
        assert_eq!(names, ["c1", "c2", "c3"]);
        // Broken JSON as the first document is still JSON's error.
        let (docs, errors) = parse("b.json", "{\"kind\": }");
        assert!(docs.is_empty());
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn a_list_is_flattened() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}},
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}}]}"#;
        let (docs, errors) = parse("l.json", text);
        assert!(errors.is_empty());
        assert_eq!(docs.len(), 2);
    }

    #[test]
    fn a_document_without_kind_is_an_error_naming_the_file_and_the_others_stand() {
        let text = "apiVersion: v1\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n";
        let (docs, errors) = parse("f.yaml", text);
        assert_eq!(docs.len(), 1);
        assert_eq!(
            errors[0].to_string(),
            "error: error validating \"f.yaml\": error validating data: kind not set; if you choose to ignore these errors, turn validation off with --validate=false"
        );
        let (_, errors) = parse("g.yaml", "metadata: {name: a}\n");
        assert!(errors[0].to_string().contains("[apiVersion not set, kind not set]"));
    }

    #[test]
    fn text_that_is_not_yaml_is_a_parse_error_naming_the_file() {
        let (docs, errors) = parse("bad.yaml", "kind: [\n");
        assert!(docs.is_empty());
        assert!(
            errors[0]
                .to_string()
                .starts_with("error: error parsing bad.yaml: error converting YAML to JSON:")
        );
    }

    #[test]
    fn a_byte_order_mark_is_read_past() {
        let (docs, errors) =
            parse("bom.yaml", "\u{feff}apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n");
        assert!(errors.is_empty());
        assert_eq!(docs.len(), 1);
    }

    #[test]
    fn a_directory_gives_its_manifest_files_in_order_and_subdirectories_only_with_r() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.yaml"), "").unwrap();
        std::fs::write(dir.path().join("a.json"), "").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/c.yml"), "").unwrap();
        let name = |v: Vec<PathBuf>| -> Vec<String> {
            v.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
        };
        let d = dir.path().to_str().unwrap();
        assert_eq!(name(expand(d, false).unwrap()), ["a.json", "b.yaml"]);
        assert_eq!(name(expand(d, true).unwrap()), ["a.json", "b.yaml", "c.yml"]);
        assert!(matches!(expand("/no/such", false), Err(CliError::NoPath(_))));
    }
}
