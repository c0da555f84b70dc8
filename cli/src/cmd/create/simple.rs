//! `create namespace NAME` and `create serviceaccount NAME`: a name, nothing else.

use super::tree::Obj;
use super::{Common, Kind, emit, enforced_namespace, metadata, one_name};
use crate::errors::Result;
use crate::factory::Factory;

pub const NAMESPACE: Kind =
    Kind { group: "", version: "v1", plural: "namespaces", kind: "Namespace", namespaced: false };
pub const SERVICE_ACCOUNT: Kind = Kind {
    group: "",
    version: "v1",
    plural: "serviceaccounts",
    kind: "ServiceAccount",
    namespaced: true,
};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// NAME
    pub name: Vec<String>,
    #[command(flatten)]
    pub common: Common,
}

/// A Namespace as kubectl's generator builds it (empty spec and status included).
pub fn namespace_object(name: &str) -> Obj {
    NAMESPACE.head(metadata(name, None, None)).with("spec", Obj::new()).with("status", Obj::new())
}

pub fn service_account_object(name: &str, namespace: Option<&str>) -> Obj {
    SERVICE_ACCOUNT.head(metadata(name, namespace, None))
}

pub async fn namespace(f: &Factory, a: Args) -> Result<()> {
    let name = one_name(&a.name, "namespace")?;
    emit(f, &a.common, NAMESPACE, &name, namespace_object(&name), None).await
}

pub async fn serviceaccount(f: &Factory, a: Args) -> Result<()> {
    let name = one_name(&a.name, "serviceaccount")?;
    let ns = enforced_namespace(f).await?;
    let object = service_account_object(&name, ns.as_deref());
    emit(f, &a.common, SERVICE_ACCOUNT, &name, object, Some("failed to create serviceaccount: "))
        .await
}

#[cfg(test)]
mod tests {
    use super::super::tree::Node;
    use super::*;

    #[test]
    fn a_namespace_carries_empty_spec_and_status_in_field_order() {
        assert_eq!(
            Node::Obj(namespace_object("foo")).compact(),
            r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"foo"},"spec":{},"status":{}}"#
        );
    }

    #[test]
    fn a_service_account_names_its_namespace_only_when_given() {
        assert_eq!(
            Node::Obj(service_account_object("sa", Some("ns"))).compact(),
            r#"{"kind":"ServiceAccount","apiVersion":"v1","metadata":{"name":"sa","namespace":"ns"}}"#
        );
    }

    #[test]
    fn saved_config_is_the_object_itself_with_a_newline() {
        let o = Node::Obj(super::super::with_saved_config(namespace_object("foo")));
        assert_eq!(
            o.compact(),
            r#"{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"foo","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"foo\"},\"spec\":{},\"status\":{}}\n"}},"spec":{},"status":{}}"#
        );
    }
}
