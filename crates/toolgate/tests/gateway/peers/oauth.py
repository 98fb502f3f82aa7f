"""An OAuth 2.1 client-credentials token endpoint and the MCP server it protects.

Usage:
    python oauth.py --client-id ID --client-secret SECRET [--expires-in SECONDS | --no-expires-in]
                    [--revoke-after N] [--log FILE]

Prints, once it accepts connections, and serves until killed:
    token http://127.0.0.1:PORT/token
    listening http://127.0.0.1:PORT/mcp

`POST /token` (RFC 6749 section 4.4, RFC 8707) issues opaque bearer tokens. It
accepts only `application/x-www-form-urlencoded` bodies with
`grant_type=client_credentials`, the client authenticated by HTTP Basic
(`client_secret_basic`; credentials in the body are refused), and optional
`scope` (space separated) and `resource` parameters. The answer carries
`expires_in` (`--expires-in`, default 3600) unless `--no-expires-in`, in which
case the token never expires.

`/mcp` is a Streamable HTTP MCP server that accepts only unexpired tokens
issued above and answers anything else with 401 and `WWW-Authenticate: Bearer`.
With `--revoke-after N`, a token stops working after N authenticated requests,
so the client has to fetch a new one. The MCP session belongs to the client id,
not to the token (as in the SDK's own resource server), so a refreshed token
keeps the session.

Tools:
    whoami()             -> JSON text {"client_id", "scopes", "resource"} of the calling token
    echo(message: str)   -> the message, as text

`--log FILE` gets one JSON object per line, flushed as it happens; secrets and
token values are never written:
    {"event": "token", "grant_type", "scope", "resource", "basic_auth", "error"}
        per POST to /token; "scope" as sent, "resource" a string (a list if repeated),
        "basic_auth" whether an HTTP Basic header was sent, "error" the OAuth error
        code, or null when a token was issued
    {"event": "mcp", "auth": "ok"|"missing"|"invalid"|"expired"|"revoked", "session", "method", "http"}
        per HTTP request to /mcp; "session" is the Mcp-Session-Id header, "method" the
        JSON-RPC method (a list for a batch; null for a GET, DELETE or a response),
        "http" the HTTP method
    {"event": "initialize"}
        per authenticated initialize request, so a test can tell a token refresh
        from a reconnect
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote_plus, urlsplit

import mcp_types as types
from _listen import serve
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send


@dataclass
class Grant:
    scopes: list[str]
    resource: str | None
    expires_at: float | None  # time.monotonic(); None: never
    uses: int = 0


class EventLog:
    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", encoding="utf-8") if path else None

    def write(self, event: str, **fields: Any) -> None:
        if self._file:
            self._file.write(json.dumps({"event": event, **fields}) + "\n")
            self._file.flush()


def oauth_error(status: int, code: str, description: str, headers: dict[str, str] | None = None) -> Response:
    """An RFC 6749 section 5.2 error response."""
    return JSONResponse({"error": code, "error_description": description}, status, headers=headers)


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """The (id, secret) of an `Authorization: Basic` header, or None."""
    if not header or header[:6].lower() != "basic ":
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    client_id, colon, secret = decoded.partition(":")
    # RFC 6749 section 2.3.1: both halves are form-urlencoded before base64.
    return (unquote_plus(client_id), unquote_plus(secret)) if colon else None


class TokenEndpoint:
    def __init__(self, args: argparse.Namespace, grants: dict[str, Grant], log: EventLog) -> None:
        self.args, self.grants, self.log = args, grants, log

    async def handle(self, request: Request) -> Response:
        basic = basic_credentials(request.headers.get("authorization"))
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/x-www-form-urlencoded":
            self.log.write("token", grant_type=None, scope=None, resource=None, basic_auth=basic is not None,
                           error="invalid_request")
            return oauth_error(400, "invalid_request", "the body must be application/x-www-form-urlencoded")
        # RFC 6749 section 3.2: empty parameters count as omitted.
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        grant_type = form.get("grant_type", [None])[-1]
        scope = form.get("scope", [None])[-1]
        resources = form.get("resource", [])  # RFC 8707 allows several
        resource = resources[0] if len(resources) == 1 else (resources or None)

        refusal = self._refusal(form, basic, grant_type, resources)
        self.log.write("token", grant_type=grant_type, scope=scope, resource=resource,
                       basic_auth=basic is not None, error=refusal[1] if refusal else None)
        if refusal:
            status, code, description = refusal
            # RFC 6749 section 5.2: a failed client authentication names the scheme to use.
            headers = {"WWW-Authenticate": 'Basic realm="token"'} if status == 401 else None
            return oauth_error(status, code, description, headers)

        token = secrets.token_urlsafe(32)
        expires_in = None if self.args.no_expires_in else self.args.expires_in
        self.grants[token] = Grant(
            scopes=scope.split() if scope else [],
            resource=resource if isinstance(resource, str) else None,
            expires_at=None if expires_in is None else time.monotonic() + expires_in,
        )
        body: dict[str, Any] = {"access_token": token, "token_type": "Bearer"}
        if expires_in is not None:
            body["expires_in"] = expires_in
        if scope:
            body["scope"] = scope
        return JSONResponse(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"})

    def _refusal(self, form: dict[str, list[str]], basic: tuple[str, str] | None, grant_type: str | None,
                 resources: list[str]) -> tuple[int, str, str] | None:
        """Why the request gets no token, as (HTTP status, OAuth error code, description), or None."""
        if any(len(form[name]) > 1 for name in form if name != "resource"):
            return 400, "invalid_request", "a parameter is repeated"
        if basic is None:
            # Only client_secret_basic is registered for this client, so
            # client_secret_post (credentials in the body) is refused too.
            return 401, "invalid_client", "authenticate the client with HTTP Basic"
        client_id, secret = basic
        if not (hmac.compare_digest(client_id.encode(), self.args.client_id.encode())
                and hmac.compare_digest(secret.encode(), self.args.client_secret.encode())):
            return 401, "invalid_client", "unknown client or wrong secret"
        if grant_type is None:
            return 400, "invalid_request", "grant_type is missing"
        if grant_type != "client_credentials":
            return 400, "unsupported_grant_type", "only client_credentials is supported"
        for resource in resources:
            parts = urlsplit(resource)
            if not parts.scheme or not parts.netloc or parts.fragment:
                return 400, "invalid_target", "resource must be an absolute URI without a fragment"
        return None


class BearerGate:
    """ASGI middleware in front of `/mcp`: authenticates, logs, or answers 401."""

    def __init__(self, app: ASGIApp, args: argparse.Namespace, grants: dict[str, Grant], log: EventLog) -> None:
        self.app, self.args, self.grants, self.log = app, args, grants, log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/mcp":
            return await self.app(scope, receive, send)
        request = Request(scope)
        # The body is read here to log its method, then replayed to the app.
        body = await read_body(receive)
        method = jsonrpc_method(body)
        token = bearer_token(request.headers.get("authorization"))
        auth, grant = self._authenticate(token)
        self.log.write("mcp", auth=auth, session=request.headers.get("mcp-session-id"), method=method,
                       http=scope["method"])
        if grant is None or token is None:
            return await unauthorized(auth)(scope, receive, send)
        if method == "initialize" or (isinstance(method, list) and "initialize" in method):
            self.log.write("initialize")

        # What the SDK's BearerAuthBackend would set: the session manager binds
        # each session to the client id, and whoami reads the grant from here.
        scope["user"] = AuthenticatedUser(AccessToken(
            token=token, client_id=self.args.client_id, scopes=grant.scopes, resource=grant.resource))
        await self.app(scope, replay(body, receive), send)

    def _authenticate(self, token: str | None) -> tuple[str, Grant | None]:
        """The log's `auth` verdict, and the grant when it is "ok" (counting this use)."""
        if token is None:
            return "missing", None
        grant = self.grants.get(token)
        if grant is None:
            return "invalid", None
        if grant.expires_at is not None and time.monotonic() >= grant.expires_at:
            return "expired", None
        if self.args.revoke_after is not None and grant.uses >= self.args.revoke_after:
            return "revoked", None
        grant.uses += 1
        return "ok", grant


