//! Classic libpcap capture files (Ethernet, microsecond timestamps), written and read back.
//!
//! Files are written in the host's byte order with magic `0xa1b2c3d4`, version 2.4, snaplen
//! 65535 and link type `LINKTYPE_ETHERNET` (1), which Wireshark and tcpdump open directly.
//! Timestamps are the stack's [`Instant`]s, so a simulation's capture shows virtual time (a
//! caller that wants wall-clock times passes microseconds since the UNIX epoch).
//!
//! [`PcapWriter`] writes to a file ([`PcapWriter::create`]) or to any [`Write`] sink, such as a
//! socket streaming a live capture ([`PcapWriter::new`]).

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::time::Instant;

/// Magic number of a microsecond-resolution pcap file.
pub const PCAP_MAGIC: u32 = 0xa1b2_c3d4;
/// Largest number of bytes stored per frame; longer frames are truncated in the file.
pub const SNAPLEN: u32 = 65_535;
/// Link type of Ethernet frames.
pub const LINKTYPE_ETHERNET: u32 = 1;

const GLOBAL_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;

/// Errors writing or reading a capture file.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file could not be created.
    #[error("cannot create capture file {path}")]
    Create {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Writing or flushing the file (or other sink) failed.
    #[error("cannot write capture to {path}")]
    Write {
        /// The file, or the name of the sink.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be opened or read.
    #[error("cannot read capture file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a microsecond pcap file.
    #[error("{path} is not a microsecond pcap file (magic {magic:#010x})")]
    BadMagic {
        /// The file.
        path: PathBuf,
        /// The magic number found.
        magic: u32,
    },
    /// The file ends in the middle of a header or a frame.
    #[error("capture file {path} is truncated at byte {offset}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the incomplete part starts.
        offset: usize,
    },
}

/// Writes frames in the classic pcap format to `W`: a buffered file by default
/// ([`PcapWriter::create`]), or any sink ([`PcapWriter::new`]). Flushed by
/// [`PcapWriter::flush`] and on drop (a failure then is logged).
#[derive(Debug)]
pub struct PcapWriter<W: Write = BufWriter<File>> {
    out: W,
    /// What is written (a file's path, or the name given to [`PcapWriter::new`]), for errors.
    path: PathBuf,
}

impl PcapWriter {
    /// Creates (or truncates) `path` and writes the pcap global header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, PcapError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| PcapError::Create { path: path.clone(), source })?;
        PcapWriter::new(BufWriter::with_capacity(64 * 1024, file), path)
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the pcap global header to `out` and returns a writer of frames to it. `name` says
    /// what `out` is (e.g. `the control socket of tenant vm1`) in errors; it is
    /// what [`path`](Self::path) returns. `out` is written as is: wrap an unbuffered sink
    /// (socket, file) in a [`BufWriter`].
    pub fn new(out: W, name: impl Into<PathBuf>) -> Result<Self, PcapError> {
        let mut writer = PcapWriter { out, path: name.into() };
        let mut header = [0u8; GLOBAL_HEADER_LEN];
        header[0..4].copy_from_slice(&PCAP_MAGIC.to_ne_bytes());
        header[4..6].copy_from_slice(&2u16.to_ne_bytes());
        header[6..8].copy_from_slice(&4u16.to_ne_bytes());
        // thiszone (8..12) and sigfigs (12..16) stay zero.
        header[16..20].copy_from_slice(&SNAPLEN.to_ne_bytes());
        header[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_ne_bytes());
        writer.write_all(&header)?;
        Ok(writer)
    }

