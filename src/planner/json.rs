//! The JSON graph format of `warmarena plan`, with a small JSON reader.
//!
//! ```json
//! {
//!   "values":  [{"name": "x", "size": 4096}, {"name": "h", "size": 8192},
//!               {"name": "hv", "size": 8192}, {"name": "y", "size": null}],
//!   "nodes":   [{"name": "mm",   "inputs": ["x"],  "outputs": ["h"]},
//!               {"name": "view", "inputs": ["h"],  "outputs": ["hv"]},
//!               {"name": "relu", "inputs": ["hv"], "outputs": ["y"],
//!                "in_place": [{"output": 0, "input": 0}]}],
//!   "inputs":  ["x"],
//!   "outputs": ["y"],
//!   "views":   [{"view": "hv", "source": "h"}],
//!   "alignment": 64
//! }
//! ```
//!
//! `size` is bytes, or `null` while symbolic. Nodes are in execution order;
//! values are named and referenced by name. `views`, `in_place` and
//! `alignment` are optional. Malformed input is a [`JsonError`], never a
//! panic; nesting deeper than 64 levels is refused.

use std::collections::HashMap;
use std::fmt;

use super::graph::{InPlaceHint, Node, PlanGraph, ValueId, ViewMap};

/// A JSON value. Numbers keep their text; the graph reader only takes
/// non-negative integers.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`
    Null,
    /// `true` / `false`
    Bool(bool),
    /// A number, as written.
    Num(String),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, members in order.
    Obj(Vec<(String, Json)>),
}

/// Malformed JSON or a graph the format does not allow.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonError {
    /// Byte offset (for syntax errors) or 0.
    pub at: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "json: {} (at byte {})", self.message, self.at)
    }
}

impl std::error::Error for JsonError {}

const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn err<T>(&self, message: &str) -> Result<T, JsonError> {
        Err(JsonError {
            at: self.i,
            message: message.to_string(),
        })
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json, JsonError> {
        if depth > MAX_DEPTH {
            return self.err("nesting too deep");
        }
        self.ws();
        match self.s.get(self.i) {
            None => self.err("unexpected end"),
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                if self.eat(b'}') {
                    return Ok(Json::Obj(members));
                }
                loop {
                    self.ws();
                    let key = self.string()?;
                    if !self.eat(b':') {
                        return self.err("expected ':'");
                    }
                    members.push((key, self.value(depth + 1)?));
                    if self.eat(b'}') {
                        return Ok(Json::Obj(members));
                    }
                    if !self.eat(b',') {
                        return self.err("expected ',' or '}'");
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                if self.eat(b']') {
                    return Ok(Json::Arr(items));
                }
                loop {
                    items.push(self.value(depth + 1)?);
                    if self.eat(b']') {
                        return Ok(Json::Arr(items));
                    }
                    if !self.eat(b',') {
                        return self.err("expected ',' or ']'");
                    }
                }
            }
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(_) => {
                for (word, v) in [
                    ("null", Json::Null),
                    ("true", Json::Bool(true)),
                    ("false", Json::Bool(false)),
                ] {
                    if self.s[self.i..].starts_with(word.as_bytes()) {
                        self.i += word.len();
                        return Ok(v);
                    }
                }
                let start = self.i;
                while self.i < self.s.len()
                    && matches!(
                        self.s[self.i],
                        b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'
                    )
                {
                    self.i += 1;
                }
                if start == self.i {
                    return self.err("unexpected character");
                }
                Ok(Json::Num(
                    String::from_utf8_lossy(&self.s[start..self.i]).into_owned(),
                ))
            }
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        if self.s.get(self.i) != Some(&b'"') {
            return self.err("expected a string");
        }
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            match self.s.get(self.i) {
                None => return self.err("unterminated string"),
                Some(b'"') => {
                    self.i += 1;
                    return String::from_utf8(out).or_else(|_| self.err("invalid UTF-8"));
                }
                Some(b'\\') => {
                    let c = match self.s.get(self.i + 1) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'n') => '\n',
                        Some(b't') => '\t',
                        Some(b'r') => '\r',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'u') => {
                            let hex = self
                                .s
                                .get(self.i + 2..self.i + 6)
                                .and_then(|h| std::str::from_utf8(h).ok());
                            let code = hex.and_then(|h| u32::from_str_radix(h, 16).ok());
                            self.i += 4;
                            code.and_then(char::from_u32).unwrap_or('\u{fffd}')
                        }
                        _ => return self.err("bad escape"),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    self.i += 2;
                }
                Some(&c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
    }
}

/// Parses one JSON document.
///
/// ```
/// use warmarena::planner::{parse_json, Json};
/// assert_eq!(parse_json("[1, null]").unwrap(), Json::Arr(vec![Json::Num("1".into()), Json::Null]));
/// assert!(parse_json("[1,").is_err());
/// ```
pub fn parse_json(text: &str) -> Result<Json, JsonError> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return p.err("trailing characters");
    }
    Ok(v)
}

