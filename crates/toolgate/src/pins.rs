//! Tool pins in the store, and `toolgate mcp-servers review`: the changes
//! servers made to tools that were trusted, shown as diffs for a person to
//! approve or reject.
//!
//! The gateway pins the first definition it sees of each external tool; a
//! different definition later disables the tool and is parked in the store
//! until a person approves it here. An approval names the change by its
//! digest, as the listing prints it, so that a server that changes the tool
//! again after the diff was shown is never approved by accident.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use serde_json::{Map, Value, json};
use similar::TextDiff;
use toolgate_mcp::gateway::{PinVerdict, ToolDefinition, ToolPins};
use toolgate_store::{ChangeState, ListedTool, PinCheck, PinnedTool, Store, Tenant, ToolChange};

use crate::config::approvals::hide_passwords;
use crate::config::{Environment, Settings};
use crate::store::{Opened, answered_by, relative, time};

/// How many hex characters of a digest the listing prints and an approval
/// must name: 64 bits. A server that knows which change a person is looking
/// at cannot craft a second definition whose digest starts the same (2^64
/// hashes); with 8 or 12 characters it could.
const SHOWN_DIGEST: usize = 16;

/// The pins of one tenant in the store: what the gateway checks every
/// external tool against.
pub struct StorePins {
    store: Arc<dyn Store>,
    tenant: Tenant,
}

impl StorePins {
    /// Pins of `tenant` in `store` (an already opened store: `mcp`, `serve`
    /// and `call` open one for the approval gate).
    pub fn new(store: Arc<dyn Store>, tenant: Tenant) -> Self {
        StorePins { store, tenant }
    }
}

/// The pins of the configured store, for `GatewayOptions::pins`. An
/// unreachable store is an error here, at the start of the command.
pub async fn store_pins(settings: &Settings) -> Result<Arc<dyn ToolPins>> {
    let opened = crate::store::open(settings).await?;
    Ok(Arc::new(StorePins::new(opened.store, opened.tenant)))
}

