//! Is every packet in a capture well-formed? Asks tshark, with checksum validation switched on.
//!
//! The exact invocation is [`tshark_check_command`]; each frame is counted once per kind of
//! problem: malformed (`_ws.malformed`), bad IPv4/TCP/UDP/ICMP checksum (`*.checksum.status` is
//! Bad or Illegal), and expert-info errors (`_ws.expert.severity` = Error, which malformed
//! packets and bad checksums also raise).

use std::path::Path;
use std::process::Command;

use crate::capture::CaptureError;
use crate::netns::describe;

/// How many offending frames a report describes.
pub const MAX_OFFENDERS: usize = 10;

/// `_ws.expert.severity` of an error (`tshark -G values`).
const EXPERT_ERROR: &str = "8388608";
/// `*.checksum.status` values that mean trouble: 0 = Bad, 4 = Illegal.
const BAD_STATUS: [&str; 2] = ["0", "4"];

/// The fields tshark prints per frame, in this order.
const FIELDS: [&str; 10] = [
    "frame.number",
    "_ws.malformed",
    "ip.checksum.status",
    "tcp.checksum.status",
    "udp.checksum.status",
    "icmp.checksum.status",
    "_ws.expert.severity",
    "tcp.checksum",
    "_ws.col.Protocol",
    "_ws.col.Info",
];

/// What tshark found in a capture.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaptureReport {
    /// Frames examined (those matching the filter, if any).
    pub packets: u64,
    /// Frames tshark could not dissect (`_ws.malformed`).
    pub malformed: u64,
    /// Frames with a bad IPv4 header checksum.
    pub bad_ip_checksum: u64,
    /// Frames with a bad TCP checksum.
    pub bad_tcp_checksum: u64,
    /// Frames with a bad UDP checksum.
    pub bad_udp_checksum: u64,
    /// Frames with a bad ICMP checksum.
    pub bad_icmp_checksum: u64,
    /// Frames carrying at least one expert-info error.
    pub expert_errors: u64,
    /// tshark's complaint if it could not read the whole file (e.g. cut short).
    pub read_error: Option<String>,
    /// `frame N [protocol] problems: info` for the first [`MAX_OFFENDERS`] offending frames.
    pub offenders: Vec<String>,
}

impl CaptureReport {
    /// True when no frame has any problem and the file was read completely.
    pub fn is_clean(&self) -> bool {
        self.malformed == 0
            && self.bad_ip_checksum == 0
            && self.bad_tcp_checksum == 0
            && self.bad_udp_checksum == 0
            && self.bad_icmp_checksum == 0
            && self.expert_errors == 0
            && self.read_error.is_none()
    }
}

impl std::fmt::Display for CaptureReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} packets: {} malformed, bad checksums ip {} tcp {} udp {} icmp {}, {} with expert errors",
            self.packets,
            self.malformed,
            self.bad_ip_checksum,
            self.bad_tcp_checksum,
            self.bad_udp_checksum,
            self.bad_icmp_checksum,
            self.expert_errors
        )?;
        if let Some(e) = &self.read_error {
            write!(f, "; read error: {e}")?;
        }
        for o in &self.offenders {
            write!(f, "\n  {o}")?;
        }
        Ok(())
    }
}

/// The tshark command that checks `path`, restricted to frames matching `display_filter`.
pub fn tshark_check_command(path: &Path, display_filter: Option<&str>) -> Command {
    let mut cmd = Command::new("tshark");
    cmd.arg("-n").arg("-r").arg(path);
    for pref in ["ip.check_checksum:TRUE", "tcp.check_checksum:TRUE", "udp.check_checksum:TRUE"] {
        cmd.args(["-o", pref]);
    }
    if let Some(filter) = display_filter {
        cmd.args(["-Y", filter]);
    }
    cmd.args(["-T", "fields", "-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=,"]);
    for field in FIELDS {
        cmd.args(["-e", field]);
    }
    cmd
}

/// Checks every frame of the pcap at `path`.
pub fn check_wellformed(path: &Path) -> Result<CaptureReport, CaptureError> {
    check_wellformed_matching(path, None)
}

