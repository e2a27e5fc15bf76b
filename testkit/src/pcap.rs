//! A minimal classic-pcap writer (microsecond timestamps), for hand-built test captures.

use std::io::Write;
use std::time::Duration;

/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The snapshot length written in the file header.
pub const SNAPLEN: u32 = 65_535;
/// Magic number of microsecond-resolution pcap files.
const MAGIC_MICROS: u32 = 0xa1b2_c3d4;

/// Why writing a capture failed.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The underlying writer failed.
    #[error("writing the capture failed")]
    Io(#[source] std::io::Error),
    /// A record longer than [`SNAPLEN`] or claiming an original length shorter than its data.
    #[error("record of {captured} bytes (original length {original}) cannot be written")]
    BadRecord {
        /// Bytes in the record.
        captured: usize,
        /// The original length claimed.
        original: usize,
    },
}

/// Writes a pcap file: the header on creation, then one record per packet.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header for `linktype` (e.g. [`LINKTYPE_ETHERNET`]).
    pub fn new(mut out: W, linktype: u32) -> Result<Self, PcapError> {
        let mut header = Vec::with_capacity(24);
        header.extend_from_slice(&MAGIC_MICROS.to_le_bytes());
        header.extend_from_slice(&2u16.to_le_bytes());
        header.extend_from_slice(&4u16.to_le_bytes());
        header.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        header.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        header.extend_from_slice(&SNAPLEN.to_le_bytes());
        header.extend_from_slice(&linktype.to_le_bytes());
        out.write_all(&header).map_err(PcapError::Io)?;
        Ok(PcapWriter { out })
    }

    /// Appends a complete packet seen at `ts` (since the epoch).
    pub fn write_packet(&mut self, ts: Duration, data: &[u8]) -> Result<(), PcapError> {
        self.write_record(ts, data, data.len())
    }

    /// Appends a record of `data` that claims the packet was `original_len` bytes on the wire
    /// (a capture truncated by the snapshot length).
    pub fn write_record(&mut self, ts: Duration, data: &[u8], original_len: usize) -> Result<(), PcapError> {
        let bad = || PcapError::BadRecord { captured: data.len(), original: original_len };
        let captured = u32::try_from(data.len()).ok().filter(|&n| n <= SNAPLEN).ok_or_else(bad)?;
        let original = u32::try_from(original_len).ok().filter(|&n| n >= captured).ok_or_else(bad)?;
        let secs = u32::try_from(ts.as_secs()).unwrap_or(u32::MAX);
        let mut rec = Vec::with_capacity(16 + data.len());
        rec.extend_from_slice(&secs.to_le_bytes());
        rec.extend_from_slice(&ts.subsec_micros().to_le_bytes());
        rec.extend_from_slice(&captured.to_le_bytes());
        rec.extend_from_slice(&original.to_le_bytes());
        rec.extend_from_slice(data);
        self.out.write_all(&rec).map_err(PcapError::Io)
    }

    /// Flushes and returns the writer.
    pub fn into_inner(mut self) -> Result<W, PcapError> {
        self.out.flush().map_err(PcapError::Io)?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_starts_with_a_24_byte_little_endian_header() {
        let w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).expect("in-memory write");
        let bytes = w.into_inner().expect("flush");
        assert_eq!(bytes.len(), 24);
        assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&bytes[20..24], &1u32.to_le_bytes());
    }

    #[test]
    fn a_record_carries_timestamp_lengths_and_data() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).expect("in-memory write");
        w.write_record(Duration::from_micros(3_000_007), &[1, 2, 3], 10).expect("valid record");
        let bytes = w.into_inner().expect("flush");
        let rec = &bytes[24..];
        assert_eq!(&rec[0..4], &3u32.to_le_bytes());
        assert_eq!(&rec[4..8], &7u32.to_le_bytes());
        assert_eq!(&rec[8..12], &3u32.to_le_bytes());
        assert_eq!(&rec[12..16], &10u32.to_le_bytes());
        assert_eq!(&rec[16..], &[1, 2, 3]);
    }

    #[test]
    fn an_original_length_below_the_captured_length_is_refused() {
        let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET).expect("in-memory write");
        assert!(matches!(w.write_record(Duration::ZERO, &[0; 8], 4), Err(PcapError::BadRecord { .. })));
    }
}
