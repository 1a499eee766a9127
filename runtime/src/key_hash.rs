//! A seeded hash of a key's bytes that can be fed in pieces: `namespace`, `/` and `name`
//! hash exactly as the joined `namespace/name` does, without the joined key being written
//! anywhere.
//!
//! Invariants:
//! - The hash is a function of the seeds and of the concatenated bytes only: feeding them
//!   in any split gives the same value, whose length is given up front.
//! - Nothing is stored to memory while hashing (the state lives in registers): a key just
//!   joined in a buffer and read back at once is read through stores the processor has not
//!   yet written to its cache, which on x86 holds every later lookup until the earlier
//!   ones' cache misses have resolved, so back-to-back lookups lose their overlap.

use std::hash::BuildHasher;

/// The multiply that mixes each 8-byte word into the state (foldhash's and wyhash's).
#[inline(always)]
fn folded_multiply(x: u64, y: u64) -> u64 {
    let full = (x as u128).wrapping_mul(y as u128);
    (full as u64) ^ ((full >> 64) as u64)
}

/// Up to 8 bytes as a little-endian word, zero-padded above them.
#[inline(always)]
fn load_partial(b: &[u8]) -> u64 {
    let n = b.len();
    debug_assert!(n <= 8);
    if n >= 4 {
        let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u64;
        let hi = u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]) as u64;
        lo | (hi << (8 * (n - 4)))
    } else if n >= 2 {
        let lo = u16::from_le_bytes([b[0], b[1]]) as u64;
        let hi = u16::from_le_bytes([b[n - 2], b[n - 1]]) as u64;
        lo | (hi << (8 * (n - 2)))
    } else if n == 1 {
        b[0] as u64
    } else {
        0
    }
}

#[inline(always)]
fn load_word(b: &[u8]) -> u64 {
    u64::from_le_bytes(b[..8].try_into().expect("8 bytes"))
}

/// The seeds of one map's key hash, drawn at random when the map is made.
#[derive(Clone, Copy)]
pub(crate) struct KeyHasher {
    start: u64,
    multiplier: u64,
}

impl Default for KeyHasher {
    fn default() -> Self {
        let random = foldhash::fast::RandomState::default();
        // Odd, with its top bit set: every word is spread over the whole product.
        let multiplier = random.hash_one(1u8) | (1 << 63) | 1;
        KeyHasher { start: random.hash_one(0u8), multiplier }
    }
}

impl KeyHasher {
    /// The hash of `key`.
    #[inline]
    pub(crate) fn hash(&self, key: &str) -> u64 {
        let mut s = self.stream(key.len());
        s.feed(key.as_bytes());
        s.finish()
    }

    /// The hash of `namespace/name`.
    #[inline]
    pub(crate) fn hash_joined(&self, namespace: &str, name: &str) -> u64 {
        let mut s = self.stream(namespace.len() + 1 + name.len());
        s.feed(namespace.as_bytes());
        s.feed(b"/");
        s.feed(name.as_bytes());
        s.finish()
    }

    #[inline(always)]
    fn stream(&self, len: usize) -> Stream {
        Stream { state: self.start ^ (len as u64), multiplier: self.multiplier, carry: 0, carried: 0 }
    }
}

/// Bytes hashed so far: whole 8-byte words mixed into `state`, the rest (`carried` < 8
/// bytes) held in `carry`.
struct Stream {
    state: u64,
    multiplier: u64,
    carry: u64,
    carried: usize,
}

impl Stream {
    #[inline(always)]
    fn mix(&mut self, word: u64) {
        self.state = folded_multiply(self.state ^ word, self.multiplier);
    }

    #[inline(always)]
    fn feed(&mut self, mut bytes: &[u8]) {
        if self.carried > 0 {
            let take = (8 - self.carried).min(bytes.len());
            self.carry |= load_partial(&bytes[..take]) << (8 * self.carried);
            self.carried += take;
            bytes = &bytes[take..];
            if self.carried < 8 {
                return;
            }
            let word = self.carry;
            self.mix(word);
            self.carry = 0;
            self.carried = 0;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            self.mix(load_word(w));
        }
        let rest = words.remainder();
        self.carry = load_partial(rest);
        self.carried = rest.len();
    }

    #[inline(always)]
    fn finish(mut self) -> u64 {
        if self.carried > 0 {
            let word = self.carry;
            self.mix(word);
        }
        folded_multiply(self.state, self.multiplier ^ 0x243f_6a88_85a3_08d3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_split_of_a_key_hashes_as_the_whole() {
        let h = KeyHasher::default();
        let text = "kube-system/coredns-7db6d8ff4d-x2x9q.with-a-longer-tail";
        for len in 0..=text.len() {
            let key = &text[..len];
            let whole = h.hash(key);
            for cut in 0..=len {
                let mut s = h.stream(len);
                s.feed(&key.as_bytes()[..cut]);
                s.feed(&key.as_bytes()[cut..]);
                assert_eq!(s.finish(), whole, "{key:?} cut at {cut}");
            }
            if let Some((ns, name)) = key.split_once('/') {
                assert_eq!(h.hash_joined(ns, name), whole, "{key:?}");
            }
        }
        assert_eq!(h.hash_joined("", "x"), h.hash("/x"));
    }

    #[test]
    fn bytes_and_lengths_change_the_hash() {
        let h = KeyHasher::default();
        let keys = ["", "\0", "\0\0", "a", "b", "ab", "ba", "default/web", "default/weB", "default/we", "default/web\0", "defaul/tweb"];
        let mut hashes: Vec<u64> = keys.iter().map(|k| h.hash(k)).collect();
        hashes.sort();
        hashes.dedup();
        assert_eq!(hashes.len(), keys.len());
        let mut many: Vec<u64> = (0..100_000).map(|i| h.hash(&format!("ns-{}/pod-{i}", i % 50))).collect();
        many.sort();
        many.dedup();
        assert_eq!(many.len(), 100_000);
    }
}
