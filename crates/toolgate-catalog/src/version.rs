//! Exact versions, per source kind.
//!
//! A pin means one artefact: a range (`^1.2`, `>=1`, `1.x`), a tag
//! (`latest`, `next`) or a wildcard resolves to whatever the registry
//! serves on the day of the install, which is not what a person reviewed.
//! Each check names what it expected, so a refusal tells how to fix it.

/// Why a version is not exact, as "expected ..." text.
pub(crate) fn check_exact(kind: crate::SourceKind, version: &str) -> Result<(), String> {
    use crate::SourceKind::*;
    if version.trim() != version || version.is_empty() {
        return Err("an exact version without spaces (for example 1.2.3)".to_owned());
    }
    let ok = match kind {
        Npm | Cargo => is_semver(version),
        Pypi => is_pep440_exact(version),
        Apt => is_debian_version(version),
        BinaryPath => true,
    };
    if ok {
        return Ok(());
    }
    Err(match kind {
        Npm => "an exact npm version (MAJOR.MINOR.PATCH with an optional -prerelease or +build, for example 1.6.0); ranges, tags such as `latest` and `*` are refused",
        Cargo => "an exact crate version (MAJOR.MINOR.PATCH, for example 14.1.0); ranges and `*` are refused",
        Pypi => "an exact PyPI version as PEP 440 writes it (for example 6.1 or 2.0.0rc1); specifiers such as `>=`, `~=`, `==` and wildcards are refused",
        Apt => "an exact Debian version ([epoch:]upstream[-revision], for example 1.6-2.1 or 1:9.2.1-1); `*` and ranges are refused",
        BinaryPath => "",
    }
    .to_owned())
}

fn numeric(part: &str) -> bool {
    !part.is_empty()
        && part.bytes().all(|b| b.is_ascii_digit())
        && (part == "0" || !part.starts_with('0'))
}

fn identifiers(s: &str) -> bool {
    s.split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

/// SemVer 2.0: `1.2.3`, `1.2.3-rc.1`, `1.2.3+build.5`.
pub(crate) fn is_semver(v: &str) -> bool {
    let (rest, build) = match v.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (v, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| numeric(p))
        && pre.is_none_or(identifiers)
        && build.is_none_or(identifiers)
}

/// A PEP 440 public version, written out (no specifier, no wildcard, no
/// local label): `[N!]N(.N)*[{a|b|rc}N][.postN][.devN]`.
pub(crate) fn is_pep440_exact(v: &str) -> bool {
    let mut s = v;
    if let Some((epoch, rest)) = s.split_once('!') {
        if !epoch.bytes().all(|b| b.is_ascii_digit()) || epoch.is_empty() {
            return false;
        }
        s = rest;
    }
    let mut release_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    // `2.0.post3`: the dot before a label belongs to the label.
    if release_end < s.len() && s[..release_end].ends_with('.') {
        release_end -= 1;
    }
    let (release, mut tail) = s.split_at(release_end);
    if release.is_empty()
        || release.starts_with('.')
        || release.ends_with('.')
        || release.contains("..")
    {
        return false;
    }
    for label in ["a", "b", "rc"] {
        if let Some(rest) = tail.strip_prefix(label) {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return false;
            }
            tail = &rest[digits..];
            break;
        }
    }
    for label in [".post", ".dev"] {
        if let Some(rest) = tail.strip_prefix(label) {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                return false;
            }
            tail = &rest[digits..];
        }
    }
    tail.is_empty()
}

/// Debian's `[epoch:]upstream_version[-debian_revision]` (deb-version(7)).
pub(crate) fn is_debian_version(v: &str) -> bool {
    let (epoch, rest) = match v.split_once(':') {
        Some((epoch, rest)) => (Some(epoch), rest),
        None => (None, v),
    };
    if epoch.is_some_and(|e| e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((upstream, revision)) => (upstream, Some(revision)),
        None => (rest, None),
    };
    let upstream_ok = upstream.starts_with(|c: char| c.is_ascii_digit())
        && upstream.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'.' | b'+' | b'~')
                || (b == b'-' && revision.is_some())
                || (b == b':' && epoch.is_some())
        });
    let revision_ok = revision.is_none_or(|r| {
        !r.is_empty()
            && r.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'~'))
    });
    upstream_ok && revision_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SourceKind;

    #[test]
    fn exact_versions_pass_and_everything_that_floats_is_refused() {
        let cases: &[(SourceKind, &str, bool)] = &[
            (SourceKind::Npm, "1.6.0", true),
            (SourceKind::Npm, "2.0.0-rc.1+build.7", true),
            (SourceKind::Npm, "latest", false),
            (SourceKind::Npm, "^1.6.0", false),
            (SourceKind::Npm, "~1.6.0", false),
            (SourceKind::Npm, "1.x", false),
            (SourceKind::Npm, "*", false),
            (SourceKind::Npm, ">=1.0.0 <2", false),
            (SourceKind::Npm, "1.6", false),
            (SourceKind::Npm, "01.6.0", false),
            (SourceKind::Npm, "1.6.0 ", false),
            (SourceKind::Npm, "1.0.0 || 2.0.0", false),
            (SourceKind::Cargo, "14.1.0", true),
            (SourceKind::Cargo, "=14.1.0", false),
            (SourceKind::Pypi, "6.1", true),
            (SourceKind::Pypi, "2.0.0rc1", true),
            (SourceKind::Pypi, "1!2.0.post3.dev1", true),
            (SourceKind::Pypi, "==6.1", false),
            (SourceKind::Pypi, ">=6", false),
            (SourceKind::Pypi, "6.*", false),
            (SourceKind::Pypi, "~=6.1", false),
            (SourceKind::Pypi, "6.1+local", false),
            (SourceKind::Pypi, "latest", false),
            (SourceKind::Apt, "1.6-2.1", true),
            (SourceKind::Apt, "1:9.2.1-1", true),
            (SourceKind::Apt, "2.36-9+deb12u14", true),
            (SourceKind::Apt, "1.0~rc1-2", true),
            (SourceKind::Apt, "*", false),
            (SourceKind::Apt, ">= 1.6", false),
            (SourceKind::Apt, "latest", false),
            (SourceKind::Apt, "1.6-", false),
            (SourceKind::Apt, ":1.6", false),
        ];
        for (kind, version, ok) in cases {
            assert_eq!(
                check_exact(*kind, version).is_ok(),
                *ok,
                "{kind:?} {version:?}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn any_semver_triple_is_exact(a in 0u32..1000, b in 0u32..1000, c in 0u32..1000) {
            let v = format!("{a}.{b}.{c}");
            proptest::prop_assert!(is_semver(&v));
            proptest::prop_assert!(is_pep440_exact(&v));
            proptest::prop_assert!(is_debian_version(&v));
            for range in ["^", "~", ">=", "<", "="] {
                let ranged = format!("{range}{v}");
                proptest::prop_assert!(!is_semver(&ranged));
                proptest::prop_assert!(!is_pep440_exact(&ranged));
                proptest::prop_assert!(!is_debian_version(&ranged));
            }
        }
    }
}
