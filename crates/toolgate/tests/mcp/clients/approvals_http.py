"""Approval scenarios over Streamable HTTP (`toolgate serve`), real Python SDK.

Usage: python approvals_http.py SCENARIO < config.json

The config:
  {"mode": "legacy" | "auto",
   "http": {"url": ..., "token": ...},
   "calls": [[tool, args], ...]     "wait" and "elicit": the calls, in order
   "answers": [...]                  "elicit": the person's answers, in order
   "sessions": [{"name", "call", "answer"}, ...]
                                     "sessions": one client each, all at once}

Prints one JSON object of observations on stdout (after a line "started" once
the session is up); the Rust test decides what is right.
"""

import contextlib
import json
import sys

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from approvals import call


@contextlib.asynccontextmanager
async def connect(config, name="approval-tester", **options):
    """A session over HTTP with the bearer token, named `name`."""
    http = config["http"]
    headers = {"Authorization": f"Bearer {http['token']}"}
    client = create_mcp_http_client(headers=headers)
    async with client, Client(
        streamable_http_client(http["url"], http_client=client),
        mode=config["mode"],
        client_info=types.Implementation(name=name, version="1.0"),
        **options,
    ) as c:
        yield c


def answerer(answers, questions):
    """An elicitation callback giving `answers` in order, noting each question."""

    async def on_elicit(_context, params):
        questions.append({"message": params.message, "schema": params.requested_schema})
        answer = answers.pop(0) if answers else {"action": "cancel"}
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    return on_elicit


async def wait(config):
    """Each call with a progress callback: what the waiting call reported."""
    results = []
    async with connect(config) as c:
        print("started", flush=True)
        for name, args in config["calls"]:
            events = []

            async def on_progress(value, total, message, events=events):
                events.append({"progress": value, "message": message})

            result = await call(c, name, args, progress_callback=on_progress)
            results.append({"result": result, "events": events})
            print("called", flush=True)
        return {"protocol_version": c.protocol_version, "results": results}


async def elicit(config):
    """Each call answered in-line with the next of `answers`."""
    questions = []
    on_elicit = answerer(list(config["answers"]), questions)
    async with connect(config, elicitation_callback=on_elicit) as c:
        print("started", flush=True)
        results = [await call(c, name, args) for name, args in config["calls"]]
        return {"protocol_version": c.protocol_version, "results": results, "questions": questions}


async def sessions(config):
    """One client per entry, each its own session, all calling at once; each
    answers only the questions it is asked. Every question is held until all
    sessions have one, so they are all open together on the one server."""
    entries = config["sessions"]
    observed = {e["name"]: {"questions": []} for e in entries}
    all_asked = anyio.Event()
    asked = []

    async def run(entry):
        seen = observed[entry["name"]]

        async def on_elicit(_context, params):
            seen["questions"].append({"message": params.message})
            asked.append(entry["name"])
            if len(asked) >= len(entries):
                all_asked.set()
            with anyio.move_on_after(60):
                await all_asked.wait()
            answer = entry["answer"]
            return types.ElicitResult(action=answer["action"], content=answer.get("content"))

        async with connect(config, name=entry["name"], elicitation_callback=on_elicit) as c:
            tool, args = entry["call"]
            seen["result"] = await call(c, tool, args)
            seen["protocol_version"] = c.protocol_version

    async with anyio.create_task_group() as tg:
        for entry in entries:
            tg.start_soon(run, entry)
    return {"sessions": observed, "all_asked_together": all_asked.is_set()}


SCENARIOS = {"wait": wait, "elicit": elicit, "sessions": sessions}


def main():
    scenario = SCENARIOS[sys.argv[1]]
    config = json.load(sys.stdin)
    try:
        observed = anyio.run(scenario, config)
    except BaseException as e:  # noqa: BLE001 - report, the test decides
        observed = {"crashed": repr(e)}
    print(json.dumps(observed), flush=True)


if __name__ == "__main__":
    main()
