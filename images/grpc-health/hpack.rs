//! HPACK (RFC 7541): the decoder for request header blocks (static and dynamic table, integers,
//! plain and Huffman strings) and the few encodings the server's replies need (indexed fields
//! and literals never added to a table, so the client's decoder state stays trivial).

use std::collections::VecDeque;

use super::huffman;

/// RFC 7541 Appendix A, indices 1 to 61.
const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Static table indices the encoder uses.
pub const STATUS_200: usize = 8;
pub const STATUS: usize = 8;
pub const CONTENT_TYPE: usize = 31;

/// The table size the server announces (`SETTINGS_HEADER_TABLE_SIZE`, the default).
pub const TABLE_SIZE: usize = 4096;

/// Why a header block cannot be decoded: a connection error (`COMPRESSION_ERROR`), since the
/// decoder's table no longer matches the client's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HpackError {
    Truncated,
    IntegerTooLarge,
    BadIndex(usize),
    Huffman(huffman::HuffmanError),
    /// A dynamic table size update above the announced size, or after the first field.
    TableSizeUpdate(usize),
}

impl std::fmt::Display for HpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HpackError::Truncated => write!(f, "header block ends inside a field"),
            HpackError::IntegerTooLarge => write!(f, "integer too large"),
            HpackError::BadIndex(i) => write!(f, "no table entry {i}"),
            HpackError::Huffman(e) => write!(f, "bad Huffman string: {e:?}"),
            HpackError::TableSizeUpdate(s) => write!(f, "bad dynamic table size update to {s}"),
        }
    }
}

/// The decoder's state for one connection: the dynamic table, newest entry first.
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder { table: VecDeque::new(), size: 0, max_size: TABLE_SIZE }
    }
}

/// Reads an integer with an `n`-bit prefix (RFC 7541 section 5.1) at `*pos`.
fn integer(block: &[u8], pos: &mut usize, n: u32) -> Result<usize, HpackError> {
    let mask = (1usize << n) - 1;
    let first = *block.get(*pos).ok_or(HpackError::Truncated)?;
    *pos += 1;
    let mut value = usize::from(first) & mask;
    if value < mask {
        return Ok(value);
    }
    let mut shift = 0;
    loop {
        let b = *block.get(*pos).ok_or(HpackError::Truncated)?;
        *pos += 1;
        // Four continuation bytes reach 2^28, far beyond any length or index in a block.
        if shift > 21 {
            return Err(HpackError::IntegerTooLarge);
        }
        value += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
}

/// Reads a string literal (section 5.2) at `*pos`.
fn string(block: &[u8], pos: &mut usize) -> Result<Vec<u8>, HpackError> {
    let huffman_coded = block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = integer(block, pos, 7)?;
    let end = pos.checked_add(len).filter(|&e| e <= block.len()).ok_or(HpackError::Truncated)?;
    let raw = &block[*pos..end];
    *pos = end;
    if huffman_coded {
        let mut out = Vec::with_capacity(len * 8 / 5);
        huffman::decode(raw, &mut out).map_err(HpackError::Huffman)?;
        Ok(out)
    } else {
        Ok(raw.to_vec())
    }
}

fn entry_size(name: &[u8], value: &[u8]) -> usize {
    name.len() + value.len() + 32
}

impl Decoder {
    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::BadIndex(0)),
            1..=61 => {
                let (n, v) = STATIC_TABLE[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(index - 62)
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .ok_or(HpackError::BadIndex(index)),
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= entry_size(&n, &v),
                None => self.size = 0,
            }
        }
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = entry_size(&name, &value);
        if size > self.max_size {
            // Section 4.4: an entry larger than the table empties it and is not added.
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max_size - size);
        self.size += size;
        self.table.push_front((name, value));
    }

    /// Decodes one complete header block, calling `field` with each name and value in order.
    /// An error leaves the decoder unusable for this connection.
    pub fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut pos = 0;
        let mut fields_seen = false;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                // Indexed field.
                let index = integer(block, &mut pos, 7)?;
                let (n, v) = self.entry(index)?;
                field(n, v);
            } else if b & 0xc0 == 0x40 {
                // Literal with incremental indexing.
                let index = integer(block, &mut pos, 6)?;
                let name = if index == 0 {
                    string(block, &mut pos)?
                } else {
                    self.entry(index)?.0.to_vec()
                };
                let value = string(block, &mut pos)?;
                field(&name, &value);
                self.insert(name, value);
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update: only before the first field (section 4.2).
                let size = integer(block, &mut pos, 5)?;
                if fields_seen || size > TABLE_SIZE {
                    return Err(HpackError::TableSizeUpdate(size));
                }
                self.max_size = size;
                self.evict_to(size);
                continue;
            } else {
                // Literal without indexing (0000) or never indexed (0001).
                let index = integer(block, &mut pos, 4)?;
                let name = if index == 0 {
                    std::borrow::Cow::Owned(string(block, &mut pos)?)
                } else {
                    std::borrow::Cow::Borrowed(self.entry(index)?.0)
                };
                let value = string(block, &mut pos)?;
                field(&name, &value);
            }
            fields_seen = true;
        }
        Ok(())
    }

    /// The dynamic table's entries, newest first, and its size (for tests).
    #[cfg(test)]
    fn entries(&self) -> (Vec<(String, String)>, usize) {
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (self.table.iter().map(|(n, v)| (text(n), text(v))).collect(), self.size)
    }
}

