use super::*;

#[test]
fn the_root_lists_each_group_version_at_its_documents_hash() {
    let docs = Documents::get();
    let root: Value = serde_json::from_slice(&docs.root()).unwrap();
    let url = root["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
    let core = docs.group_version("", "v1").unwrap();
    assert_eq!(url, format!("/openapi/v3/api/v1?hash={}", hash(&core)));
    assert!(root["paths"]["apis/apps/v1"].is_object());
    assert!(docs.group_version("nope", "v1").is_none());
}

#[test]
fn each_kind_has_a_patch_operation_with_its_kind_and_the_field_validation_parameter() {
    let doc = document("", "v1").unwrap();
    let pod = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
    assert_eq!(pod["x-kubernetes-group-version-kind"]["kind"], "Pod");
    assert!(pod["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
    // No request body: kubectl's apply keeps its compiled-in patch types (module docs).
    assert!(pod.get("requestBody").is_none());
}

#[test]
fn a_kinds_schema_carries_its_group_version_kind_and_references_are_all_of() {
    let doc = document("apps", "v1").unwrap();
    let schemas = &doc["components"]["schemas"];
    let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    assert!(deployment.get("required").is_none(), "metadata is not required: {deployment}");
    let binding = &document("rbac.authorization.k8s.io", "v1").unwrap()["components"]["schemas"]["io.k8s.api.rbac.v1.RoleBinding"];
    assert_eq!(binding["required"], json!(["roleRef"]));
    let spec = &deployment["properties"]["spec"];
    assert_eq!(
        spec["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"}])
    );
    assert!(spec["description"].as_str().unwrap().starts_with("Specification of the desired"));
    // What the kinds reference is there too, without a kind of its own.
    let pod_spec = &schemas["io.k8s.api.core.v1.PodSpec"];
    assert!(pod_spec["properties"]["containers"].is_object());
    assert!(pod_spec.get("x-kubernetes-group-version-kind").is_none());
    // Every reference resolves within the document.
    let text = doc.to_string();
    for r in text.split("\"$ref\":\"").skip(1) {
        let name = r.split('"').next().unwrap().strip_prefix(SCHEMAS).unwrap();
        assert!(schemas.get(name).is_some(), "{name}");
    }
}

#[test]
fn a_group_version_without_a_served_kind_has_no_document() {
    assert!(document("nope", "v1").is_none());
}
