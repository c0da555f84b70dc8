//! What a list asks for: selectors, `limit` and `continue`, and which revision it reads
//! (`resourceVersion` with `resourceVersionMatch`, validated as upstream validates them).
//!
//! Paging is one consistent snapshot: a continue token carries the first page's revision and
//! the key the page ended at, and every later page reads the store at that revision. Once that
//! revision leaves the kept history the token is refused with 410 Expired, and, as upstream,
//! the refusal carries a token for the rest of the list at the newest state: a client that
//! accepts an inconsistent list can go on with it instead of starting over.

use api::validation::{ErrorList, FieldError, Path};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::selectors::{self, FieldSelector, LabelSelector};
use crate::storage::Revision;

#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_from: Option<String>,
    pub at: ListAt,
}

impl ListOptions {
    pub fn matches(&self, obj: &Value) -> bool {
        (self.labels.is_empty() || self.labels.matches(&selectors::labels(obj)))
            && (self.fields.is_empty() || self.fields.matches(obj))
    }

    pub(crate) fn filtering(&self) -> bool {
        !self.labels.is_empty() || !self.fields.is_empty()
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ListPage {
    pub items: Vec<Bytes>,
    pub revision: Revision,
    /// The token for the next page.
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// Which state a list reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ListAt {
    /// The newest state (`resourceVersion` unset, or `"0"`: any state will do, and the newest is
    /// at hand).
    #[default]
    Latest,
    /// The newest state, which must have reached this revision.
    NotOlderThan(Revision),
    /// The state at exactly this revision.
    Exact(Revision),
}

impl ListAt {
    /// Reads a list's `resourceVersion` and `resourceVersionMatch`. Without a match, a revision
    /// means "not older than" for a whole list and "exactly" for a paged one (`limit`), as
    /// upstream's legacy semantics. `continuing`: a continue token was given, which carries its
    /// own revision.
    pub fn parse(
        rv: Option<&str>,
        rv_match: Option<&str>,
        paged: bool,
        continuing: bool,
    ) -> Result<Self, ApiError> {
        let rv = rv.filter(|v| !v.is_empty());
        let rv_match = rv_match.filter(|m| !m.is_empty());
        let field = Path::root("resourceVersionMatch");
        let mut errors = ErrorList::default();
        if let Some(m) = rv_match {
            if rv.is_none() {
                errors.push(FieldError::forbidden(
                    &field,
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if continuing {
                errors.push(FieldError::forbidden(
                    &field,
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if !matches!(m, "Exact" | "NotOlderThan") {
                errors.push(FieldError::not_supported(&field, m, &["Exact", "NotOlderThan", ""]));
            }
            if m == "Exact" && rv == Some("0") {
                errors.push(FieldError::forbidden(
                    &field,
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid_list_options(&errors));
        }
        let revision =
            match rv {
                None | Some("0") => return Ok(Self::Latest),
                Some(v) => v.parse::<Revision>().ok().filter(|r| *r > 0).ok_or_else(|| {
                    ApiError::bad_request(format!("invalid resource version {v:?}"))
                })?,
            };
        if continuing {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        Ok(match rv_match {
            Some("Exact") => Self::Exact(revision),
            Some(_) => Self::NotOlderThan(revision),
            None if paged => Self::Exact(revision),
            None => Self::NotOlderThan(revision),
        })
    }
}

/// Where the next page starts: the snapshot it reads and the last key returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContinueToken {
    pub snapshot: Snapshot,
    pub after_key: String,
}

/// The state the pages of one list read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Snapshot {
    /// The first page's revision: the pages make one consistent list.
    At(Revision),
    /// Whatever is newest when the page is read: the token an expired one is answered with.
    /// The page it reads fixes the revision for the pages after it.
    Newest,
}

/// How [`Snapshot::Newest`] is written in a token (upstream writes -1 too; 0 and a missing
/// revision stay invalid).
const NEWEST: Revision = -1;

impl ContinueToken {
    /// Opaque to clients: hex of a small JSON document.
    pub fn encode(&self) -> String {
        let rv = match self.snapshot {
            Snapshot::At(r) => r,
            Snapshot::Newest => NEWEST,
        };
        let raw = json!({ "rv": rv, "start": self.after_key }).to_string();
        raw.bytes().map(|b| format!("{b:02x}")).collect()
    }

    pub fn decode(token: &str) -> Result<Self, ApiError> {
        let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
        let bytes: Vec<u8> = (0..token.len())
            .step_by(2)
            .map(|i| token.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
            .collect::<Option<_>>()
            .ok_or_else(bad)?;
        let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        let snapshot = match v["rv"].as_i64().ok_or_else(bad)? {
            NEWEST => Snapshot::Newest,
            r if r > 0 => Snapshot::At(r),
            _ => return Err(bad()),
        };
        let after_key = v["start"].as_str().ok_or_else(bad)?.to_string();
        Ok(Self { snapshot, after_key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(rv: &str, m: &str, paged: bool, continuing: bool) -> Result<ListAt, (u16, String)> {
        ListAt::parse(Some(rv), Some(m), paged, continuing).map_err(|e| (e.code, e.message))
    }

    #[test]
    fn resource_version_and_match_choose_the_revision_a_list_reads() {
        let table = [
            // (resourceVersion, match, limit given, expected)
            ("", "", false, ListAt::Latest),
            ("0", "", true, ListAt::Latest),
            ("0", "NotOlderThan", false, ListAt::Latest),
            ("7", "", false, ListAt::NotOlderThan(7)),
            ("7", "", true, ListAt::Exact(7)),
            ("7", "NotOlderThan", true, ListAt::NotOlderThan(7)),
            ("7", "Exact", false, ListAt::Exact(7)),
        ];
        for (rv, m, paged, want) in table {
            assert_eq!(parse(rv, m, paged, false), Ok(want), "rv={rv:?} match={m:?} {paged}");
        }
    }

    #[test]
    fn contradictory_parameters_are_refused_with_upstreams_words() {
        let e = parse("", "Exact", false, false).unwrap_err();
        assert_eq!(e.0, 422);
        assert_eq!(
            e.1,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        let e = parse("0", "Exact", false, false).unwrap_err();
        assert!(e.1.contains("\"exact\" is forbidden for resourceVersion \"0\""), "{}", e.1);
        let e = parse("5", "Newest", false, false).unwrap_err();
        assert!(e.1.contains("Unsupported value: \"Newest\""), "{}", e.1);
        assert!(parse("5", "Exact", true, true).unwrap_err().1.contains("when continue"));
        assert_eq!(
            parse("5", "", true, true).unwrap_err(),
            (400, "specifying resource version is not allowed when using continue".into())
        );
        assert_eq!(parse("x1", "", false, false).unwrap_err().0, 400);
        assert_eq!(parse("-3", "", false, false).unwrap_err().0, 400);
    }

    fn hex(s: &str) -> String {
        s.bytes().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn continue_tokens_round_trip_and_garbage_is_a_bad_request() {
        for snapshot in [Snapshot::At(42), Snapshot::Newest] {
            let t = ContinueToken { snapshot, after_key: "/pods/default/a\"b".into() };
            assert_eq!(ContinueToken::decode(&t.encode()), Ok(t));
        }
        for bad in [
            "zz",
            "7",
            "7b7d",
            &hex("{\"rv\":0,\"start\":\"a\"}"),
            &hex("{\"rv\":-2,\"start\":\"a\"}"),
            &hex("{\"start\":\"a\"}"),
        ] {
            assert_eq!(ContinueToken::decode(bad).unwrap_err().code, 400, "{bad}");
        }
    }
}
