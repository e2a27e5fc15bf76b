//! Helpers shared by the slimtcp-perf integration tests: running the binary and reading its
//! one-line JSON summary.

#![allow(dead_code)]

use std::process::{Command, Output};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_slimtcp-perf");

/// Runs the binary with `args` (whitespace-separated) and returns its output.
pub fn perf(args: &str) -> Output {
    Command::new(BIN).args(args.split_whitespace()).output().expect("slimtcp-perf runs")
}

/// The summary object of a `--json` run: stdout must be exactly one JSON object line.
pub fn summary(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "slimtcp-perf failed: {}\nstderr: {stderr}", out.status);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout must hold one JSON line, got {stdout:?}");
    let line = lines[0].trim();
    assert!(is_flat_json_object(line), "not a flat JSON object: {line}");
    line.to_owned()
}

/// A number field of a flat JSON object.
pub fn number(json: &str, key: &str) -> f64 {
    let raw = raw_field(json, key).unwrap_or_else(|| panic!("{key} missing in {json}"));
    raw.parse().unwrap_or_else(|_| panic!("{key} is not a number in {json}"))
}

/// A boolean field of a flat JSON object.
pub fn boolean(json: &str, key: &str) -> bool {
    match raw_field(json, key) {
        Some("true") => true,
        Some("false") => false,
        other => panic!("{key} is not a boolean ({other:?}) in {json}"),
    }
}

fn raw_field<'a>(json: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("\"{key}\":");
    let start = json.find(&pat)? + pat.len();
    let rest = &json[start..];
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// Checks the shape `{"k":v,...}` with string, number, boolean and null values (what the tool
/// writes).
fn is_flat_json_object(s: &str) -> bool {
    let Some(body) = s.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else { return false };
    let mut chars = body.chars().peekable();
    loop {
        if !read_string(&mut chars) || chars.next() != Some(':') {
            return false;
        }
        match chars.peek() {
            Some('"') => {
                if !read_string(&mut chars) {
                    return false;
                }
            }
            Some(_) => {
                let v: String = std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect();
                if !(v == "true" || v == "false" || v == "null" || v.parse::<f64>().is_ok()) {
                    return false;
                }
            }
            None => return false,
        }
        match chars.next() {
            Some(',') => continue,
            None => return true,
            Some(_) => return false,
        }
    }
}

fn read_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> bool {
    if chars.next() != Some('"') {
        return false;
    }
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.next().is_none() => return false,
            '"' => return true,
            _ => {}
        }
    }
    false
}
