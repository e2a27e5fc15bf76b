//! Errors as one line of text, for binaries' stderr and logs (the stack's examples, the backend
//! daemon, the tools) and the guest library's C API (`slim_last_error`). Here, beside the
//! contract, so that both sides share it without the guest library depending on the stack.

/// `error: cause: cause...`: `e` and its chain of sources on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A command-line parser's multi-line message (clap's `error: ...`, tips, usage) as one line:
/// the lines before `Usage:`, without the `error: ` prefix.
pub fn usage_error_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    let joined = lines.join(" ");
    let joined = joined.trim_start_matches("error: ").trim();
    if joined.is_empty() {
        "invalid arguments".to_owned()
    } else {
        joined.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("opening the device")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn an_error_and_its_sources_are_one_line() {
        let e = Outer(std::io::Error::other("no such device"));
        assert_eq!(error_chain(&e), "opening the device: no such device");
        assert_eq!(error_chain(&std::io::Error::other("alone")), "alone");
    }

    #[test]
    fn clap_errors_become_one_line() {
        let text = "error: unexpected argument '--x' found\n\n  tip: to pass '--x' as a value, use '-- --x'\n\nUsage: slimtcp-perf [OPTIONS]\n\nFor more information, try '--help'.\n";
        let line = usage_error_line(text);
        assert!(!line.contains('\n'));
        assert!(line.starts_with("unexpected argument '--x' found"), "{line}");
        assert!(!line.contains("Usage"));
        assert_eq!(usage_error_line("\n\nUsage: x\n"), "invalid arguments", "nothing before the usage");
    }
}
