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
}
