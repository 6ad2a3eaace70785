"""The verdict service's HTTP API, on loopback, every request with the token.

    GET /v1/verdicts?session=S&through=E[&predecessor=P...]
        Authorization: Bearer <token>
    200 {"session": S, "through": E, "ready": true, "processed": true,
         "dropped": {"<copy id>": "<id of the kept entry it repeats>"}, "reason": null}

`processed` is false, with a `reason`, while the index is rebuilding or has not yet seen the
entry `through`; the engine then leaves the messages as OpenClaw made them. `predecessor`
names a session this one continues after a compaction moved it to a new id, oldest first.
    GET /v1/health  {"ready": bool, "sessions": n}
"""

from __future__ import annotations

import asyncio
import hmac

from aiohttp import web

from stream.consumers.verdicts.index import VerdictIndex

HOST = "127.0.0.1"
INDEX: web.AppKey[VerdictIndex] = web.AppKey("index", VerdictIndex)
READY: web.AppKey[asyncio.Event] = web.AppKey("ready", asyncio.Event)
TOKEN: web.AppKey[str] = web.AppKey("token", str)


@web.middleware
async def _require_token(request: web.Request, handler) -> web.StreamResponse:
    given = request.headers.get("Authorization", "")
    expected = f"Bearer {request.app[TOKEN]}"
    if not hmac.compare_digest(given.encode(), expected.encode()):
        return web.json_response({"error": "a valid bearer token is required"}, status=401)
    return await handler(request)


async def _verdicts(request: web.Request) -> web.Response:
    session = request.query.get("session", "")
    through = request.query.get("through", "")
    if not session or not through:
        return web.json_response({"error": "session and through are required"}, status=400)
    ready = request.app[READY].is_set()
    if not ready:
        return web.json_response({"session": session, "through": through, "ready": False,
                                  "processed": False, "dropped": {},
                                  "reason": "the verdicts are being rebuilt from the topics"})
    answer = request.app[INDEX].answer(session, through, request.query.getall("predecessor", []))
    return web.json_response({"session": session, "through": through, "ready": True,
                              "processed": answer.processed, "dropped": answer.dropped,
                              "reason": answer.reason})


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"ready": request.app[READY].is_set(),
                              "sessions": len(request.app[INDEX])})


def make_app(index: VerdictIndex, ready: asyncio.Event, token: str) -> web.Application:
    if not token:
        raise ValueError("the verdict service needs a token")
    app = web.Application(middlewares=[_require_token])
    app[INDEX], app[READY], app[TOKEN] = index, ready, token
    app.router.add_get("/v1/verdicts", _verdicts)
    app.router.add_get("/v1/health", _health)
    return app


async def serve(app: web.Application, port: int) -> web.AppRunner:
    """Listening on loopback once this returns; `await runner.cleanup()` stops it."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, HOST, port).start()
    return runner
