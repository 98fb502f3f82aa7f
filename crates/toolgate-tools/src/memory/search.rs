//! `memory_search`: the sections of the memory files that match a query
//! best, ranked with BM25.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{CallContext, EffectClass, ToolError, ToolOutput, ToolSpec, TypedTool};

use super::index::{self, Section};
use super::{MEMORY_GROUP, MemoryStore, numbered};
use crate::facts_schema;
use crate::fs::blocking;
use crate::text;

/// Hits shown when the call gives no limit.
const DEFAULT_LIMIT: usize = 5;
/// Lines of a section shown per hit.
const SNIPPET_LINES: usize = 3;
/// Characters of one snippet line.
const SNIPPET_LINE_CHARS: usize = 200;

/// Arguments of `memory_search`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemorySearchArgs {
    /// Words to look for (ranked by relevance, not matched as a phrase).
    pub query: String,
    /// How many sections to return (default 5).
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u32>,
    /// Search only this memory file (a plain name like NOTES.md).
    pub file: Option<String>,
}

/// The `memory_search` tool.
pub struct MemorySearchTool {
    store: Arc<MemoryStore>,
}

impl MemorySearchTool {
    pub(crate) fn new(store: Arc<MemoryStore>) -> MemorySearchTool {
        MemorySearchTool { store }
    }
}

#[async_trait]
impl TypedTool for MemorySearchTool {
    type Args = MemorySearchArgs;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "memory_search",
            "Search what earlier sessions saved in memory: ranks the sections (split at \
             Markdown headings) of all memory files by relevance to the query words (BM25) \
             and returns the best ones with file, heading, line range, score and the \
             best-matching lines. Use it at the start of a task and before saving a fact \
             (to avoid duplicates). It searches memory only: use grep or find for the \
             workspace's files, and memory_read to see a whole memory file.",
            EffectClass::Read,
        )
        .group(MEMORY_GROUP)
        .parallel_safe(true)
        .output_schema(facts_schema())
    }

    /// The memory file (or directory) is a path like any other to the
    /// path layer: `[paths] deny` rules apply to it too.
    fn embedded_paths(&self, args: &serde_json::Value) -> Result<Vec<String>, String> {
        Ok(self.store.embedded_paths(args, true))
    }

    async fn run(
        &self,
        args: MemorySearchArgs,
        _ctx: &CallContext,
    ) -> Result<ToolOutput, ToolError> {
        let query = index::tokens(&args.query);
        if query.is_empty() {
            return Err(ToolError::InvalidArguments(format!(
                "the query {:?} has no words to search for (only punctuation or very common \
                 words); give a few distinctive words",
                args.query
            )));
        }
        let name = args
            .file
            .as_deref()
            .map(|file| self.store.name(Some(file)))
            .transpose()?;
        let store = self.store.clone();
        blocking(move || search(&store, &args, name.as_deref(), &query)).await
    }
}

/// One memory file's text, split into sections.
struct Corpus {
    name: String,
    lines: Vec<String>,
    sections: Vec<Section>,
}

impl Corpus {
    /// The lines of `section`.
    fn lines_of(&self, section: &Section) -> Vec<&str> {
        self.lines[section.first - 1..section.last]
            .iter()
            .map(String::as_str)
            .collect()
    }
}

/// A memory file that could not be searched, and why.
struct Skipped {
    file: String,
    reason: String,
}

/// One ranked section.
struct Hit<'a> {
    file: &'a Corpus,
    section: &'a Section,
    score: f64,
}

fn search(
    store: &MemoryStore,
    args: &MemorySearchArgs,
    only: Option<&str>,
    query: &[String],
) -> Result<ToolOutput, ToolError> {
    let (corpus, skipped) = load(store, only)?;
    let sections: Vec<(&Corpus, &Section)> = corpus
        .iter()
        .flat_map(|c| c.sections.iter().map(move |s| (c, s)))
        .collect();
    let docs: Vec<Vec<String>> = sections
        .iter()
        .map(|(c, s)| index::tokens(&c.lines_of(s).join("\n")))
        .collect();
    let ranking = index::rank(&docs, query);
    let mut hits: Vec<Hit<'_>> = sections
        .iter()
        .zip(&ranking.scores)
        .filter(|(_, score)| **score > 0.0)
        .map(|((file, section), score)| Hit {
            file,
            section,
            score: *score,
        })
        .collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.file.name.cmp(&b.file.name))
            .then(a.section.first.cmp(&b.section.first))
    });
    let limit = args.limit.map_or(DEFAULT_LIMIT, |l| l.max(1) as usize);
    let total_hits = hits.len();
    hits.truncate(limit);

    let (out, facts) = render(&hits, &ranking.idf);
    let summary = format!(
        "{} of {total_hits} matching section(s) for {:?} ({} section(s) in {} memory file(s) \
         searched).",
        hits.len(),
        args.query,
        sections.len(),
        corpus.len()
    );
    let text = if hits.is_empty() {
        format!(
            "No memory matches {:?} ({} section(s) in {} memory file(s) searched).\n",
            args.query,
            sections.len(),
            corpus.len()
        )
    } else {
        format!("{summary}\n{out}")
    };
    let text = skipped.iter().fold(text, |mut text, s| {
        text.push_str(&format!("[skipped {}: {}]\n", s.file, s.reason));
        text
    });
    let skipped: Vec<Value> = skipped
        .iter()
        .map(|s| json!({"file": s.file, "reason": s.reason}))
        .collect();
    Ok(ToolOutput::text(text).with_structured(json!({
        "query": args.query, "hits": facts, "total_hits": total_hits,
        "sections_searched": sections.len(), "files_searched": corpus.len(),
        "skipped": skipped,
    })))
}

