//! Executing a parsed template over an object, as upstream's `FindResults`: each top-level
//! node yields a group of values; `range` runs the nodes after it once per value, up to its
//! `end`, then resumes after that `end` (a `range` without `end` runs its body once more over
//! the outer value, and an empty range still reads its body to find the `end`, as upstream's).

use serde_json::Value;

use super::parse::{Node, Param};

static NULL: Value = Value::Null;

/// A value met while executing: a part of the object, or a literal of the template.
#[derive(Debug, Clone)]
pub enum V<'a> {
    J(&'a Value),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    /// A byte of a string (a wildcard over a string yields them, as Go's reflection does).
    Byte(u8),
}

#[derive(Debug)]
pub struct Exec {
    pub allow_missing: bool,
    begin_range: usize,
    in_range: usize,
    end_range: usize,
    last_end: Option<usize>,
}

impl Exec {
    pub fn new(allow_missing: bool) -> Exec {
        Exec { allow_missing, begin_range: 0, in_range: 0, end_range: 0, last_end: None }
    }

    /// The groups of values `nodes` (the template's from `base` on) yield over `data`.
    pub fn find<'v>(
        &mut self,
        nodes: &[Node],
        base: usize,
        data: V<'v>,
    ) -> Result<Vec<Vec<V<'v>>>, String> {
        let cur = vec![data];
        let mut full = Vec::new();
        let mut i = 0;
        while i < nodes.len() {
            let results = self.walk(&cur, &nodes[i])?;
            if self.end_range > 0 && self.end_range <= self.in_range {
                self.end_range -= 1;
                self.last_end = Some(base + i);
                break;
            }
            if self.begin_range > 0 {
                self.begin_range -= 1;
                self.in_range += 1;
                if results.is_empty() {
                    // Read the body anyway, to find where it ends.
                    self.find(&nodes[i + 1..], base + i + 1, V::J(&NULL))?;
                } else {
                    for v in results {
                        full.extend(self.find(&nodes[i + 1..], base + i + 1, v)?);
                    }
                }
                self.in_range -= 1;
                if let Some(end) = self.last_end
                    && end > base + i
                    && end < base + nodes.len()
                {
                    i = end - base;
                }
                i += 1;
                continue;
            }
            full.push(results);
            i += 1;
        }
        Ok(full)
    }

    fn walk<'v>(&mut self, input: &[V<'v>], node: &Node) -> Result<Vec<V<'v>>, String> {
        Ok(match node {
            Node::List(nodes) => self.list(input, nodes)?,
            Node::Text(t) => vec![V::Str(t.clone())],
            Node::Field(name) => self.field(input, name)?,
            Node::Array(params) => array(input, params)?,
            Node::Filter { left, op, right } => self.filter(input, left, op, right)?,
            Node::Int(n) => input.iter().map(|_| V::Int(*n)).collect(),
            Node::Float(f) => input.iter().map(|_| V::Float(*f)).collect(),
            Node::Bool(b) => input.iter().map(|_| V::Bool(*b)).collect(),
            Node::Wildcard => input.iter().flat_map(children).collect(),
            Node::Recursive => recursive(input),
            Node::Union(lists) => {
                let mut out = Vec::new();
                for l in lists {
                    out.extend(self.list(input, l)?);
                }
                out
            }
            Node::Identifier(name) => match name.as_str() {
                "range" => {
                    self.begin_range += 1;
                    input.to_vec()
                }
                "end" if self.end_range < self.in_range => {
                    self.end_range += 1;
                    Vec::new()
                }
                "end" => return Err("not in range, nothing to end".into()),
                other => return Err(format!("unrecognized identifier {other}")),
            },
        })
    }

    fn list<'v>(&mut self, input: &[V<'v>], nodes: &[Node]) -> Result<Vec<V<'v>>, String> {
        let mut cur = input.to_vec();
        for n in nodes {
            cur = self.walk(&cur, n)?;
        }
        Ok(cur)
    }

    fn field<'v>(&self, input: &[V<'v>], name: &str) -> Result<Vec<V<'v>>, String> {
        if input.is_empty() {
            return Ok(Vec::new());
        }
        let found: Vec<V<'v>> = input
            .iter()
            .filter_map(|v| match v {
                V::J(Value::Object(m)) => m.get(name).map(V::J),
                _ => None,
            })
            .collect();
        if found.is_empty() && !self.allow_missing {
            return Err(format!("{name} is not found"));
        }
        Ok(found)
    }

    fn filter<'v>(
        &mut self,
        input: &[V<'v>],
        left: &[Node],
        op: &str,
        right: &[Node],
    ) -> Result<Vec<V<'v>>, String> {
        let mut out = Vec::new();
        for v in input {
            let V::J(Value::Array(items)) = v else {
                return Err(format!(
                    "{} is not array or slice and cannot be filtered",
                    super::fmt::go_v(v)
                ));
            };
            for item in items {
                let here = [V::J(item)];
                let lefts = self.list(&here, left);
                if op == "exists" {
                    if lefts.is_ok_and(|l| !l.is_empty()) {
                        out.push(V::J(item));
                    }
                    continue;
                }
                let lefts = lefts?;
                if lefts.is_empty() {
                    continue;
                }
                let rights = self.list(&here, right)?;
                if lefts.len() > 1 || rights.len() > 1 {
                    return Err("can only compare one element at a time".into());
                }
                let Some(r) = rights.first() else { continue };
                if compare(op, &lefts[0], r)? {
                    out.push(V::J(item));
                }
            }
        }
        Ok(out)
    }
}

