//! Cutting text at a byte budget without splitting a character.

/// The largest character boundary of `s` at or below `i` (`i` past the end
/// counts as the end).
pub fn floor_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The smallest character boundary of `s` at or above `i` (at most the
/// end).
pub fn ceil_char_boundary(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Lower-case hex of `bytes`, two digits per byte (digests, tokens).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_never_split_a_character() {
        let s = "aé€b"; // 1 + 2 + 3 + 1 bytes
        let floors: Vec<usize> = (0..=9).map(|i| floor_char_boundary(s, i)).collect();
        assert_eq!(floors, [0, 1, 1, 3, 3, 3, 6, 7, 7, 7]);
        let ceils: Vec<usize> = (0..=9).map(|i| ceil_char_boundary(s, i)).collect();
        assert_eq!(ceils, [0, 1, 3, 3, 6, 6, 6, 7, 7, 7]);
    }

    #[test]
    fn hex_is_two_lower_case_digits_per_byte() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(hex(&[]), "");
    }
}
