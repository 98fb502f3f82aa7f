//! Fields of `/proc/<pid>/mountinfo`.

use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// A path field with mountinfo's octal escapes undone: space, tab, newline
/// and backslash are written as `\ooo`; anything else stays as it is.
pub(crate) fn unescape(field: &[u8]) -> PathBuf {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while let Some(&byte) = field.get(i) {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| byte == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            None => {
                out.push(byte);
                i += 1;
            }
        }
    }
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(br"/a\040b\012c\134d"), PathBuf::from("/a b\nc\\d"));
        assert_eq!(unescape(br"/plain"), PathBuf::from("/plain"));
        assert_eq!(unescape(br"/end\04"), PathBuf::from(r"/end\04"));
        assert_eq!(unescape(br"/a\040b\134c"), PathBuf::from(r"/a b\c"));
        assert_eq!(unescape(br"/plain\0"), PathBuf::from(r"/plain\0"));
    }
}
