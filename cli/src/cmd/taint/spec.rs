//! Taint arguments and the taint list they make, as kubectl's `pkg/cmd/taint` utilities, pure:
//! `key=value:Effect`, `key:Effect` add; `key:Effect-`, `key-` remove; the split of
//! arguments into resources and taint changes; the new list of a node's taints and the word
//! kubectl prints for it (`tainted`, `untainted`, `modified`).

use serde_json::{Map, Value};

/// The effects a taint may have.
pub const EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// One taint: on a node (with its `timeAdded`, kept as it was), or from an argument.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Taint {
    pub key: String,
    pub value: String,
    /// Empty in a removal that names the key alone.
    pub effect: String,
    pub time_added: Option<Value>,
}

impl Taint {
    /// A taint of a node's `spec.taints`.
    pub fn from_json(v: &Value) -> Taint {
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_string();
        Taint {
            key: s("key"),
            value: s("value"),
            effect: s("effect"),
            time_added: v.get("timeAdded").filter(|t| !t.is_null()).cloned(),
        }
    }

    /// As the API writes it (empty fields left out).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("key".into(), Value::String(self.key.clone()));
        if !self.value.is_empty() {
            m.insert("value".into(), Value::String(self.value.clone()));
        }
        m.insert("effect".into(), Value::String(self.effect.clone()));
        if let Some(t) = &self.time_added {
            m.insert("timeAdded".into(), t.clone());
        }
        Value::Object(m)
    }

    /// Upstream's `Taint.ToString`: `key=value:effect`, parts left out when empty.
    pub fn spec(&self) -> String {
        let mut s = self.key.clone();
        if !self.value.is_empty() {
            s = format!("{s}={}", self.value);
        }
        if !self.effect.is_empty() {
            s = format!("{s}:{}", self.effect);
        }
        s
    }

    /// Upstream's `MatchTaint`: same key and effect.
    fn matches(&self, other: &Taint) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

/// Splits the arguments into resources (first) and taint changes (after); a resource after a
/// change is refused.
pub fn split_args(args: &[String]) -> Result<(Vec<String>, Vec<String>), String> {
    let mut resources = Vec::new();
    let mut taints = Vec::new();
    for s in args {
        let is_taint = s.contains('=') || s.contains(':') || s.ends_with('-');
        match (taints.is_empty(), is_taint) {
            (_, true) => taints.push(s.clone()),
            (true, false) => resources.push(s.clone()),
            (false, false) => {
                return Err(format!("all resources must be specified before taint changes: {s}"));
            }
        }
    }
    Ok((resources, taints))
}

/// The taints to add and to remove; the first bad spec is the error (a usage error).
pub fn parse_taints(specs: &[String]) -> Result<(Vec<Taint>, Vec<Taint>), String> {
    let mut add: Vec<Taint> = Vec::new();
    let mut remove = Vec::new();
    for spec in specs {
        if let Some(s) = spec.strip_suffix('-') {
            let t = parse_taint(s)?;
            remove.push(Taint { key: t.key, effect: t.effect, ..Taint::default() });
            continue;
        }
        let t = parse_taint(spec)?;
        if t.effect.is_empty() {
            return Err(format!("invalid taint spec: {spec}"));
        }
        if add.iter().any(|a| a.matches(&t)) {
            // Go's `%v` of the Taint struct, its `timeAdded` a nil pointer.
            return Err(format!(
                "duplicated taints with the same key and effect: {{{} {} {} <nil>}}",
                t.key, t.value, t.effect
            ));
        }
        add.push(t);
    }
    Ok((add, remove))
}