#[async_trait]
impl ToolPins for StorePins {
    async fn check(&self, definitions: &[ToolDefinition]) -> Result<Vec<PinVerdict>, String> {
        let listed = definitions
            .iter()
            .map(|d| {
                Ok(ListedTool {
                    server: d.server.clone(),
                    tool: d.tool.clone(),
                    digest: d.digest(),
                    definition: serde_json::to_value(d).map_err(|e| {
                        format!("the definition of tool `{}` does not encode: {e}", d.tool)
                    })?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let checks = self
            .store
            .check_tool_pins(&self.tenant, &listed)
            .await
            .map_err(|e| hide_passwords(&e.to_string()))?;
        checks.into_iter().map(verdict).collect()
    }
}

fn verdict(check: PinCheck) -> Result<PinVerdict, String> {
    match check {
        PinCheck::Trusted => Ok(PinVerdict::Trusted),
        PinCheck::FirstSeen => Ok(PinVerdict::FirstSeen),
        PinCheck::Changed { pinned } => {
            let definition: ToolDefinition =
                serde_json::from_value(pinned.definition).map_err(|e| {
                    format!(
                        "the pinned definition of tool `{}` of MCP server `{}` does not decode: {e}",
                        pinned.tool, pinned.server
                    )
                })?;
            Ok(PinVerdict::Changed {
                pinned: Box::new(definition),
            })
        }
    }
}

/// `toolgate mcp-servers review`.
#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// Approve a change: its definition becomes the tool's pin, and the
    /// tool is enabled the next time toolgate connects to its server. Name
    /// it as the listing prints it, digest included (so that a server that
    /// changed the tool again since is not approved unseen).
    #[arg(long, value_name = "SERVER/TOOL@DIGEST")]
    pub approve: Vec<String>,
    /// Approve every pending change as it is now (not the rejected ones,
    /// nor those named by --reject).
    #[arg(long, conflicts_with = "approve")]
    pub approve_all: bool,
    /// Reject a change: the tool keeps its pin and stays disabled while its
    /// server serves that definition.
    #[arg(long, value_name = "SERVER/TOOL@DIGEST")]
    pub reject: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `toolgate mcp-servers review`: without arguments, every change with its
/// diff; with --approve, --approve-all or --reject, those answers.
pub fn review(args: ReviewArgs, settings: &Settings, env: &Environment) -> Result<ExitCode> {
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let opened = crate::store::open(settings).await?;
        let changes = opened.store.tool_changes(&opened.tenant).await?;
        if args.approve.is_empty() && args.reject.is_empty() && !args.approve_all {
            return list(&opened, &changes, args.json);
        }
        let pins = opened.store.tool_pins(&opened.tenant).await?;
        let decisions = plan(&args, &changes, &pins)?;
        answer(&opened, &decisions, &answered_by(env), args.json).await
    })
}

/// `server/tool`, as the listing prints it and the flags take it.
fn name_of(pin: &PinnedTool) -> String {
    format!("{}/{}", pin.server, pin.tool)
}

fn short(digest: &str) -> &str {
    digest.get(..SHOWN_DIGEST).unwrap_or(digest)
}

fn list(opened: &Opened, changes: &[ToolChange], as_json: bool) -> Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    if as_json {
        let rows = changes
            .iter()
            .map(|change| {
                let mut row = serde_json::to_value(change)?;
                row["name"] = json!(name_of(&change.pinned));
                row["diff"] = json!(diff(&change.pinned.definition, &change.definition));
                Ok(row)
            })
            .collect::<Result<Vec<Value>, serde_json::Error>>()?;
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if changes.is_empty() {
        writeln!(out, "no MCP tool changes to review ({})", opened.shown)?;
        return Ok(ExitCode::SUCCESS);
    }
    for change in changes {
        write_change(&mut out, change)?;
        writeln!(out)?;
    }
    writeln!(
        out,
        "a changed tool stays disabled until its change is approved; an approval takes effect \
         the next time toolgate connects to the server"
    )?;
    Ok(ExitCode::SUCCESS)
}

fn write_change(out: &mut impl Write, change: &ToolChange) -> Result<()> {
    let (name, pin) = (name_of(&change.pinned), &change.pinned);
    let state = match (change.state, &change.decided_by, change.decided_ms) {
        (ChangeState::Rejected, Some(by), Some(at)) => format!(
            "change rejected by {by} at {}; disabled while `{}` serves it",
            time(at),
            pin.server
        ),
        (ChangeState::Rejected, ..) => {
            format!("change rejected; disabled while `{}` serves it", pin.server)
        }
        (ChangeState::Pending, ..) => {
            "changed since it was pinned; disabled until the change is approved".to_owned()
        }
    };
    let pinned_how = pin
        .approved_by
        .as_ref()
        .map_or("when first seen".to_owned(), |by| {
            format!("approved by {by}")
        });
    writeln!(out, "{name}: {state}")?;
    writeln!(
        out,
        "  pinned   {} ({}) {pinned_how}, digest {}",
        time(pin.pinned_ms),
        relative(pin.pinned_ms),
        short(&pin.digest)
    )?;
    writeln!(
        out,
        "  changed  first seen {} ({}), digest {}",
        time(change.seen_ms),
        relative(change.seen_ms),
        short(&change.digest)
    )?;
    for line in diff(&pin.definition, &change.definition).lines() {
        writeln!(out, "  {line}")?;
    }
    let target = format!("{name}@{}", short(&change.digest));
    writeln!(
        out,
        "  approve: toolgate mcp-servers review --approve {target}"
    )?;
    if change.state == ChangeState::Pending {
        writeln!(
            out,
            "  reject:  toolgate mcp-servers review --reject {target}"
        )?;
    }
    Ok(())
}

/// One answer to give.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Decision<'a> {
    Approve(&'a ToolChange),
    Reject(&'a ToolChange),
}

/// The answers the flags ask for, every name checked before any is given:
/// a typo in the third name does not leave the first two answered.
fn plan<'a>(
    args: &ReviewArgs,
    changes: &'a [ToolChange],
    pins: &[PinnedTool],
) -> Result<Vec<Decision<'a>>> {
    let mut decisions = Vec::new();
    for text in &args.reject {
        decisions.push(Decision::Reject(find("--reject", text, changes, pins)?));
    }
    let rejected: BTreeSet<String> = decisions
        .iter()
        .map(|d| match d {
            Decision::Approve(c) | Decision::Reject(c) => name_of(&c.pinned),
        })
        .collect();
    for text in &args.approve {
        let change = find("--approve", text, changes, pins)?;
        if rejected.contains(&name_of(&change.pinned)) {
            bail!(
                "{} is named by both --approve and --reject; choose one",
                name_of(&change.pinned)
            );
        }
        decisions.push(Decision::Approve(change));
    }
    if args.approve_all {
        decisions.extend(
            changes
                .iter()
                .filter(|c| c.state == ChangeState::Pending)
                .filter(|c| !rejected.contains(&name_of(&c.pinned)))
                .map(Decision::Approve),
        );
    }
    Ok(decisions)
}

/// The change `text` (`SERVER/TOOL@DIGEST`) names, if its digest is still
/// the one named.
fn find<'a>(
    flag: &str,
    text: &str,
    changes: &'a [ToolChange],
    pins: &[PinnedTool],
) -> Result<&'a ToolChange> {
    let (name, digest) = parse_target(flag, text)?;
    let Some(change) = changes.iter().find(|c| name_of(&c.pinned) == name) else {
        if pins.iter().any(|p| name_of(p) == name) {
            bail!(
                "{flag} {text}: `{name}` has no change to review: the last definition seen of it \
                 is its pinned one"
            );
        }
        let names: Vec<String> = pins.iter().map(name_of).collect();
        let hint = toolgate_core::suggest::did_you_mean(name, names.iter().map(String::as_str));
        let pending: Vec<String> = changes.iter().map(|c| name_of(&c.pinned)).collect();
        let listed = if pending.is_empty() {
            "none".to_owned()
        } else {
            pending.join(", ")
        };
        bail!("{flag} {text}: no MCP tool `{name}` is pinned{hint} (changes to review: {listed})");
    };
    if !change.digest.starts_with(&digest) {
        // The new digest is not printed: copying it from an error would
        // approve a definition nobody looked at.
        bail!(
            "{flag} {text}: `{name}` changed again since the change with digest {digest} was \
             shown; run `toolgate mcp-servers review` to see the new change"
        );
    }
    Ok(change)
}

