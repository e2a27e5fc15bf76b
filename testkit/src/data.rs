//! Deterministic byte streams and their SHA-256 digests.
//!
//! Byte `i` of stream `seed` depends only on `(seed, i)`, so a sender and a receiver can
//! produce and check 100 MB streams chunk by chunk, at any offsets, without storing them.

use sha2::{Digest, Sha256};

/// A SHA-256 digest.
pub type Digest256 = [u8; 32];

/// SplitMix64's finaliser: a fast, well-mixed 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 8 stream bytes starting at `8 * word`.
fn word_bytes(seed: u64, word: u64) -> [u8; 8] {
    mix(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ word.wrapping_add(0x632b_e59b_d9b4_e019)).to_le_bytes()
}

/// Fills `buf` with stream `seed`'s bytes `offset .. offset + buf.len()`.
pub fn pattern(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut pos = 0usize;
    let mut word = offset / 8;
    let skip = (offset % 8) as usize;
    if skip != 0 {
        let bytes = word_bytes(seed, word);
        let n = (8 - skip).min(buf.len());
        buf[..n].copy_from_slice(&bytes[skip..skip + n]);
        pos = n;
        word += 1;
    }
    let mut chunks = buf[pos..].chunks_exact_mut(8);
    for chunk in &mut chunks {
        chunk.copy_from_slice(&word_bytes(seed, word));
        word += 1;
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        let n = rest.len();
        rest.copy_from_slice(&word_bytes(seed, word)[..n]);
    }
}

/// The index in `buf` of the first byte that differs from stream `seed` at `offset`, if any.
pub fn pattern_mismatch(seed: u64, offset: u64, buf: &[u8]) -> Option<usize> {
    let mut expected = [0u8; 4096];
    let mut done = 0usize;
    while done < buf.len() {
        let n = (buf.len() - done).min(expected.len());
        pattern(seed, offset + done as u64, &mut expected[..n]);
        if let Some(i) = expected[..n].iter().zip(&buf[done..done + n]).position(|(a, b)| a != b) {
            return Some(done + i);
        }
        done += n;
    }
    None
}

/// A cursor over stream `seed`: each [`fill`](PatternStream::fill) continues where the last ended.
#[derive(Debug, Clone)]
pub struct PatternStream {
    seed: u64,
    offset: u64,
}

impl PatternStream {
    /// The stream `seed` from its first byte.
    pub fn new(seed: u64) -> Self {
        PatternStream { seed, offset: 0 }
    }

    /// Fills `buf` with the next `buf.len()` bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        pattern(self.seed, self.offset, buf);
        self.offset += buf.len() as u64;
    }

    /// Bytes produced so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// Stream `seed` of `len` pattern bytes behind its name: the seed's 8 bytes, little-endian (the
/// form [`NamedStreamCheck`] reads back, for tests where a receiver cannot tell its
/// connections apart otherwise).
pub fn named_stream(seed: u64, len: usize) -> Vec<u8> {
    let mut data = seed.to_le_bytes().to_vec();
    data.resize(8 + len, 0);
    pattern(seed, 0, &mut data[8..]);
    data
}

/// Checks a [`named_stream`] fed in pieces of any size: learns the seed from the first 8 bytes,
/// then each byte against the pattern (panicking at the first wrong one, naming the stream and
/// the byte's offset in it).
#[derive(Debug, Clone, Default)]
pub struct NamedStreamCheck {
    name: Vec<u8>,
    seed: Option<u64>,
    seen: u64,
}

impl NamedStreamCheck {
    /// A check that has seen nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks the next piece of the stream.
    pub fn feed(&mut self, mut data: &[u8]) {
        if self.seed.is_none() {
            let take = (8 - self.name.len()).min(data.len());
            self.name.extend_from_slice(&data[..take]);
            data = &data[take..];
            if let Ok(name) = <[u8; 8]>::try_from(self.name.as_slice()) {
                self.seed = Some(u64::from_le_bytes(name));
            }
        }
        if let Some(seed) = self.seed {
            if let Some(at) = pattern_mismatch(seed, self.seen, data) {
                panic!("stream {seed} corrupt at byte {}", self.seen + at as u64);
            }
            self.seen += data.len() as u64;
        }
    }

    /// The stream's seed, once its name has arrived.
    pub fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Pattern bytes checked (the name not counted).
    pub fn bytes(&self) -> u64 {
        self.seen
    }
}

