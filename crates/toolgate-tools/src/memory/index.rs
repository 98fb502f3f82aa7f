//! Memory files as sections (split at Markdown headings) and BM25 ranking of
//! sections against a query. Pure functions; no I/O.

use std::collections::{BTreeMap, BTreeSet};

/// BM25 term-frequency saturation.
pub(crate) const K1: f64 = 1.2;
/// BM25 length normalisation.
pub(crate) const B: f64 = 0.75;

/// Words too common to say anything about relevance.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "do", "does", "for", "from",
    "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "of", "on", "or", "so",
    "that", "the", "their", "then", "there", "these", "this", "to", "was", "we", "were", "what",
    "when", "where", "which", "who", "why", "will", "with", "you",
];

/// A run of lines of one file: the lines before the first heading, or a
/// heading and the lines up to the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Section {
    /// The heading's text without the `#`s; `None` before the first heading.
    pub heading: Option<String>,
    /// First line (the heading's), counting from 1.
    pub first: usize,
    /// Last line, inclusive.
    pub last: usize,
}

/// The sections of `text`. Leading blank-only text makes no section; a file
/// without headings is one section. Headings inside fenced code blocks
/// (``` or ~~~) do not split.
pub(crate) fn sections(text: &str) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut fence: Option<char> = None;
    let mut preamble_has_text = false;
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        count = n;
        let trimmed = line.trim_start();
        let marker = trimmed.chars().next().filter(|c| *c == '`' || *c == '~');
        if let Some(c) = marker
            && trimmed.starts_with(&c.to_string().repeat(3))
        {
            fence = match fence {
                None => Some(c),
                Some(open) if open == c => None,
                other => other,
            };
        }
        let heading = if fence.is_none() && marker.is_none() {
            heading_text(line)
        } else {
            None
        };
        if let Some(heading) = heading {
            if let Some(last) = out.last_mut() {
                last.last = n - 1;
            } else if preamble_has_text {
                out.push(Section {
                    heading: None,
                    first: 1,
                    last: n - 1,
                });
            }
            out.push(Section {
                heading: Some(heading),
                first: n,
                last: n,
            });
        } else if out.is_empty() && !line.trim().is_empty() {
            preamble_has_text = true;
        }
    }
    match out.last_mut() {
        Some(last) => last.last = count,
        None if preamble_has_text => out.push(Section {
            heading: None,
            first: 1,
            last: count,
        }),
        None => {}
    }
    out
}

/// The text of an ATX heading line (`## Deploy ##` -> `Deploy`), if it is one.
pub(crate) fn heading_text(line: &str) -> Option<String> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let level = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &rest[level..];
    if !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
        return None;
    }
    let rest = rest.trim();
    // A closing run of `#`s counts only after a space (`# C#` keeps its `#`).
    let without_closing = rest.trim_end_matches('#');
    let text = if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        rest
    };
    Some(text.to_owned())
}

/// Lower-case alphanumeric words of `text`, stopwords left out.
pub(crate) fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect()
}

/// BM25 scores of documents against a query.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ranking {
    /// One score per document, in the order given.
    pub scores: Vec<f64>,
    /// The inverse document frequency of each distinct query term.
    pub idf: BTreeMap<String, f64>,
}

/// Scores every document (a list of tokens) against the query's distinct
/// terms with Okapi BM25 (k1 = 1.2, b = 0.75) and the non-negative idf
/// `ln(1 + (N - df + 0.5) / (df + 0.5))`.
pub(crate) fn rank(docs: &[Vec<String>], query: &[String]) -> Ranking {
    let terms: BTreeSet<&str> = query.iter().map(String::as_str).collect();
    let n = docs.len() as f64;
    let total: usize = docs.iter().map(Vec::len).sum();
    let avgdl = if docs.is_empty() || total == 0 {
        1.0
    } else {
        total as f64 / n
    };
    let idf: BTreeMap<String, f64> = terms
        .iter()
        .map(|term| {
            let df = docs.iter().filter(|d| d.iter().any(|t| t == term)).count() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            ((*term).to_owned(), idf)
        })
        .collect();
    let scores = docs
        .iter()
        .map(|doc| {
            let norm = K1 * (1.0 - B + B * doc.len() as f64 / avgdl);
            idf.iter()
                .map(|(term, idf)| {
                    let tf = doc.iter().filter(|t| *t == term).count() as f64;
                    idf * tf * (K1 + 1.0) / (tf + norm)
                })
                .sum()
        })
        .collect();
    Ranking { scores, idf }
}