/// The elements of an array or the values of a map (in key order), or a string's bytes.
fn children<'v>(v: &V<'v>) -> Vec<V<'v>> {
    match v {
        V::J(Value::Object(m)) => m.values().map(V::J).collect(),
        V::J(Value::Array(a)) => a.iter().map(V::J).collect(),
        V::J(Value::String(s)) => s.bytes().map(V::Byte).collect(),
        V::Str(s) => s.bytes().map(V::Byte).collect(),
        _ => Vec::new(),
    }
}

/// `..`: every value with children, followed by its descendants', depth first.
fn recursive<'v>(input: &[V<'v>]) -> Vec<V<'v>> {
    let mut out = Vec::new();
    for v in input {
        let kids = children(v);
        if kids.is_empty() {
            continue;
        }
        out.push(v.clone());
        // A string's bytes have no children: only the string itself is listed.
        let deeper: Vec<V<'v>> = kids.into_iter().filter(|k| !matches!(k, V::Byte(_))).collect();
        out.extend(recursive(&deeper));
    }
    out
}

fn array<'v>(input: &[V<'v>], params: &[Param; 3]) -> Result<Vec<V<'v>>, String> {
    let mut out = Vec::new();
    for v in input {
        let items = match v {
            V::J(Value::Null) => continue,
            V::J(Value::Array(a)) => a,
            other => return Err(format!("{} is not array or slice", super::fmt::go_type(other))),
        };
        let len = items.len() as i64;
        let mut p = *params;
        if !p[0].known {
            p[0].value = 0;
        }
        if p[0].value < 0 {
            p[0].value += len;
        }
        if !p[1].known {
            p[1].value = len;
        }
        if p[1].value < 0 || (p[1].value == 0 && p[1].derived) {
            p[1].value += len;
        }
        let (start, end) = (p[0].value, p[1].value);
        if start == end {
            return Ok(out);
        }
        if start >= len || start < 0 {
            return Err(format!("array index out of bounds: index {start}, length {len}"));
        }
        if end > len || end < 0 {
            return Err(format!("array index out of bounds: index {}, length {len}", end - 1));
        }
        if start > end {
            return Err(format!("starting index {start} is greater than ending index {end}"));
        }
        let step = if p[2].known {
            if p[2].value <= 0 {
                return Err("step must be > 0".into());
            }
            p[2].value as usize
        } else {
            1
        };
        out.extend(items[start as usize..end as usize].iter().step_by(step).map(V::J));
    }
    Ok(out)
}

/// A value as Go's `text/template` comparisons see it.
enum Basic<'a> {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
}

fn basic<'a>(v: &'a V<'_>) -> Result<Basic<'a>, String> {
    Ok(match v {
        V::J(Value::Bool(b)) | V::Bool(b) => Basic::Bool(*b),
        V::J(Value::Number(n)) => match n.as_i64() {
            Some(i) => Basic::Int(i),
            None => Basic::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        V::J(Value::String(s)) | V::Str(s) => Basic::Str(s),
        V::Int(i) => Basic::Int(*i),
        V::Byte(b) => Basic::Int(i64::from(*b)),
        V::Float(f) => Basic::Float(*f),
        _ => return Err("invalid type for comparison".into()),
    })
}

/// Go template's `eq`, `ne`, `lt`, `le`, `gt`, `ge` over two basic values.
fn compare(op: &str, l: &V<'_>, r: &V<'_>) -> Result<bool, String> {
    let (l, r) = (basic(l)?, basic(r)?);
    let incompatible = || "incompatible types for comparison".to_string();
    let eq = match (&l, &r) {
        (Basic::Bool(a), Basic::Bool(b)) => a == b,
        (Basic::Int(a), Basic::Int(b)) => a == b,
        (Basic::Float(a), Basic::Float(b)) => a == b,
        (Basic::Str(a), Basic::Str(b)) => a == b,
        _ => return Err(incompatible()),
    };
    let lt = || -> Result<bool, String> {
        Ok(match (&l, &r) {
            (Basic::Int(a), Basic::Int(b)) => a < b,
            (Basic::Float(a), Basic::Float(b)) => a < b,
            (Basic::Str(a), Basic::Str(b)) => a < b,
            _ => return Err("invalid type for comparison".into()),
        })
    };
    Ok(match op {
        "==" => eq,
        "!=" => !eq,
        "<" => lt()?,
        "<=" => lt()? || eq,
        ">" => !(lt()? || eq),
        ">=" => !lt()?,
        other => return Err(format!("unrecognized filter operator {other}")),
    })
}