/// Appends an integer with an `n`-bit prefix; `flags` fills the bits above the prefix.
fn put_integer(out: &mut Vec<u8>, flags: u8, n: u32, value: usize) {
    let mask = (1usize << n) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push((rest & 0x7f) as u8 | 0x80);
        rest >>= 7;
    }
    out.push(rest as u8);
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    put_integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Appends a static table field by index.
pub fn put_indexed(out: &mut Vec<u8>, index: usize) {
    put_integer(out, 0x80, 7, index);
}

/// Appends a literal without indexing whose name is static table entry `name_index`.
pub fn put_literal_indexed_name(out: &mut Vec<u8>, name_index: usize, value: &[u8]) {
    put_integer(out, 0, 4, name_index);
    put_string(out, value);
}

/// Appends a literal without indexing with a literal name.
pub fn put_literal(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.push(0);
    put_string(out, name);
    put_string(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
            .collect()
    }

    fn fields(d: &mut Decoder, block: &str) -> Result<Vec<(String, String)>, HpackError> {
        let mut got = Vec::new();
        d.decode(&hex(block), |n, v| {
            got.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })?;
        Ok(got)
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(n, v)| ((*n).to_string(), (*v).to_string())).collect()
    }

    /// RFC 7541 C.3 (plain) and C.4 (Huffman): three requests on one connection.
    #[test]
    fn requests_share_the_dynamic_table() {
        let blocks = [
            (
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            ),
            ("8286 84be 5808 6e6f 2d63 6163 6865", "8286 84be 5886 a8eb 1064 9cbf"),
            (
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ),
        ];
        let base = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ];
        let want = [
            pairs(&base),
            pairs(&[base[0], base[1], base[2], base[3], ("cache-control", "no-cache")]),
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ]),
        ];
        let tables = [
            (pairs(&[(":authority", "www.example.com")]), 57),
            (pairs(&[("cache-control", "no-cache"), (":authority", "www.example.com")]), 110),
            (
                pairs(&[
                    ("custom-key", "custom-value"),
                    ("cache-control", "no-cache"),
                    (":authority", "www.example.com"),
                ]),
                164,
            ),
        ];
        for huffman in [false, true] {
            let mut d = Decoder::default();
            for (i, (plain, coded)) in blocks.iter().enumerate() {
                assert_eq!(fields(&mut d, if huffman { coded } else { plain }).unwrap(), want[i]);
                assert_eq!(d.entries(), tables[i], "huffman {huffman}, request {i}");
            }
        }
    }

    /// RFC 7541 C.5 (plain) and C.6 (Huffman): three responses with a 256-byte table, so
    /// entries are evicted.
    #[test]
    fn a_small_table_evicts_the_oldest_entries() {
        let blocks = [
            (
                "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            ),
            ("4803 3330 37c1 c0bf", "4883 640e ffc1 c0bf"),
            (
                "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
                "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ),
        ];
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
        let loc = "https://www.example.com";
        let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let want = [
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", date1),
                ("location", loc),
            ]),
            pairs(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", date1),
                ("location", loc),
            ]),
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", date2),
                ("location", loc),
                ("content-encoding", "gzip"),
                ("set-cookie", cookie),
            ]),
        ];
        let tables = [
            (
                pairs(&[
                    ("location", loc),
                    ("date", date1),
                    ("cache-control", "private"),
                    (":status", "302"),
                ]),
                222,
            ),
            (
                pairs(&[
                    (":status", "307"),
                    ("location", loc),
                    ("date", date1),
                    ("cache-control", "private"),
                ]),
                222,
            ),
            (pairs(&[("set-cookie", cookie), ("content-encoding", "gzip"), ("date", date2)]), 215),
        ];
        for huffman in [false, true] {
            let mut d = Decoder::default();
            // The size update a client would send after SETTINGS_HEADER_TABLE_SIZE = 256.
            d.decode(&[0x3f, 0xe1, 0x01], |_, _| {}).unwrap();
            for (i, (plain, coded)) in blocks.iter().enumerate() {
                assert_eq!(fields(&mut d, if huffman { coded } else { plain }).unwrap(), want[i]);
                assert_eq!(d.entries(), tables[i], "huffman {huffman}, response {i}");
            }
        }
    }

    #[test]
    fn never_indexed_and_without_indexing_literals_leave_the_table_alone() {
        let mut d = Decoder::default();
        // RFC 7541 C.2.2 and C.2.3.
        assert_eq!(
            fields(&mut d, "040c 2f73 616d 706c 652f 7061 7468").unwrap(),
            pairs(&[(":path", "/sample/path")])
        );
        assert_eq!(
            fields(&mut d, "1008 7061 7373 776f 7264 0673 6563 7265 74").unwrap(),
            pairs(&[("password", "secret")])
        );
        assert_eq!(d.entries(), (vec![], 0));
    }

    #[test]
    fn bad_blocks_are_errors() {
        let mut d = Decoder::default();
        assert_eq!(fields(&mut d, "80"), Err(HpackError::BadIndex(0)));
        assert_eq!(fields(&mut d, "be"), Err(HpackError::BadIndex(62)));
        assert_eq!(fields(&mut d, "0f"), Err(HpackError::Truncated));
        assert_eq!(fields(&mut d, "400a 6375"), Err(HpackError::Truncated));
        assert_eq!(fields(&mut d, "ff ff ff ff ff ff 01"), Err(HpackError::IntegerTooLarge));
        assert_eq!(fields(&mut d, "3fe2 1f"), Err(HpackError::TableSizeUpdate(4097)));
        assert_eq!(fields(&mut d, "82 20"), Err(HpackError::TableSizeUpdate(0)));
        assert!(matches!(fields(&mut d, "0081 00 00"), Err(HpackError::Huffman(_))));
    }

    #[test]
    fn an_entry_larger_than_the_table_empties_it() {
        let mut d = Decoder::default();
        fields(&mut d, "4003 6162 6301 78").unwrap(); // abc: x
        let mut block = vec![0x40, 0x01, b'n', 0x7f];
        put_integer_for_test(&mut block, 4100 - 0x7f);
        block.extend(std::iter::repeat_n(b'v', 4100));
        d.decode(&block, |_, _| {}).unwrap();
        assert_eq!(d.entries(), (vec![], 0));
    }

    fn put_integer_for_test(out: &mut Vec<u8>, mut rest: usize) {
        while rest >= 0x80 {
            out.push((rest & 0x7f) as u8 | 0x80);
            rest >>= 7;
        }
        out.push(rest as u8);
    }

    #[test]
    fn the_encodings_decode_back() {
        let mut block = Vec::new();
        put_indexed(&mut block, STATUS_200);
        put_literal_indexed_name(&mut block, CONTENT_TYPE, b"application/grpc");
        put_literal(&mut block, b"grpc-message", &[b'x'; 300]);
        let mut got = Vec::new();
        Decoder::default().decode(&block, |n, v| got.push((n.to_vec(), v.to_vec()))).unwrap();
        assert_eq!(got[0], (b":status".to_vec(), b"200".to_vec()));
        assert_eq!(got[1], (b"content-type".to_vec(), b"application/grpc".to_vec()));
        assert_eq!(got[2], (b"grpc-message".to_vec(), vec![b'x'; 300]));
    }

    #[test]
    fn random_blocks_never_panic() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut d = Decoder::default();
        for _ in 0..5000 {
            let mut block = Vec::new();
            for _ in 0..(x % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                block.push(x as u8);
            }
            if d.decode(&block, |_, _| {}).is_err() {
                d = Decoder::default();
            }
            assert!(d.size <= d.max_size);
        }
    }
}
