use serde_json::json;

use super::*;

/// A document shaped as apiserver-lite's and upstream's: a kind's path tagged with its kind,
/// its schema tagged too, references with descriptions as `allOf`.
fn doc() -> Value {
    json!({
        "paths": {"/apis/demo/v1/namespaces/{namespace}/widgets/{name}": {
            "get": {"x-kubernetes-group-version-kind": {"group": "demo", "version": "v1", "kind": "Widget"}}
        }},
        "components": {"schemas": {
            "demo.v1.Widget": {
                "description": "Widget is a thing.",
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "demo", "version": "v1", "kind": "Widget"}],
                "required": ["spec"],
                "properties": {
                    "spec": {"description": "What is wanted.", "allOf": [{"$ref": "#/components/schemas/demo.v1.Spec"}]},
                    "kind": {"description": "The kind.", "type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                }
            },
            "demo.v1.Spec": {
                "description": "Spec holds parts.",
                "type": "object",
                "properties": {
                    "parts": {"description": "The parts.", "type": "array", "items": {"$ref": "#/components/schemas/demo.v1.Spec"}},
                    "mode": {"description": "How.", "type": "string", "enum": ["", "Fast", "Slow", "Both", "None", "Other"]},
                    "size": {"allOf": [{"$ref": "#/components/schemas/demo.v1.Quantity"}]},
                }
            },
            "demo.v1.Quantity": {"type": "string", "description": "A quantity."},
        }}
    })
}

fn request<'a>(path: &'a [String], recursive: bool) -> Request<'a> {
    Request { group: "demo", version: "v1", resource: "widgets", field_path: path, recursive }
}

#[test]
fn a_kind_prints_its_header_description_and_sorted_fields() {
    let text = render(&doc(), &request(&[], false)).unwrap();
    assert_eq!(
        text,
        "GROUP:      demo\nKIND:       Widget\nVERSION:    v1\n\nDESCRIPTION:\n    Widget is a thing.\n    \nFIELDS:\n  kind\t<string>\n    The kind.\n\n  labels\t<map[string]string>\n    <no description>\n\n  spec\t<Spec> -required-\n    What is wanted.\n\n\n"
    );
}

#[test]
fn a_field_prints_its_type_then_its_description_and_its_types_description() {
    let path = ["spec".to_owned()];
    let text = render(&doc(), &request(&path, false)).unwrap();
    assert!(
        text.contains("FIELD: spec <Spec>\n\n\nDESCRIPTION:\n    What is wanted.\n    Spec holds parts.\n    \nFIELDS:\n  mode\t<string>\n  enum: \"\", Fast, Slow, Both, ....\n    How.\n\n"),
        "{text}"
    );
    // A reference to a primitive is typed by what it points at.
    assert!(text.contains("  size\t<string>\n"), "{text}");
}

#[test]
fn list_items_are_walked_through_and_a_field_shows_all_its_enum_values() {
    let path = ["spec".to_owned(), "parts".to_owned(), "mode".to_owned()];
    let text = render(&doc(), &request(&path, false)).unwrap();
    assert!(text.contains("FIELD: mode <string>\nENUM:\n    \"\"\n    Fast\n    Slow\n    Both\n    None\n    Other\n\nDESCRIPTION:\n    How.\n"), "{text}");
}

#[test]
fn recursive_prints_the_tree_of_names_and_stops_at_a_cycle() {
    let path = ["spec".to_owned()];
    let text = render(&doc(), &request(&path, true)).unwrap();
    let fields = text.split("FIELDS:\n").nth(1).unwrap();
    assert_eq!(
        fields,
        "  mode\t<string>\n  enum: \"\", Fast, Slow, Both, ....\n  parts\t<[]Spec>\n  size\t<string>\n\n"
    );
}

#[test]
fn a_missing_field_fails_after_the_header_with_kubectls_words() {
    let path = ["spec".to_owned(), "nope".to_owned()];
    let e = render(&doc(), &request(&path, false)).unwrap_err();
    assert_eq!(e.written, "GROUP:      demo\nKIND:       Widget\nVERSION:    v1\n\n");
    assert_eq!(e.message, "error: field \"nope\" does not exist");
}

#[test]
fn a_resource_without_a_path_or_a_schema_is_named_in_the_error() {
    let mut r = request(&[], false);
    r.resource = "gadgets";
    let e = render(&doc(), &r).unwrap_err();
    assert_eq!(e.message, "error: GVR (demo/v1, Resource=gadgets) not found in OpenAPI schema");
    assert!(e.written.is_empty());
    let mut d = doc();
    d["components"]["schemas"]["demo.v1.Widget"]["x-kubernetes-group-version-kind"] = json!([]);
    let e = render(&d, &request(&[], false)).unwrap_err();
    assert_eq!(
        e.message,
        "error: GVK map[group:demo kind:Widget version:v1] not found in OpenAPI schema"
    );
}
