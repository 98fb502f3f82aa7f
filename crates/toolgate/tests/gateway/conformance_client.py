"""The client side of the official MCP conformance suite, played by the
toolgate gateway: `conformance client --command "python3 THIS"` runs this
with the scenario's server URL as the last argument and the scenario in
MCP_CONFORMANCE_SCENARIO (its credentials, if any, in
MCP_CONFORMANCE_CONTEXT). It configures that server as toolgate's one
external server and does what the scenario asks through the `toolgate`
binary named by TOOLGATE_BIN; exit status 0 when toolgate succeeded.
"""

import json
import os
import subprocess
import sys


def main():
    url = sys.argv[-1]
    scenario = os.environ["MCP_CONFORMANCE_SCENARIO"]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    server = {"name": "conformance", "kind": "http", "url": url}
    if "client_secret" in context:
        # No token_url: toolgate discovers it from the server's metadata.
        server["auth"] = {
            "kind": "oauth-client-credentials",
            "client_id": context["client_id"],
            "client_secret": context["client_secret"],
        }
    env = dict(os.environ, TOOLGATE_MCP_SERVERS=json.dumps([server]))
    toolgate = os.environ["TOOLGATE_BIN"]
    if scenario == "tools_call":
        argv = [toolgate, "call", "mcp__conformance__add_numbers", '{"a": 5, "b": 3}']
    elif scenario == "sse-retry":
        argv = [toolgate, "call", "mcp__conformance__test_reconnection", "{}"]
    else:
        argv = [toolgate, "mcp-servers", "test", "conformance", "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