/// `key=value:effect`, `key:effect` or `key`.
fn parse_taint(st: &str) -> Result<Taint, String> {
    let parts: Vec<&str> = st.split(':').collect();
    let (key, value, effect) = match parts.as_slice() {
        [key] => (*key, "", ""),
        [kv, effect] => {
            if !EFFECTS.contains(effect) {
                return Err(format!("invalid taint effect: {effect}, unsupported taint effect"));
            }
            let kv: Vec<&str> = kv.split('=').collect();
            let (key, value) = match kv.as_slice() {
                [key] => (*key, ""),
                [key, value] => (*key, *value),
                _ => return Err(format!("invalid taint spec: {st}")),
            };
            let errs = api::validation::names::label_value(value);
            if !errs.is_empty() {
                return Err(format!("invalid taint spec: {st}, {}", errs.join("; ")));
            }
            (key, value, *effect)
        }
        _ => return Err(format!("invalid taint spec: {st}")),
    };
    let errs = api::validation::names::qualified_name(key);
    if !errs.is_empty() {
        return Err(format!("invalid taint spec: {st}, {}", errs.join("; ")));
    }
    Ok(Taint { key: key.into(), value: value.into(), effect: effect.into(), time_added: None })
}

/// Taints both added and removed by one command, as `key=effect`, comma-separated; empty when
/// there are none.
pub fn conflicts(add: &[Taint], remove: &[Taint]) -> String {
    let mut out = Vec::new();
    for a in add {
        for r in remove {
            if a.key == r.key && (r.effect.is_empty() || a.effect == r.effect) {
                out.push(format!("{}={}", r.key, r.effect));
            }
        }
    }
    out.join(", ")
}

/// The keys of taints to add that the node already has with the same effect, comma-separated.
pub fn already_there(old: &[Taint], add: &[Taint]) -> String {
    let mut keys = Vec::new();
    for t in add {
        for o in old {
            if t.matches(o) {
                keys.push(t.key.clone());
            }
        }
    }
    keys.join(",")
}

