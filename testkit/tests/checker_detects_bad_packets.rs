//! The tshark checker must catch what it exists to catch: captures of hand-built frames with a
//! bad TCP checksum or a truncated header are reported, a correct capture reports nothing.

use std::path::PathBuf;

use slimtcp::nic::pcap::PcapWriter;
use slimtcp::time::Instant;
use slimtcp_testkit::check::{check_wellformed, CaptureReport};

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];
const SRC_IP: [u8; 4] = [10, 7, 0, 1];
const DST_IP: [u8; 4] = [10, 7, 0, 2];

/// The Internet checksum (RFC 1071) of `chunks` concatenated.
fn inet_checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum = 0u32;
    let bytes: Vec<u8> = chunks.concat();
    for pair in bytes.chunks(2) {
        let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A complete Ethernet/IPv4/TCP frame with correct checksums carrying `payload`.
fn tcp_frame(payload: &[u8]) -> Vec<u8> {
    let mut tcp = vec![0u8; 20];
    tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
    tcp[2..4].copy_from_slice(&5001u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
    tcp[8..12].copy_from_slice(&2000u32.to_be_bytes());
    tcp[12] = 5 << 4;
    tcp[13] = 0x18; // PSH|ACK
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    tcp.extend_from_slice(payload);
    let tcp_len = u16::try_from(tcp.len()).expect("small segment");
    let pseudo = [&SRC_IP[..], &DST_IP[..], &[0, 6], &tcp_len.to_be_bytes()].concat();
    let csum = inet_checksum(&[&pseudo, &tcp]);
    tcp[16..18].copy_from_slice(&csum.to_be_bytes());

    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0];
    ip[2..4].copy_from_slice(&(20 + tcp_len).to_be_bytes());
    ip.extend_from_slice(&SRC_IP);
    ip.extend_from_slice(&DST_IP);
    let csum = inet_checksum(&[&ip]);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());

    [&DST_MAC[..], &SRC_MAC[..], &[0x08, 0x00], &ip, &tcp].concat()
}

/// Offset of the TCP checksum in frames from [`tcp_frame`].
const TCP_CSUM_AT: usize = 14 + 20 + 16;

fn write_pcap(name: &str, frames: &[Vec<u8>]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!("{name}-{}.pcap", std::process::id()));
    let mut w = PcapWriter::create(&path).expect("create pcap in the target tmpdir");
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(Instant::from_millis(i as u64), f).expect("pcap record");
    }
    w.flush().expect("flush pcap");
    path
}

fn check(name: &str, frames: &[Vec<u8>]) -> CaptureReport {
    let path = write_pcap(name, frames);
    let report = check_wellformed(&path).expect("tshark reads the capture");
    let _ = std::fs::remove_file(&path);
    report
}

#[test]
fn correct_frames_produce_a_clean_report() {
    let report = check("good", &[tcp_frame(b"hello"), tcp_frame(b""), tcp_frame(&[7u8; 1000])]);
    assert_eq!(report.packets, 3, "{report}");
    assert!(report.is_clean(), "{report}");
}

#[test]
fn a_bad_tcp_checksum_is_reported_with_the_offending_frame() {
    let mut bad = tcp_frame(b"corrupt me");
    bad[TCP_CSUM_AT] ^= 0x55;
    let report = check("badcsum", &[tcp_frame(b"fine"), bad]);
    assert_eq!(report.packets, 2, "{report}");
    assert_eq!(report.bad_tcp_checksum, 1, "{report}");
    assert_eq!(report.bad_ip_checksum, 0, "{report}");
    assert!(!report.is_clean());
    assert!(report.offenders[0].starts_with("frame 2 "), "{report}");
}

#[test]
fn a_bad_ip_header_checksum_is_reported() {
    let mut bad = tcp_frame(b"x");
    bad[14 + 10] ^= 0x01;
    let report = check("badip", &[bad]);
    assert_eq!(report.bad_ip_checksum, 1, "{report}");
}

#[test]
fn a_truncated_tcp_header_is_reported_as_malformed() {
    let good = tcp_frame(b"");
    // IPv4 claims a 20-byte TCP header, but only 8 bytes of it are in the frame.
    let truncated = good[..14 + 20 + 8].to_vec();
    let report = check("truncated", &[truncated]);
    assert_eq!(report.packets, 1, "{report}");
    assert_eq!(report.malformed, 1, "{report}");
    assert!(!report.is_clean());
}
