//! HPACK's static Huffman code (RFC 7541, Appendix B), decoding only.
//!
//! The code is canonical: codes of one length are consecutive numbers, assigned in symbol order,
//! and each length starts where the shorter ones left off (shifted left). So the code lengths
//! alone define it; the tables below are derived from them at compile time.

/// Code length in bits of each symbol: bytes 0–255, then EOS (256).
const LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, // 0
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28, // 16
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, // 32
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, // 48
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, // 64
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, // 80
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, // 96
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, // 112
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, // 128
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, // 144
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, // 160
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, // 176
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, // 192
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, // 208
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, // 224
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, // 240
    30, // EOS
];

const EOS: u16 = 256;
const MAX_LEN: usize = 30;

/// The canonical code, by length: the first code of each length, how many codes have it, and
/// the symbols in code order.
struct Code {
    first: [u32; MAX_LEN + 1],
    count: [u32; MAX_LEN + 1],
    start: [usize; MAX_LEN + 1],
    symbols: [u16; 257],
}

const CODE: Code = build();

const fn build() -> Code {
    let mut count = [0u32; MAX_LEN + 1];
    let mut s = 0;
    while s < LENGTHS.len() {
        count[LENGTHS[s] as usize] += 1;
        s += 1;
    }
    let mut first = [0u32; MAX_LEN + 1];
    let mut start = [0usize; MAX_LEN + 1];
    let mut len = 1;
    while len <= MAX_LEN {
        first[len] = (first[len - 1] + count[len - 1]) << 1;
        start[len] = start[len - 1] + count[len - 1] as usize;
        len += 1;
    }
    // Symbols sorted by (length, symbol): a counting sort over the lengths.
    let mut symbols = [0u16; 257];
    let mut next = start;
    let mut s = 0;
    while s < LENGTHS.len() {
        let l = LENGTHS[s] as usize;
        symbols[next[l]] = s as u16;
        next[l] += 1;
        s += 1;
    }
    Code { first, count, start, symbols }
}

/// Why a Huffman-coded string is invalid (RFC 7541, section 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HuffmanError {
    /// The string contains the EOS symbol.
    Eos,
    /// The padding is longer than 7 bits or is not a prefix of EOS (all ones).
    Padding,
}

/// Decodes `input`, appending the bytes to `out`. The output is at most `input.len() * 8 / 5`
/// bytes long (the shortest code has 5 bits).
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    let mut code: u32 = 0;
    let mut len: usize = 0;
    for &byte in input {
        for shift in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> shift) & 1);
            len += 1;
            // Every prefix of a longer code is at or above `first[len] + count[len]`, so one
            // comparison per bit finds the end of a code.
            let offset = code.wrapping_sub(CODE.first[len]);
            if offset < CODE.count[len] {
                let symbol = CODE.symbols[CODE.start[len] + offset as usize];
                if symbol == EOS {
                    return Err(HuffmanError::Eos);
                }
                out.push(symbol as u8);
                code = 0;
                len = 0;
            } else if len == MAX_LEN {
                // Unreachable with a complete code (EOS, all ones, is the longest); kept so a
                // table mistake can never index out of bounds.
                return Err(HuffmanError::Eos);
            }
        }
    }
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HuffmanError::Padding);
    }
    Ok(())
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

    fn decoded(s: &str) -> Result<String, HuffmanError> {
        let mut out = Vec::new();
        decode(&hex(s), &mut out)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn the_code_is_complete_and_ends_with_eos_all_ones() {
        // Kraft sum of exactly 1: no code is missing and none overlaps.
        let kraft: u64 = LENGTHS.iter().map(|&l| 1u64 << (MAX_LEN - usize::from(l))).sum();
        assert_eq!(kraft, 1 << MAX_LEN);
        // RFC 7541 Appendix B: '0' is 00000, 'a' is 00011, byte 0 is 1ff8 (13 bits), EOS is
        // 3fffffff (30 bits), the last one assigned.
        let code_of = |sym: u16| {
            let l = usize::from(LENGTHS[usize::from(sym)]);
            let rank = CODE.symbols[CODE.start[l]..].iter().position(|&s| s == sym).unwrap();
            (CODE.first[l] + rank as u32, l)
        };
        assert_eq!(code_of(u16::from(b'0')), (0, 5));
        assert_eq!(code_of(u16::from(b'a')), (0x3, 5));
        assert_eq!(code_of(0), (0x1ff8, 13));
        assert_eq!(code_of(255), (0x3ff_ffee, 26));
        assert_eq!(code_of(EOS), (0x3fff_ffff, 30));
    }

    #[test]
    fn decodes_the_rfc_examples() {
        // RFC 7541 C.4.1, C.4.2, C.4.3, C.6.1.
        assert_eq!(decoded("f1e3 c2e5 f23a 6ba0 ab90 f4ff").unwrap(), "www.example.com");
        assert_eq!(decoded("a8eb 1064 9cbf").unwrap(), "no-cache");
        assert_eq!(decoded("25a8 49e9 5ba9 7d7f").unwrap(), "custom-key");
        assert_eq!(decoded("25a8 49e9 5bb8 e8b4 bf").unwrap(), "custom-value");
        assert_eq!(decoded("6402").unwrap(), "302");
        assert_eq!(decoded("aec3 771a 4b").unwrap(), "private");
        assert_eq!(
            decoded("d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff").unwrap(),
            "Mon, 21 Oct 2013 20:13:21 GMT"
        );
        assert_eq!(decoded("").unwrap(), "");
    }

    #[test]
    fn rejects_bad_padding_and_eos() {
        // '0' (00000) padded with zeros instead of ones.
        assert_eq!(decoded("00"), Err(HuffmanError::Padding));
        // A whole byte of ones is more than 7 bits of padding.
        assert_eq!(decoded("ff"), Err(HuffmanError::Padding));
        // EOS (30 ones) followed by two bits of padding.
        assert_eq!(decoded("ffff ffff"), Err(HuffmanError::Eos));
    }

    #[test]
    fn any_input_decodes_or_errors_without_panicking() {
        let mut x: u32 = 0x9e37_79b9;
        for _ in 0..2000 {
            let mut input = Vec::new();
            for _ in 0..(x % 24) {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                input.push(x as u8);
            }
            let mut out = Vec::new();
            if decode(&input, &mut out).is_ok() {
                assert!(out.len() <= input.len() * 8 / 5);
            }
        }
    }
}