/// A node's new taints: the added ones first, the old ones not replaced after, the removed
/// ones taken out; the word kubectl prints for it; and a message per removal that found
/// nothing (then the node is left as it was).
pub fn reorganize(
    old: &[Taint],
    overwrite: bool,
    add: &[Taint],
    remove: &[Taint],
) -> (&'static str, Vec<Taint>, Vec<String>) {
    let mut new: Vec<Taint> = add.to_vec();
    for o in old {
        if !new.iter().any(|t| t.matches(o)) {
            new.push(o.clone());
        }
    }
    let added = old.len() != new.len();
    let mut errors = Vec::new();
    // As upstream: whether the last removal removed something.
    let mut deleted = false;
    for r in remove {
        let before = new.len();
        new.retain(|t| if r.effect.is_empty() { t.key != r.key } else { !r.matches(t) });
        deleted = new.len() != before;
        if !deleted {
            errors.push(format!("taint \"{}\" not found", r.spec()));
        }
    }
    let word = if (added && deleted) || overwrite {
        "modified"
    } else if added {
        "tainted"
    } else {
        "untainted"
    };
    (word, new, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_string()).collect()
    }

    fn taint(key: &str, value: &str, effect: &str) -> Taint {
        Taint { key: key.into(), value: value.into(), effect: effect.into(), time_added: None }
    }

    #[test]
    fn arguments_split_into_resources_then_changes() {
        let (r, t) = split_args(&strings(&["nodes", "n1", "a=b:NoSchedule", "c-"])).unwrap();
        assert_eq!(r, ["nodes", "n1"]);
        assert_eq!(t, ["a=b:NoSchedule", "c-"]);
        assert_eq!(
            split_args(&strings(&["nodes", "a:NoSchedule", "n1"])).unwrap_err(),
            "all resources must be specified before taint changes: n1"
        );
    }

    #[test]
    fn every_spec_form_parses_into_adds_and_removals() {
        let (add, remove) = parse_taints(&strings(&[
            "a=b:NoSchedule",
            "c:PreferNoSchedule",
            "example.com/d=:NoExecute",
            "e:NoSchedule-",
            "f-",
        ]))
        .unwrap();
        assert_eq!(
            add,
            [
                taint("a", "b", "NoSchedule"),
                taint("c", "", "PreferNoSchedule"),
                taint("example.com/d", "", "NoExecute")
            ]
        );
        assert_eq!(remove, [taint("e", "", "NoSchedule"), taint("f", "", "")]);
    }

    #[test]
    fn bad_specs_are_refused_in_kubectls_words() {
        let err = |s: &[&str]| parse_taints(&strings(s)).unwrap_err();
        assert_eq!(err(&["a=b:Bad"]), "invalid taint effect: Bad, unsupported taint effect");
        assert_eq!(err(&["a=b=c:NoSchedule"]), "invalid taint spec: a=b=c:NoSchedule");
        assert_eq!(err(&["a:b:c"]), "invalid taint spec: a:b:c");
        // Without an effect the whole argument is the key.
        assert!(err(&["a=b"]).starts_with("invalid taint spec: a=b, name part must consist of"));
        assert_eq!(
            err(&["a=b:NoSchedule", "a=c:NoSchedule"]),
            "duplicated taints with the same key and effect: {a c NoSchedule <nil>}"
        );
        assert!(
            err(&["a=-b:NoSchedule"])
                .starts_with("invalid taint spec: a=-b:NoSchedule, a valid label must be")
        );
        assert!(
            err(&["a--"]).starts_with("invalid taint spec: a-, name part must consist of"),
            "{}",
            err(&["a--"])
        );
        // The same key with another effect is no duplicate.
        assert!(parse_taints(&strings(&["k=v:NoSchedule", "k=v:NoExecute"])).is_ok());
    }

    #[test]
    fn a_taint_both_added_and_removed_is_named() {
        let (add, remove) =
            parse_taints(&strings(&["a=b:NoSchedule", "a-", "s:NoExecute-"])).unwrap();
        assert_eq!(conflicts(&add, &remove), "a=");
        let (add, remove) = parse_taints(&strings(&["a=b:NoSchedule", "a:NoSchedule-"])).unwrap();
        assert_eq!(conflicts(&add, &remove), "a=NoSchedule");
        let (add, remove) = parse_taints(&strings(&["a=b:NoSchedule", "a:NoExecute-"])).unwrap();
        assert_eq!(conflicts(&add, &remove), "");
    }

    #[test]
    fn new_taints_come_first_and_the_word_follows_what_changed() {
        let old = [taint("x", "1", "NoSchedule"), taint("y", "", "NoExecute")];
        let (word, new, errs) = reorganize(&old, false, &[taint("z", "2", "NoSchedule")], &[]);
        assert_eq!(word, "tainted");
        assert_eq!(new.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(), ["z", "x", "y"]);
        assert!(errs.is_empty());

        let (word, new, _) = reorganize(&old, false, &[], &[taint("x", "", "")]);
        assert_eq!((word, new.len()), ("untainted", 1));

        let (word, new, _) =
            reorganize(&old, false, &[taint("z", "", "NoSchedule")], &[taint("x", "", "")]);
        assert_eq!((word, new.len()), ("modified", 2));

        // --overwrite always says modified, even for a pure removal.
        let (word, new, _) = reorganize(&old, true, &[taint("x", "9", "NoSchedule")], &[]);
        assert_eq!(word, "modified");
        assert_eq!(new[0].value, "9");
        assert_eq!(new.len(), 2);
    }

    #[test]
    fn a_removal_that_finds_nothing_is_an_error_per_taint() {
        let old = [taint("x", "1", "NoSchedule")];
        let (_, _, errs) =
            reorganize(&old, false, &[], &[taint("zz", "", ""), taint("x", "", "NoExecute")]);
        assert_eq!(errs, ["taint \"zz\" not found", "taint \"x:NoExecute\" not found"]);
    }

    #[test]
    fn existing_taints_with_the_same_effect_are_named_by_key() {
        let old = [taint("a", "1", "NoSchedule"), taint("b", "", "NoExecute")];
        let add = [taint("a", "2", "NoSchedule"), taint("b", "", "NoSchedule")];
        assert_eq!(already_there(&old, &add), "a");
    }

    #[test]
    fn taints_keep_their_time_added_and_leave_out_an_empty_value() {
        let v = serde_json::json!({"key": "k", "effect": "NoExecute", "timeAdded": "2024-01-01T00:00:00Z"});
        let t = Taint::from_json(&v);
        assert_eq!(t.to_json(), v);
        assert_eq!(
            taint("k", "", "NoSchedule").to_json(),
            serde_json::json!({"key": "k", "effect": "NoSchedule"})
        );
        assert_eq!(taint("k", "v", "NoSchedule").spec(), "k=v:NoSchedule");
    }
}