    /// The sink.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// The sink, mutable (e.g. to set a socket's timeout). Writing to it directly corrupts the
    /// capture.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// The file being written (or the name given to [`PcapWriter::new`]).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one frame received or sent at `at` (truncated to [`SNAPLEN`] bytes in the file).
    pub fn write_frame(&mut self, at: Instant, frame: &[u8]) -> Result<(), PcapError> {
        let micros = at.total_micros();
        let secs = u32::try_from(micros / 1_000_000).unwrap_or(u32::MAX);
        let usecs = (micros % 1_000_000) as u32;
        let orig_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let incl_len = orig_len.min(SNAPLEN);
        let mut header = [0u8; RECORD_HEADER_LEN];
        header[0..4].copy_from_slice(&secs.to_ne_bytes());
        header[4..8].copy_from_slice(&usecs.to_ne_bytes());
        header[8..12].copy_from_slice(&incl_len.to_ne_bytes());
        header[12..16].copy_from_slice(&orig_len.to_ne_bytes());
        self.write_all(&header)?;
        self.write_all(&frame[..incl_len as usize])
    }

    /// Writes buffered frames to the file (or sink).
    pub fn flush(&mut self) -> Result<(), PcapError> {
        self.out.flush().map_err(|source| PcapError::Write { path: self.path.clone(), source })
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), PcapError> {
        self.out.write_all(bytes).map_err(|source| PcapError::Write { path: self.path.clone(), source })
    }
}

impl<W: Write> Drop for PcapWriter<W> {
    fn drop(&mut self) {
        if let Err(e) = self.flush() {
            log::warn!("{e}: {:?}", std::error::Error::source(&e));
        }
    }
}

/// Reads a classic microsecond pcap file (either byte order) into `(timestamp, frame)` pairs.
pub fn read_pcap(path: impl AsRef<Path>) -> Result<Vec<(Instant, Vec<u8>)>, PcapError> {
    let path = path.as_ref();
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|source| PcapError::Read { path: path.to_path_buf(), source })?;
    read_pcap_bytes(&bytes, path)
}

/// Reads a classic microsecond pcap capture held in memory (e.g. written by a [`PcapWriter`]
/// into a `Vec<u8>`), as [`read_pcap`] reads a file; `name` says what it is in errors.
pub fn read_pcap_bytes(bytes: &[u8], name: impl AsRef<Path>) -> Result<Vec<(Instant, Vec<u8>)>, PcapError> {
    let path = name.as_ref();
    parse_pcap(bytes).map_err(|e| match e {
        ParseError::BadMagic(magic) => PcapError::BadMagic { path: path.to_path_buf(), magic },
        ParseError::Truncated(offset) => PcapError::Truncated { path: path.to_path_buf(), offset },
    })
}

enum ParseError {
    BadMagic(u32),
    Truncated(usize),
}