/// `SERVER/TOOL@DIGEST` as the name and the (lowercase) digest.
fn parse_target<'t>(flag: &str, text: &'t str) -> Result<(&'t str, String)> {
    let form = format!(
        "{flag} takes SERVER/TOOL@DIGEST, the digest being the {SHOWN_DIGEST} hex characters \
         `toolgate mcp-servers review` prints beside the change you reviewed"
    );
    let Some((name, digest)) = text.rsplit_once('@') else {
        bail!("{flag} {text}: the change you reviewed is not named; {form}");
    };
    if !name
        .split_once('/')
        .is_some_and(|(s, t)| !s.is_empty() && !t.is_empty())
    {
        bail!("{flag} {text}: {form}");
    }
    if digest.len() < SHOWN_DIGEST || !digest.chars().all(|c| c.is_ascii_hexdigit()) {
        bail!("{flag} {text}: `{digest}` is not a digest; {form}");
    }
    Ok((name, digest.to_ascii_lowercase()))
}

async fn answer(
    opened: &Opened,
    decisions: &[Decision<'_>],
    by: &str,
    as_json: bool,
) -> Result<ExitCode> {
    let (mut approved, mut rejected, mut done) = (Vec::new(), Vec::new(), Vec::new());
    for decision in decisions {
        let (store, tenant) = (&opened.store, &opened.tenant);
        let result = match decision {
            Decision::Approve(c) => store
                .approve_tool_change(tenant, &c.pinned.server, &c.pinned.tool, &c.digest, by)
                .await
                .map(|pin| {
                    done.push(format!("approved {}", name_of(&pin)));
                    approved.push(pin);
                }),
            Decision::Reject(c) => store
                .reject_tool_change(tenant, &c.pinned.server, &c.pinned.tool, &c.digest, by)
                .await
                .map(|change| {
                    done.push(format!("rejected {}", name_of(&change.pinned)));
                    rejected.push(change);
                }),
        };
        if let Err(error) = result {
            let before = if done.is_empty() {
                "nothing".to_owned()
            } else {
                done.join(", ")
            };
            return Err(error).with_context(|| format!("done before this error: {before}"));
        }
    }
    let mut out = std::io::stdout().lock();
    if as_json {
        let body = json!({"approved": approved, "rejected": rejected});
        writeln!(out, "{}", serde_json::to_string_pretty(&body)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if decisions.is_empty() {
        writeln!(
            out,
            "no pending MCP tool changes to approve ({})",
            opened.shown
        )?;
    }
    for pin in &approved {
        writeln!(
            out,
            "approved {}: digest {} is its pin now; the tool is enabled the next time toolgate \
             connects to `{}`",
            name_of(pin),
            short(&pin.digest),
            pin.server
        )?;
    }
    for change in &rejected {
        writeln!(
            out,
            "rejected {} (digest {}): it stays disabled while `{}` serves that definition",
            name_of(&change.pinned),
            short(&change.digest),
            change.pinned.server
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The unified diff of two definitions as a person reviews them
/// ([`review_text`]).
pub(crate) fn diff(pinned: &Value, changed: &Value) -> String {
    let (old, new) = (review_text(pinned), review_text(changed));
    if old == new {
        return "(no visible difference: the definitions differ only in characters that print \
                alike; compare them with --json)\n"
            .to_owned();
    }
    TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header("pinned", "changed")
        .to_string()
}

/// One definition as a person reviews it: the description as its lines of
/// text, the schemas as pretty JSON with sorted keys (a server reordering
/// keys is no change), and any other field there is, so that nothing the
/// digest covers goes unshown. Headings stand at column 0 and their content
/// is indented, so that a description cannot fake a heading of its own;
/// every line is [`visible`].
pub(crate) fn review_text(definition: &Value) -> String {
    let Some(fields) = definition.as_object() else {
        return section("definition", Some(definition));
    };
    let mut text = String::new();
    for key in ["description", "input_schema", "output_schema"] {
        text.push_str(&section(key, fields.get(key).filter(|v| !v.is_null())));
    }
    let mut rest: Vec<(&String, &Value)> = fields
        .iter()
        .filter(|(key, _)| {
            ![
                "description",
                "input_schema",
                "output_schema",
                "server",
                "tool",
            ]
            .contains(&key.as_str())
        })
        .collect();
    rest.sort_by(|a, b| a.0.cmp(b.0));
    for (key, value) in rest {
        text.push_str(&section(key, Some(value)));
    }
    text
}

fn section(heading: &str, value: Option<&Value>) -> String {
    let body = match value {
        None => "(none)".to_owned(),
        Some(Value::String(s)) if s.is_empty() => "(empty)".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => serde_json::to_string_pretty(&sorted(other))
            .unwrap_or_else(|e| format!("(cannot print: {e})")),
    };
    let mut text = format!("{}:\n", visible(heading));
    for line in body.lines() {
        text.push_str("  ");
        text.push_str(&visible(line));
        text.push('\n');
    }
    text
}

/// `value` with every object's keys in sorted order, whatever order the
/// server wrote them in (and whether or not serde_json keeps insertion
/// order).
fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for key in keys {
                out.insert(key.clone(), sorted(&map[key]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// `line` with every character a terminal would not show as itself
/// escaped as `\u{…}`. A rug pull hides its new instructions from the
/// reviewer, not from the model: escape sequences that conceal text or move
/// the cursor over it (ESC, CSI, CR), bidirectional overrides that make a
/// line read differently than it is stored ("Trojan Source"), and
/// invisible characters the model still reads (zero-width characters,
/// Unicode tag characters and variation selectors that smuggle whole
/// sentences as "ASCII smuggling").
pub(crate) fn visible(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for c in line.chars() {
        if hides(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn hides(c: char) -> bool {
    c.is_control()
        || matches!(
            u32::from(c),
            0x00AD              // soft hyphen
            | 0x034F            // combining grapheme joiner
            | 0x061C            // Arabic letter mark
            | 0x115F | 0x1160   // Hangul fillers
            | 0x17B4 | 0x17B5   // Khmer inherent vowels
            | 0x180B..=0x180F   // Mongolian variation selectors, vowel separator
            | 0x200B..=0x200F   // zero-width space, joiners, direction marks
            | 0x2028..=0x202E   // line and paragraph separators, bidi embeddings and overrides
            | 0x2060..=0x206F   // word joiner, invisible operators, bidi isolates
            | 0x3164            // Hangul filler
            | 0xFE00..=0xFE0F   // variation selectors
            | 0xFEFF            // zero-width no-break space
            | 0xFFA0            // halfwidth Hangul filler
            | 0xFFF9..=0xFFFB   // interlinear annotation
            | 0xE0000..=0xE007F // tag characters
            | 0xE0100..=0xE01EF // variation selectors supplement
        )
}

#[cfg(test)]
mod tests;