def bearer_token(header: str | None) -> str | None:
    if not header or header[:7].lower() != "bearer ":
        return None
    return header[7:].strip() or None


def unauthorized(auth: str) -> Response:
    if auth == "missing":
        # RFC 6750 section 3.1: no error code when no credentials were sent.
        return Response(status_code=401, headers={"WWW-Authenticate": 'Bearer realm="mcp"'})
    description = {"invalid": "unknown token", "expired": "the token expired", "revoked": "the token was revoked"}
    return JSONResponse(
        {"error": "invalid_token", "error_description": description[auth]},
        401,
        headers={"WWW-Authenticate": f'Bearer realm="mcp", error="invalid_token", '
                                     f'error_description="{description[auth]}"'},
    )


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()  # http.disconnect, when it comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


def jsonrpc_method(body: bytes) -> str | list[str | None] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, list):
        return [m.get("method") if isinstance(m, dict) else None for m in message]
    return message.get("method") if isinstance(message, dict) else None


TOOLS = [
    types.Tool(name="whoami", description="Describes the access token of this request.",
               input_schema={"type": "object", "properties": {}}),
    types.Tool(name="echo", description="Returns the message it is given.",
               input_schema={"type": "object", "properties": {"message": {"type": "string"}},
                             "required": ["message"]}),
]


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "whoami":
        token = ctx.request.scope["user"].access_token
        text = json.dumps({"client_id": token.client_id, "scopes": token.scopes, "resource": token.resource})
    elif params.name == "echo":
        text = str((params.arguments or {}).get("message", ""))
    else:
        return types.CallToolResult(content=[types.TextContent(text=f"no tool {params.name}")], is_error=True)
    return types.CallToolResult(content=[types.TextContent(text=text)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--expires-in", type=int, default=3600, metavar="SECONDS")
    parser.add_argument("--no-expires-in", action="store_true", help="omit expires_in; tokens never expire")
    parser.add_argument("--revoke-after", type=int, metavar="N", help="a token fails after N authenticated requests")
    parser.add_argument("--log", metavar="FILE")
    args = parser.parse_args()

    grants: dict[str, Grant] = {}
    log = EventLog(args.log)
    server = Server("oauth-peer", version="1.0.0", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(
        custom_starlette_routes=[Route("/token", TokenEndpoint(args, grants, log).handle, methods=["POST"])]
    )
    serve(
        BearerGate(app, args, grants, log),
        lambda port: [f"token http://127.0.0.1:{port}/token", f"listening http://127.0.0.1:{port}/mcp"],
    )


if __name__ == "__main__":
    main()
