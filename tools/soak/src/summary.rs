//! The soak's summary as JSON (target/soak/summary.json by default): serde_json values, built
//! with the small helpers below.

/// A JSON value.
pub type Json = serde_json::Value;

/// An object from `(key, value)` pairs, keys as given.
pub fn obj<const N: usize>(pairs: [(&str, Json); N]) -> Json {
    Json::Object(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// A number (`null` when not finite).
pub fn num(v: impl Into<f64>) -> Json {
    serde_json::Number::from_f64(v.into()).map_or(Json::Null, Json::Number)
}

/// A count.
pub fn count(v: u64) -> Json {
    Json::from(v)
}

/// A string.
pub fn text(s: impl Into<String>) -> Json {
    Json::String(s.into())
}

/// The value as indented JSON text, with a final newline.
pub fn render(j: &Json) -> String {
    let mut s = serde_json::to_string_pretty(j).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_nested_values_with_escapes() {
        let j = obj([
            ("a", count(3)),
            ("b", text("x\"y\n")),
            ("c", Json::Array(vec![num(1.5), Json::Bool(true), num(f64::NAN)])),
            ("d", obj([])),
        ]);
        let back: Json = serde_json::from_str(&render(&j)).expect("valid JSON");
        assert_eq!(back["a"], 3);
        assert_eq!(back["b"], "x\"y\n");
        assert_eq!(back["c"], serde_json::json!([1.5, true, null]));
        assert!(back["d"].as_object().is_some_and(|o| o.is_empty()));
        assert!(render(&j).ends_with("}\n"));
    }
}