/// A running SHA-256 over a byte stream, counting its length.
#[derive(Debug, Clone, Default)]
pub struct StreamHasher {
    hasher: Sha256,
    bytes: u64,
}

impl StreamHasher {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
        self.bytes += data.len() as u64;
    }

    /// Bytes hashed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The digest of everything appended.
    pub fn finish(self) -> Digest256 {
        self.hasher.finalize().into()
    }
}

/// The SHA-256 of `data`.
pub fn sha256(data: &[u8]) -> Digest256 {
    Sha256::digest(data).into()
}

/// The SHA-256 of the first `len` bytes of stream `seed`, computed in 64 KiB chunks.
pub fn pattern_digest(seed: u64, len: u64) -> Digest256 {
    let mut stream = PatternStream::new(seed);
    let mut hasher = StreamHasher::new();
    let mut buf = vec![0u8; 64 * 1024];
    while stream.offset() < len {
        let n = usize::try_from(len - stream.offset()).map_or(buf.len(), |left| left.min(buf.len()));
        stream.fill(&mut buf[..n]);
        hasher.update(&buf[..n]);
    }
    hasher.finish()
}

/// Lower-case hex of `bytes` (for digests in assertion messages).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_and_offset_give_the_same_bytes() {
        let mut a = [0u8; 100];
        let mut b = [0u8; 100];
        pattern(7, 12345, &mut a);
        pattern(7, 12345, &mut b);
        assert_eq!(a, b);
    }

    #[test]
    fn different_seeds_give_different_streams() {
        let mut a = [0u8; 64];
        let mut b = [0u8; 64];
        pattern(1, 0, &mut a);
        pattern(2, 0, &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn chunks_at_any_offsets_compose_into_the_whole_stream() {
        let mut whole = vec![0u8; 1000];
        pattern(42, 3, &mut whole);
        let mut pieced = vec![0u8; 1000];
        let mut stream_pos = 0usize;
        for len in [1usize, 2, 5, 7, 8, 9, 13, 64, 100, 791] {
            pattern(42, 3 + stream_pos as u64, &mut pieced[stream_pos..stream_pos + len]);
            stream_pos += len;
        }
        assert_eq!(stream_pos, 1000);
        assert_eq!(whole, pieced);
    }

    #[test]
    fn mismatch_finds_the_first_corrupted_byte() {
        let mut buf = vec![0u8; 10_000];
        pattern(9, 77, &mut buf);
        assert_eq!(pattern_mismatch(9, 77, &buf), None);
        buf[5_001] ^= 1;
        assert_eq!(pattern_mismatch(9, 77, &buf), Some(5_001));
    }

    #[test]
    fn a_named_stream_fed_in_pieces_of_any_size_is_read_back_with_its_name() {
        let data = named_stream(42, 5000);
        for piece in [1, 3, 7, 8, 9, 4096] {
            let mut check = NamedStreamCheck::new();
            for chunk in data.chunks(piece) {
                check.feed(chunk);
            }
            assert_eq!((check.seed(), check.bytes()), (Some(42), 5000), "pieces of {piece}");
        }
        let mut check = NamedStreamCheck::new();
        check.feed(&data[..5]);
        assert_eq!((check.seed(), check.bytes()), (None, 0), "the name is not whole yet");
    }

    #[test]
    #[should_panic(expected = "stream 42 corrupt at byte 150")]
    fn a_named_stream_with_a_wrong_byte_fails_its_check() {
        let mut data = named_stream(42, 300);
        data[8 + 150] ^= 1;
        let mut check = NamedStreamCheck::new();
        for chunk in data.chunks(100) {
            check.feed(chunk);
        }
    }

    #[test]
    fn pattern_digest_equals_hashing_the_generated_bytes() {
        let mut buf = vec![0u8; 200_001];
        pattern(5, 0, &mut buf);
        assert_eq!(pattern_digest(5, buf.len() as u64), sha256(&buf));
    }

    #[test]
    fn stream_hasher_counts_bytes_and_matches_one_shot_sha256() {
        let mut h = StreamHasher::new();
        h.update(b"hello ");
        h.update(b"world");
        assert_eq!(h.bytes(), 11);
        assert_eq!(hex(&h.finish()), hex(&sha256(b"hello world")));
    }
}
