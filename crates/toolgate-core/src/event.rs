//! Events the call pipeline emits, for logs, audit and live views.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::decision::Decision;
use crate::effect::{EffectClass, Idempotency};

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "phase")]
#[non_exhaustive]
pub enum ToolEventKind {
    /// The call passed every check and the tool starts running.
    Start,
    /// The tool finished; `is_error` when it reported a failure to the model.
    End {
        /// The tool's own failure flag.
        is_error: bool,
    },
    /// The running tool reported progress (an output line, a step).
    Progress {
        /// What it reported.
        message: String,
    },
    /// The running tool's command made (or tried) a network connection
    /// through the egress proxy.
    Egress {
        /// Host, port, decision and bytes.
        connection: crate::tool::EgressNote,
    },
    /// The call did not run to the end: refused by a check, or the tool failed.
    Error {
        /// What went wrong.
        message: String,
    },
}

/// One event of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolEvent {
    /// Start, end or error.
    #[serde(flatten)]
    pub kind: ToolEventKind,
    /// Tool name as called.
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// Who called.
    pub caller: String,
    /// The tool's class (absent when the tool does not exist).
    pub effect_class: Option<EffectClass>,
    /// The tool's repeat contract.
    pub idempotency: Option<Idempotency>,
    /// Time since the call entered the pipeline.
    #[serde(with = "duration_micros")]
    pub duration: Duration,
    /// The decision reached, when the call got that far.
    pub decision: Option<Decision>,
}

impl ToolEvent {
    /// An event with no class, duration or decision yet.
    pub fn new(
        kind: ToolEventKind,
        tool: impl Into<String>,
        call_id: impl Into<String>,
        caller: impl Into<String>,
    ) -> Self {
        ToolEvent {
            kind,
            tool: tool.into(),
            call_id: call_id.into(),
            caller: caller.into(),
            effect_class: None,
            idempotency: None,
            duration: Duration::ZERO,
            decision: None,
        }
    }
}

mod duration_micros {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_micros(u64::deserialize(d)?))
    }
}

/// Receives events. Sinks are called synchronously on the calling task and
/// must not block; forward to a channel for slow work.
pub trait EventSink: Send + Sync {
    /// Called once per event.
    fn emit(&self, event: &ToolEvent);
}

impl<F: Fn(&ToolEvent) + Send + Sync> EventSink for F {
    fn emit(&self, event: &ToolEvent) {
        self(event)
    }
}