/// The hits as text for the model and as JSON facts.
fn render(hits: &[Hit<'_>], idf: &BTreeMap<String, f64>) -> (String, Vec<Value>) {
    let mut out = String::new();
    let mut facts = Vec::new();
    for hit in hits {
        let lines = hit.file.lines_of(hit.section);
        let snippet = index::best_lines(&lines, hit.section.first, idf, SNIPPET_LINES);
        let heading = hit.section.heading.as_deref();
        out.push_str(&format!(
            "{}:{}-{} {} (score {:.3})\n",
            hit.file.name,
            hit.section.first,
            hit.section.last,
            heading.map_or("(before the first heading)".to_owned(), |h| format!(
                "# {h}"
            )),
            hit.score
        ));
        let mut shown = Vec::new();
        for (n, line) in snippet {
            let line = text::cut_line(line, SNIPPET_LINE_CHARS);
            out.push_str(&numbered(n, &line));
            shown.push(json!({"line": n, "text": line}));
        }
        facts.push(json!({
            "file": hit.file.name, "heading": heading,
            "line_start": hit.section.first, "line_end": hit.section.last,
            "score": (hit.score * 10_000.0).round() / 10_000.0, "snippet": shown,
        }));
    }
    (out, facts)
}

/// The facts of [`search`], with the hits of [`render`].
fn facts_schema() -> Value {
    let snippet_line = facts_schema::object(
        json!({"line": {"type": "integer"}, "text": {"type": "string"}}),
        &["line", "text"],
    );
    let hit = facts_schema::object(
        json!({
            "file": {"type": "string", "description": "The memory file's name."},
            "heading": {
                "type": ["string", "null"],
                "description": "The section's heading; null for the text before the first one.",
            },
            "line_start": {"type": "integer", "description": "The section's first line."},
            "line_end": {"type": "integer", "description": "The section's last line."},
            "score": {"type": "number", "description": "BM25 relevance; higher is better."},
            "snippet": {
                "type": "array",
                "items": snippet_line,
                "description": "The section's lines that match best, with their numbers.",
            },
        }),
        &[
            "file",
            "heading",
            "line_start",
            "line_end",
            "score",
            "snippet",
        ],
    );
    let skipped = facts_schema::object(
        json!({"file": {"type": "string"}, "reason": {"type": "string"}}),
        &["file", "reason"],
    );
    facts_schema::object(
        json!({
            "query": {"type": "string"},
            "hits": {
                "type": "array",
                "items": hit,
                "description": "The best sections, best first, at most limit.",
            },
            "total_hits": {
                "type": "integer",
                "description": "Sections that match at all (more than hits when limit cut them).",
            },
            "sections_searched": {"type": "integer"},
            "files_searched": {"type": "integer"},
            "skipped": {
                "type": "array",
                "items": skipped,
                "description": "Memory files that could not be read, and why.",
            },
        }),
        &[
            "query",
            "hits",
            "total_hits",
            "sections_searched",
            "files_searched",
            "skipped",
        ],
    )
}

/// The memory files to search, and the ones that could not be read (with
/// why). A file named by the call must be readable.
fn load(store: &MemoryStore, only: Option<&str>) -> Result<(Vec<Corpus>, Vec<Skipped>), ToolError> {
    let names = match only {
        Some(name) => vec![name.to_owned()],
        None => store.list()?.0.into_iter().map(|f| f.name).collect(),
    };
    let mut corpus = Vec::new();
    let mut skipped = Vec::new();
    for name in names {
        let loaded = store.file(&name).and_then(|place| {
            store.load(&place)?.ok_or_else(|| {
                ToolError::Failed(format!(
                    "`{}` does not exist; call memory_read without file to list the memory \
                     files",
                    place.shown
                ))
            })
        });
        match loaded {
            Ok(loaded) => corpus.push(Corpus {
                sections: index::sections(&loaded.decoded.text),
                lines: loaded.decoded.text.lines().map(str::to_owned).collect(),
                name,
            }),
            Err(e) if only.is_some() => return Err(e),
            Err(e) => skipped.push(Skipped {
                file: name,
                reason: e.to_string(),
            }),
        }
    }
    Ok((corpus, skipped))
}