/// Checks the frames of `path` that match the Wireshark display filter (e.g. only those the
/// stack sent: `eth.src == 02:00:00:00:00:01`, when the Linux side's checksums are offloaded).
pub fn check_wellformed_matching(
    path: &Path,
    display_filter: Option<&str>,
) -> Result<CaptureReport, CaptureError> {
    check_wellformed_with(path, display_filter, &[])
}

/// As [`check_wellformed_matching`], with extra tshark options (e.g. `-d tcp.port==5001,data` to
/// dissect random test payload as plain data instead of letting heuristics guess a protocol).
pub fn check_wellformed_with(
    path: &Path,
    display_filter: Option<&str>,
    extra_args: &[String],
) -> Result<CaptureReport, CaptureError> {
    let mut cmd = tshark_check_command(path, display_filter);
    cmd.args(extra_args);
    let command = describe(&cmd);
    let out = cmd.output().map_err(|source| CaptureError::Spawn { command: command.clone(), source })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let complaint =
        stderr.lines().filter(|l| !l.starts_with("Running as user")).collect::<Vec<_>>().join("\n");
    if !out.status.success() && stdout.trim().is_empty() {
        return Err(CaptureError::CheckFailed { command, stderr: complaint });
    }
    let mut report = parse_fields(&stdout);
    if !out.status.success() {
        report.read_error = Some(complaint);
    }
    Ok(report)
}

/// Builds a report from tshark's tab-separated [`FIELDS`] lines.
fn parse_fields(stdout: &str) -> CaptureReport {
    let mut report = CaptureReport::default();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let cols: Vec<&str> = line.splitn(FIELDS.len(), '\t').collect();
        let col = |i: usize| cols.get(i).copied().unwrap_or("");
        let any_of = |i: usize, wanted: &[&str]| col(i).split(',').any(|v| wanted.contains(&v.trim()));
        report.packets += 1;
        let mut problems = Vec::new();
        let mut count = |hit: bool, counter: &mut u64, what: &'static str| {
            if hit {
                *counter += 1;
                problems.push(what);
            }
        };
        count(!col(1).is_empty(), &mut report.malformed, "malformed");
        count(any_of(2, &BAD_STATUS), &mut report.bad_ip_checksum, "bad IP checksum");
        // Linux may write 0xffff where the sum is 0x0000: the same value in ones' complement
        // (RFC 1624), which tshark flags; it is not a bad checksum.
        let negative_zero = col(7).trim() == "0xffff";
        count(any_of(3, &BAD_STATUS) && !negative_zero, &mut report.bad_tcp_checksum, "bad TCP checksum");
        count(any_of(4, &BAD_STATUS), &mut report.bad_udp_checksum, "bad UDP checksum");
        count(any_of(5, &BAD_STATUS), &mut report.bad_icmp_checksum, "bad ICMP checksum");
        count(any_of(6, &[EXPERT_ERROR]), &mut report.expert_errors, "expert error");
        if !problems.is_empty() && report.offenders.len() < MAX_OFFENDERS {
            report.offenders.push(format!(
                "frame {} [{}] {}: {}",
                col(0),
                col(8),
                problems.join(", "),
                col(9)
            ));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_lines_count_packets_only() {
        let r = parse_fields("1\t\t1\t1\t\t\t\t0x1234\tTCP\tsyn\n2\t\t1\t\t1\t\t\t\tUDP\tx\n");
        assert_eq!(r.packets, 2);
        assert!(r.is_clean(), "{r}");
    }

    #[test]
    fn bad_statuses_and_errors_are_counted_per_frame() {
        let r = parse_fields("7\t\t1,0\t0\t\t\t8388608,6291456\t0x1234\tICMP\tdest unreachable\n");
        assert_eq!((r.bad_ip_checksum, r.bad_tcp_checksum, r.expert_errors), (1, 1, 1));
        assert_eq!(r.offenders.len(), 1);
        assert!(r.offenders[0].starts_with("frame 7 [ICMP]"), "{}", r.offenders[0]);
    }

    #[test]
    fn linux_negative_zero_tcp_checksum_is_not_bad() {
        let r = parse_fields("9\t\t1\t0\t\t\t\t0xffff\tTCP\tack\n");
        assert_eq!(r.bad_tcp_checksum, 0, "{r}");
    }
}