impl Json {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

fn bad<T>(message: String) -> Result<T, JsonError> {
    Err(JsonError { at: 0, message })
}

fn array<'a>(v: Option<&'a Json>, what: &str) -> Result<&'a [Json], JsonError> {
    match v {
        None => Ok(&[]),
        Some(Json::Arr(a)) => Ok(a),
        Some(_) => bad(format!("`{what}` must be an array")),
    }
}

fn uint(v: &Json, what: &str) -> Result<usize, JsonError> {
    match v {
        Json::Num(s) => s
            .parse::<usize>()
            .or_else(|_| bad(format!("`{what}` must be a non-negative integer"))),
        _ => bad(format!("`{what}` must be a non-negative integer")),
    }
}

/// What a graph file in the JSON format holds: the graph as the planner
/// reads it, its views and in-place hints, and the names, sizes and
/// alignment the file gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphFile {
    /// The graph; value `i` is `names[i]`.
    pub graph: PlanGraph,
    /// The views.
    pub views: ViewMap,
    /// The in-place hints.
    pub hints: Vec<InPlaceHint>,
    /// Value names.
    pub names: Vec<String>,
    /// Value sizes in bytes (`None`: symbolic).
    pub sizes: Vec<Option<usize>>,
    /// The `alignment` field, if given.
    pub alignment: Option<usize>,
}

/// Reads the JSON graph format (see the module docs).
///
/// ```
/// use warmarena::planner::parse_graph_json;
/// let g = parse_graph_json(r#"{"values": [{"name": "a", "size": 8}, {"name": "b", "size": 8}],
///   "nodes": [{"inputs": ["a"], "outputs": ["b"]}], "inputs": ["a"], "outputs": ["b"]}"#).unwrap();
/// assert_eq!(g.graph.nodes.len(), 1);
/// assert!(parse_graph_json(r#"{"values": [], "nodes": [{"inputs": ["zz"]}]}"#).is_err());
/// ```
pub fn parse_graph_json(text: &str) -> Result<GraphFile, JsonError> {
    let doc = parse_json(text)?;
    if !matches!(doc, Json::Obj(_)) {
        return bad("the document must be an object".into());
    }
    let mut names = Vec::new();
    let mut sizes = Vec::new();
    let mut index: HashMap<String, u32> = HashMap::new();
    for v in array(doc.get("values"), "values")? {
        let Some(Json::Str(name)) = v.get("name") else {
            return bad("every value needs a string `name`".into());
        };
        let size = match v.get("size") {
            None | Some(Json::Null) => None,
            Some(s) => Some(uint(s, "size")?),
        };
        if index.insert(name.clone(), names.len() as u32).is_some() {
            return bad(format!("value `{name}` is declared twice"));
        }
        names.push(name.clone());
        sizes.push(size);
    }
    let id = |v: &Json| -> Result<ValueId, JsonError> {
        match v {
            Json::Str(s) => index.get(s).map(|&i| ValueId(i)).ok_or(JsonError {
                at: 0,
                message: format!("unknown value `{s}`"),
            }),
            _ => bad("values are referenced by name".into()),
        }
    };
    let ids = |v: Option<&Json>, what: &str| -> Result<Vec<ValueId>, JsonError> {
        array(v, what)?.iter().map(id).collect()
    };
    let mut graph = PlanGraph {
        num_values: names.len(),
        ..PlanGraph::default()
    };
    let mut hints = Vec::new();
    for (n, node) in array(doc.get("nodes"), "nodes")?.iter().enumerate() {
        graph.nodes.push(Node {
            inputs: ids(node.get("inputs"), "inputs")?,
            outputs: ids(node.get("outputs"), "outputs")?,
        });
        for h in array(node.get("in_place"), "in_place")? {
            let (Some(o), Some(i)) = (h.get("output"), h.get("input")) else {
                return bad("an in_place entry needs `output` and `input`".into());
            };
            hints.push(InPlaceHint {
                node: n,
                output: uint(o, "output")?,
                input: uint(i, "input")?,
            });
        }
    }
    graph.inputs = ids(doc.get("inputs"), "inputs")?;
    graph.outputs = ids(doc.get("outputs"), "outputs")?;
    let mut views = ViewMap::new();
    for v in array(doc.get("views"), "views")? {
        let (Some(view), Some(source)) = (v.get("view"), v.get("source")) else {
            return bad("a view entry needs `view` and `source`".into());
        };
        views.insert(id(view)?, id(source)?);
    }
    let alignment = doc
        .get("alignment")
        .map(|a| uint(a, "alignment"))
        .transpose()?;
    Ok(GraphFile {
        graph,
        views,
        hints,
        names,
        sizes,
        alignment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_garbage_without_panicking() {
        for text in [
            "",
            "{",
            "[[[",
            "\"\\u12",
            "{\"a\" 1}",
            "nul",
            "[1,]x",
            "{\"values\": 3}",
            "\u{0}",
        ] {
            assert!(parse_graph_json(text).is_err(), "{text:?}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert!(parse_json(&deep).is_err());
    }

    #[test]
    fn reads_escapes() {
        assert_eq!(
            parse_json(r#""a\n\u0041""#).unwrap(),
            Json::Str("a\nA".into())
        );
    }
}
