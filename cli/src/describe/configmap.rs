//! `kubectl describe configmap`: labels, annotations, each data key with its value, each
//! binary key with its size, and events.

use serde_json::Value;

use super::events::{self, Involved};
use super::writer::{LEVEL_0, PrefixWriter};
use super::{Clock, Settings, fields, s};
use crate::builder::Info;
use crate::errors::Result;
use crate::factory::Factory;

pub async fn describe(f: &Factory, info: &Info, st: Settings, clock: &Clock) -> Result<String> {
    let cm = f.get_json(&info.url()).await?;
    // Unlike the other describers, kubectl fails the configmap's when its events cannot be read.
    let events = if st.show_events {
        Some(events::search(f, &Involved::of(&cm), st.chunk_size).await?)
    } else {
        None
    };
    Ok(render(&cm, events.as_deref(), clock))
}

/// The ConfigMap describer's text.
pub fn render(cm: &Value, events: Option<&[Value]>, clock: &Clock) -> String {
    let mut pw = PrefixWriter::new();
    let w = &mut pw;
    w.write(LEVEL_0, &format!("Name:\t{}\n", s(cm, "/metadata/name")));
    w.write(LEVEL_0, &format!("Namespace:\t{}\n", s(cm, "/metadata/namespace")));
    fields::labels_multiline(w, "Labels", cm.pointer("/metadata/labels"));
    fields::annotations_multiline(w, "Annotations", cm.pointer("/metadata/annotations"));
    w.write(LEVEL_0, "\nData\n====\n");
    for (k, v) in fields::string_map(cm.get("data")) {
        w.write(LEVEL_0, &format!("{k}:\n----\n"));
        w.write(LEVEL_0, &format!("{v}\n"));
        w.write(LEVEL_0, "\n");
    }
    w.write(LEVEL_0, "\nBinaryData\n====\n");
    for (k, v) in fields::string_map(cm.get("binaryData")) {
        w.write(LEVEL_0, &format!("{k}: {} bytes\n", decoded_len(&v)));
    }
    w.write(LEVEL_0, "\n");
    if let Some(e) = events {
        events::describe_events(w, e, clock);
    }
    pw.finish()
}

/// The length of base64 data once decoded.
fn decoded_len(b64: &str) -> usize {
    let t = b64.trim_end_matches('=');
    t.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn data_keys_print_with_their_values_and_binary_keys_with_their_sizes() {
        let cm = json!({"metadata": {"name": "c", "namespace": "default"},
            "data": {"b": "two\nlines", "a": "1"}, "binaryData": {"bin": "AAEC"}});
        let clock =
            Clock { now: "2024-01-01T00:10:00Z".parse().unwrap(), tz: jiff::tz::TimeZone::UTC };
        assert_eq!(
            render(&cm, Some(&[]), &clock),
            "Name:         c\nNamespace:    default\nLabels:       <none>\nAnnotations:  <none>\n\nData\n====\na:\n----\n1\n\nb:\n----\ntwo\nlines\n\n\nBinaryData\n====\nbin: 3 bytes\n\nEvents:  <none>\n"
        );
    }
}
