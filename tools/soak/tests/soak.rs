//! The soak's 60-second version (issue 14), in `make test`: runs `slimtcp-soak` for
//! `SOAK_SECONDS` (default 60) and checks its exit status and its JSON summary. `make soak` runs
//! the full 20 minutes.

use std::process::Command;

#[test]
fn a_minute_of_churn_faults_and_hostile_chains_leaves_nothing_behind() {
    let seconds = std::env::var("SOAK_SECONDS").unwrap_or_else(|_| "60".into());
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("soak");
    let out = dir.join("summary.json");
    let log = dir.join("soak.log");
    let status = Command::new(env!("CARGO_BIN_EXE_slimtcp-soak"))
        .args(["--seconds", &seconds])
        .arg("--out")
        .arg(&out)
        .arg("--log")
        .arg(&log)
        .status()
        .expect("slimtcp-soak runs");
    let summary = std::fs::read_to_string(&out).expect("the summary was written");
    assert!(status.success(), "the soak failed ({status}); summary {}:\n{summary}", out.display());
    assert!(summary.contains("\"pass\": true"), "{summary}");
    assert!(summary.contains("\"released_at_end\": true"), "{summary}");
}