fn parse_pcap(bytes: &[u8]) -> Result<Vec<(Instant, Vec<u8>)>, ParseError> {
    let header = bytes.get(..GLOBAL_HEADER_LEN).ok_or(ParseError::Truncated(0))?;
    let magic_bytes = [header[0], header[1], header[2], header[3]];
    let swapped = if u32::from_ne_bytes(magic_bytes) == PCAP_MAGIC {
        false
    } else if u32::from_ne_bytes(magic_bytes).swap_bytes() == PCAP_MAGIC {
        true
    } else {
        return Err(ParseError::BadMagic(u32::from_ne_bytes(magic_bytes)));
    };
    let field = |b: &[u8], at: usize| {
        let v = u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if swapped {
            v.swap_bytes()
        } else {
            v
        }
    };
    let mut frames = Vec::new();
    let mut offset = GLOBAL_HEADER_LEN;
    while offset < bytes.len() {
        let rec = bytes.get(offset..offset + RECORD_HEADER_LEN).ok_or(ParseError::Truncated(offset))?;
        let micros = u64::from(field(rec, 0)) * 1_000_000 + u64::from(field(rec, 4));
        let incl_len = field(rec, 8) as usize;
        let data_start = offset + RECORD_HEADER_LEN;
        let data = bytes.get(data_start..data_start + incl_len).ok_or(ParseError::Truncated(offset))?;
        frames.push((Instant::from_micros(micros), data.to_vec()));
        offset = data_start + incl_len;
    }
    Ok(frames)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nic::fault::Rng;

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("slimtcp-pcap-{}-{name}.pcap", std::process::id()))
    }

    #[test]
    fn round_trips_byte_exactly() {
        let path = temp_path("roundtrip");
        let mut rng = Rng::new(99);
        let mut expected = Vec::new();
        for i in 0..50u64 {
            let mut frame = vec![0u8; 14 + rng.gen_range(0..1500) as usize];
            rng.fill_bytes(&mut frame);
            expected.push((Instant::from_micros(i * 1_234_567), frame));
        }
        expected.push((Instant::from_micros(5), Vec::new()));
        {
            let mut w = PcapWriter::create(&path).expect("create capture");
            for (at, frame) in &expected {
                w.write_frame(*at, frame).expect("write frame");
            }
        } // dropped: flushed
        let bytes = std::fs::read(&path).expect("read capture");
        assert_eq!(&bytes[..4], &PCAP_MAGIC.to_ne_bytes());
        assert_eq!(u32::from_ne_bytes([bytes[20], bytes[21], bytes[22], bytes[23]]), LINKTYPE_ETHERNET);
        let back = read_pcap(&path).expect("parse capture");
        assert_eq!(back, expected);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn writing_to_memory_gives_the_bytes_a_file_holds() {
        let frames: Vec<(Instant, Vec<u8>)> = (0..20u64)
            .map(|i| (Instant::from_micros(1_700_000_000_000_000 + i * 17), vec![i as u8; 60 + i as usize]))
            .collect();
        let path = temp_path("memory");
        let mut in_memory = PcapWriter::new(Vec::new(), "in-memory capture").expect("header into a Vec");
        {
            let mut in_file = PcapWriter::create(&path).expect("create capture");
            for (at, frame) in &frames {
                in_memory.write_frame(*at, frame).expect("write frame to a Vec");
                in_file.write_frame(*at, frame).expect("write frame to a file");
            }
        }
        in_memory.flush().expect("flush a Vec");
        assert_eq!(in_memory.path(), Path::new("in-memory capture"));
        let bytes = in_memory.get_ref();
        assert_eq!(bytes, &std::fs::read(&path).expect("read capture"));
        assert_eq!(read_pcap_bytes(bytes, "the Vec").expect("parse the Vec"), frames);
        std::fs::remove_file(&path).ok();
    }

    #[test]
    fn a_failing_sink_is_named_in_the_error() {
        #[derive(Debug)]
        struct Broken;
        impl Write for Broken {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let err = PcapWriter::new(Broken, "the control socket").expect_err("the header fails");
        assert!(matches!(err, PcapError::Write { .. }));
        assert_eq!(err.to_string(), "cannot write capture to the control socket");
    }

    #[test]
    fn reads_other_byte_order_and_rejects_garbage() {
        // Big-endian-on-little (or the reverse) file holding one 3-byte frame at 1.000002 s.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&PCAP_MAGIC.swap_bytes().to_ne_bytes());
        bytes.extend_from_slice(&2u16.swap_bytes().to_ne_bytes());
        bytes.extend_from_slice(&4u16.swap_bytes().to_ne_bytes());
        for v in [0u32, 0, SNAPLEN, LINKTYPE_ETHERNET, 1, 2, 3, 3] {
            bytes.extend_from_slice(&v.swap_bytes().to_ne_bytes());
        }
        bytes.extend_from_slice(&[7, 8, 9]);
        let frames = parse_pcap(&bytes).ok().expect("parse swapped");
        assert_eq!(frames, vec![(Instant::from_micros(1_000_002), vec![7, 8, 9])]);
        assert!(matches!(parse_pcap(&bytes[..bytes.len() - 1]), Err(ParseError::Truncated(24))));
        assert!(matches!(parse_pcap(&[0u8; 24]), Err(ParseError::BadMagic(0))));
    }

    #[test]
    fn create_in_missing_directory_fails() {
        let err = PcapWriter::create("/nonexistent-dir-slimtcp/x.pcap").expect_err("must fail");
        assert!(matches!(err, PcapError::Create { .. }));
    }
}
