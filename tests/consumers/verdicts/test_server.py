"""The verdict service's HTTP API as the context engine calls it."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from stream.consumers.verdicts.index import VerdictIndex
from stream.consumers.verdicts.server import make_app

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


async def client_for(index: VerdictIndex, ready: bool = True) -> TestClient:
    event = asyncio.Event()
    if ready:
        event.set()
    client = TestClient(TestServer(make_app(index, event, TOKEN)))
    await client.start_server()
    return client


def an_index() -> VerdictIndex:
    index = VerdictIndex(max_ids=10, ttl=60)
    index.processed("s1", "reply", at=1)
    index.dropped("s1", "copy", "reply", at=1)
    return index


async def test_it_answers_the_copies_and_whether_the_transcript_was_processed() -> None:
    client = await client_for(an_index())
    try:
        response = await client.get("/v1/verdicts", params={"session": "s1", "through": "copy"},
                                    headers=AUTH)
        assert response.status == 200
        assert await response.json() == {"session": "s1", "through": "copy", "ready": True,
                                         "processed": True, "dropped": {"copy": "reply"},
                                         "reason": None}
        later = await client.get("/v1/verdicts", params={"session": "s1", "through": "next"},
                                 headers=AUTH)
        assert (await later.json())["processed"] is False
    finally:
        await client.close()


async def test_without_the_token_nothing_is_answered() -> None:
    client = await client_for(an_index())
    try:
        query = {"session": "s1", "through": "copy"}
        missing = await client.get("/v1/verdicts", params=query)
        wrong = await client.get("/v1/verdicts", params=query,
                                 headers={"Authorization": "Bearer s3cret-tokeN"})
        health = await client.get("/v1/health")
        assert [missing.status, wrong.status, health.status] == [401, 401, 401]
        assert "copy" not in await missing.text()
    finally:
        await client.close()


async def test_while_rebuilding_it_says_so_and_answers_no_copy() -> None:
    client = await client_for(an_index(), ready=False)
    try:
        response = await client.get("/v1/verdicts", params={"session": "s1", "through": "copy"},
                                    headers=AUTH)
        body = await response.json()
        assert (body["processed"], body["dropped"]) == (False, {})
        assert body["reason"] == "the verdicts are being rebuilt from the topics"
        health = await client.get("/v1/health", headers=AUTH)
        assert await health.json() == {"ready": False, "sessions": 1}
    finally:
        await client.close()


async def test_a_question_without_session_or_entry_is_refused() -> None:
    client = await client_for(an_index())
    try:
        response = await client.get("/v1/verdicts", params={"session": "s1"}, headers=AUTH)
        assert response.status == 400
    finally:
        await client.close()


async def test_predecessors_are_asked_oldest_first() -> None:
    index = an_index()
    index.processed("s2", "summary", at=2)
    client = await client_for(index)
    try:
        response = await client.get("/v1/verdicts", headers=AUTH,
                                    params=[("session", "s2"), ("through", "summary"),
                                            ("predecessor", "s1")])
        assert (await response.json())["dropped"] == {"copy": "reply"}
    finally:
        await client.close()
