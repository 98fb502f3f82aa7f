"""Approval scenarios of the MCP end-to-end tests, driven by the real Python SDK.

Usage: python approvals.py SCENARIO < config.json

The config is scenario.py's ({"mode", "stdio"}) plus:
  "calls": [[tool, args], ...]   the calls to make, in order
  "answers": [...]                for "elicit": what the person answers to each
                                  question, in order: {"action": "accept",
                                  "content": {...}} or {"action": "decline"|"cancel"}
  "cancel_after": seconds         for "cancel": give up on the call after this long

Prints one JSON object of observations on stdout (after a line "started" once
the session is up); the Rust test decides what is right.
"""

import json
import sys

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

import tempfile


def connect(config, **options):
    stdio = config["stdio"]
    params = StdioServerParameters(
        command=stdio["command"], args=stdio["args"], env=stdio["env"], cwd=stdio["cwd"]
    )
    errlog = tempfile.TemporaryFile(mode="w+")
    client = Client(
        stdio_client(params, errlog=errlog),
        mode=config["mode"],
        client_info=types.Implementation(name="approval-tester", version="1.0"),
        **options,
    )
    return client, errlog


def result_json(result):
    return {
        "is_error": bool(result.is_error),
        "text": "\n".join(b.text for b in result.content if b.type == "text"),
        "structured": result.structured_content,
    }


async def call(c, name, args, **kwargs):
    try:
        return result_json(await c.call_tool(name, args, **kwargs))
    except Exception as e:  # noqa: BLE001 - every failure is an observation
        return {"raised": {"type": type(e).__name__, "message": str(e)}}


async def wait(config):
    """Each call with a progress callback: what the waiting call reported."""
    client, errlog = connect(config)
    results = []
    async with client as c:
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
    answers = list(config["answers"])

    async def on_elicit(_context, params):
        questions.append(
            {
                "mode": getattr(params, "mode", None),
                "message": params.message,
                "schema": params.requested_schema,
            }
        )
        answer = answers.pop(0) if answers else {"action": "cancel"}
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    client, errlog = connect(config, elicitation_callback=on_elicit)
    async with client as c:
        print("started", flush=True)
        results = [await call(c, name, args) for name, args in config["calls"]]
        return {"protocol_version": c.protocol_version, "results": results, "questions": questions}


async def cancel(config):
    """The first call given up on after `cancel_after` seconds; then the rest."""
    client, errlog = connect(config)
    async with client as c:
        print("started", flush=True)
        name, args = config["calls"][0]
        gave_up = True
        with anyio.move_on_after(config["cancel_after"]):
            await c.call_tool(name, args)
            gave_up = False
        # The cancellation reaches the server before the session closes.
        await anyio.sleep(1.0)
        rest = [await call(c, n, a) for n, a in config["calls"][1:]]
        return {"protocol_version": c.protocol_version, "gave_up": gave_up, "results": rest}


SCENARIOS = {"wait": wait, "elicit": elicit, "cancel": cancel}


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
