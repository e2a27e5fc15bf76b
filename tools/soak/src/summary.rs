//! The soak's summary: printed at the end, and as JSON (target/soak/summary.json by default).
//! The JSON is written by hand (a few objects of numbers and strings): no serializer needed.

use std::fmt::Write as _;

/// A JSON value, just what the summary needs.
#[derive(Debug, Clone)]
pub enum Json {
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// Writes the value, indented by `depth` levels.
    fn write(&self, out: &mut String, depth: usize) {
        let pad = "  ".repeat(depth + 1);
        match self {
            Json::Num(n) if n.fract() == 0.0 && n.abs() < 1e15 => {
                let _ = write!(out, "{}", *n as i64);
            }
            Json::Num(n) if n.is_finite() => {
                let _ = write!(out, "{n:.3}");
            }
            Json::Num(_) => out.push_str("null"),
            Json::Bool(b) => {
                let _ = write!(out, "{b}");
            }
            Json::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad);
                    v.write(out, depth + 1);
                }
                if !items.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(depth));
                }
                out.push(']');
            }
            Json::Obj(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    out.push_str(&pad);
                    Json::Str(k.clone()).write(out, depth + 1);
                    out.push_str(": ");
                    v.write(out, depth + 1);
                }
                if !pairs.is_empty() {
                    out.push('\n');
                    out.push_str(&"  ".repeat(depth));
                }
                out.push('}');
            }
        }
    }

    /// The value as indented JSON text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        self.write(&mut s, 0);
        s.push('\n');
        s
    }
}

/// A number.
pub fn num(v: impl Into<f64>) -> Json {
    Json::Num(v.into())
}

/// A u64 (as a JSON number).
pub fn count(v: u64) -> Json {
    Json::Num(v as f64)
}

/// A string.
pub fn text(s: impl Into<String>) -> Json {
    Json::Str(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nested_values_with_escapes() {
        let j = Json::obj([
            ("a", count(3)),
            ("b", text("x\"y\n")),
            ("c", Json::Arr(vec![num(1.5), Json::Bool(true)])),
            ("d", Json::Obj(Vec::new())),
        ]);
        assert_eq!(
            j.render(),
            "{\n  \"a\": 3,\n  \"b\": \"x\\\"y\\u000a\",\n  \"c\": [\n    1.500,\n    true\n  ],\n  \"d\": {}\n}\n"
        );
    }
}