/// The (at most `max`) lines of `lines` that match the query best: the sum
/// of the idf of the distinct query terms each holds, ties to the earlier
/// line; returned in file order as (line number, text). `first` is the line
/// number of `lines[0]`.
pub(crate) fn best_lines<'a>(
    lines: &[&'a str],
    first: usize,
    idf: &BTreeMap<String, f64>,
    max: usize,
) -> Vec<(usize, &'a str)> {
    let mut scored: Vec<(f64, usize)> = lines
        .iter()
        .enumerate()
        .filter_map(|(i, line)| {
            let words: BTreeSet<String> = tokens(line).into_iter().collect();
            let score: f64 = words.iter().filter_map(|w| idf.get(w)).sum();
            (score > 0.0).then_some((score, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut picked: Vec<usize> = scored.into_iter().take(max).map(|(_, i)| i).collect();
    picked.sort_unstable();
    picked.into_iter().map(|i| (first + i, lines[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn section(heading: Option<&str>, first: usize, last: usize) -> Section {
        Section {
            heading: heading.map(str::to_owned),
            first,
            last,
        }
    }

    #[test]
    fn files_split_at_headings() {
        let cases: &[(&str, Vec<Section>)] = &[
            ("", vec![]),
            ("\n\n", vec![]),
            ("just text\nmore\n", vec![section(None, 1, 2)]),
            (
                "# A\none\n## B\ntwo\nthree\n",
                vec![section(Some("A"), 1, 2), section(Some("B"), 3, 5)],
            ),
            (
                "intro\n\n# A\nx",
                vec![section(None, 1, 2), section(Some("A"), 3, 4)],
            ),
            ("\n\n# A\nx", vec![section(Some("A"), 3, 4)]),
            (
                "# A\n```\n# not a heading\n```\n#nospace\n####### seven\n",
                vec![section(Some("A"), 1, 6)],
            ),
            (
                "## Closed ##\n    # indented code\n   # B\n",
                vec![section(Some("Closed"), 1, 2), section(Some("B"), 3, 3)],
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(&sections(text), expected, "{text:?}");
        }
    }

    #[test]
    fn headings_keep_their_text() {
        assert_eq!(heading_text("# C#"), Some("C#".to_owned()));
        assert_eq!(
            heading_text("### Deploy notes ###"),
            Some("Deploy notes".to_owned())
        );
        assert_eq!(heading_text("#"), Some(String::new()));
        assert_eq!(heading_text("#tag"), None);
    }

    #[test]
    fn tokens_are_lowercase_words_without_stopwords() {
        assert_eq!(
            tokens("The API-key is in Vault_2, NOT env!"),
            vec!["api", "key", "vault", "2", "not", "env"]
        );
    }

    #[test]
    fn bm25_matches_a_hand_computation() {
        let docs = vec![
            tokens("rust rust cargo"),
            tokens("python pip"),
            tokens("rust"),
        ];
        let ranking = rank(&docs, &tokens("rust"));
        // N = 3, df = 2: idf = ln(1 + 1.5 / 2.5); avgdl = 6 / 3 = 2.
        let idf = (1.0f64 + 1.5 / 2.5).ln();
        let score = |tf: f64, dl: f64| idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * dl / 2.0));
        let expected = [score(2.0, 3.0), 0.0, score(1.0, 1.0)];
        for (got, want) in ranking.scores.iter().zip(expected) {
            assert!((got - want).abs() < 1e-12, "{got} != {want}");
        }
        // Length normalisation: one `rust` in a 1-word section beats two in 3 words.
        assert!(ranking.scores[2] > ranking.scores[0]);
    }

    #[test]
    fn best_lines_prefer_rare_terms_and_keep_file_order() {
        let idf = BTreeMap::from([("deploy".to_owned(), 0.5), ("staging".to_owned(), 2.0)]);
        let lines = ["deploy", "nothing", "staging here", "deploy to staging"];
        assert_eq!(
            best_lines(&lines, 10, &idf, 2),
            vec![(12, "staging here"), (13, "deploy to staging")]
        );
    }
}
