"""Files over the HTTP API (docs/guides/files.md): a message's files in base64 JSON
or as multipart parts, stored once and shown to the model; ``GET /v1/files/{digest}``
behind the same token and Host checks, never serving a page that could run."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

from runtime import (
    EchoProvider,
    FilesConfig,
    Runtime,
    ScriptedProvider,
    SQLiteStore,
    ToolRegistry,
)
from tests.http_helpers import served
from tests.samples import export, png

TOKEN = "files-token-0123456789"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def test_a_message_with_files_in_json_and_in_multipart(tmp_path: Path) -> None:
    shot = png(320, 200)
    async with SQLiteStore(tmp_path / "m.db") as store, Runtime(store, EchoProvider()) as rt, \
            served(rt, token=TOKEN) as (client, _):
        answer = await client.post("/v1/threads/t1/messages", json={
            "text": "what is this?", "files": [
                {"name": "shot.png", "media_type": "image/png", "data": b64(shot)},
                {"name": "notes.md", "data": b64(b"# notes\n")}]})
        assert answer.status_code == 200, answer.text
        reply = answer.json()["reply"]
        assert "[received shot.png (image/png, 320x200, " in reply
        assert "[received notes.md (text/markdown, 8 bytes), shown as" in reply

        parted = await client.post("/v1/threads/t2/messages", data={
            "message": json.dumps({"text": "and this?"})}, files=[
                ("file", ("again.png", shot, "image/png")),
                ("file", ("log.txt", b"error: disk full\n", "text/plain"))])
        assert parted.status_code == 200, parted.text
        assert "[received again.png (image/png, 320x200, " in parted.json()["reply"]
        assert "[received log.txt (text/plain, 17 bytes)" in parted.json()["reply"]
        assert len(await store.blobs()) == 3  # the picture once, though sent twice

        digest = hashlib.sha256(shot).hexdigest()
        got = await client.get(f"/v1/files/{digest}")
        assert got.status_code == 200 and got.content == shot
        assert got.headers["content-type"] == "image/png"
        assert got.headers["x-content-type-options"] == "nosniff"
        assert got.headers["content-disposition"].startswith("inline")
        log_digest = hashlib.sha256(b"error: disk full\n").hexdigest()
        log = await client.get(f"/v1/files/{log_digest}", params={"name": "log.txt"})
        assert log.headers["content-type"] == "application/octet-stream"  # never text/html
        assert log.headers["content-disposition"] == 'attachment; filename="log.txt"'
        assert "sandbox" in log.headers["content-security-policy"]

        assert (await client.get("/v1/files/" + "0" * 64)).status_code == 404
        assert (await client.get("/v1/files/..%2F..%2Fetc%2Fpasswd")).status_code == 404
        assert (await client.get(f"/v1/files/{digest}",
                                 headers={"Authorization": ""})).status_code == 401
        port = client.base_url.port
        rebound = await client.get(f"/v1/files/{digest}",
                                   headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 400


async def test_files_over_the_limits_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    limits = FilesConfig(max_bytes=2_000, max_per_message=2, allowed_types=["text/*", "image/*"])
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, EchoProvider(), files=limits) as rt, \
            served(rt, token=TOKEN) as (client, _):
        def post(*files: dict[str, str]) -> object:
            return client.post("/v1/threads/t/messages", json={"text": "x", "files": list(files)})

        big = await post({"name": "big.txt", "data": b64(b"x" * 3_000)})  # type: ignore[misc]
        assert big.status_code == 413 and "big.txt" in big.json()["detail"]
        exe = await post({"name": "a.exe", "media_type": "application/x-msdownload",
                          "data": b64(b"MZ")})  # type: ignore[misc]
        assert exe.status_code == 415 and "allowed_types" in exe.json()["detail"]
        bad = await post({"name": "a.txt", "data": "not base64!"})  # type: ignore[misc]
        assert bad.status_code == 422 and "a.txt" in bad.json()["detail"]
        many = await post(*[{"name": f"{i}.txt", "data": b64(b"x")} for i in range(3)])  # type: ignore[misc]
        assert many.status_code == 422 and "max_per_message" in many.json()["detail"]
        for count in (3, 5):  # by one, and by more: as the JSON form is told
            parts = await client.post("/v1/threads/t/messages", data={
                "message": json.dumps({"text": "x"})}, files=[
                    ("file", (f"{i}.txt", b"x", "text/plain")) for i in range(count)])
            assert parts.status_code == 422, parts.text
            assert parts.json()["code"] == "file_refused"
            assert "max_per_message" in parts.json()["detail"]
        no_json = await client.post("/v1/threads/t/messages", files=[
            ("file", ("a.txt", b"x", "text/plain"))])
        assert no_json.status_code == 422 and "'message'" in no_json.json()["detail"]
        assert await rt.records.runs() == []
        assert len(await store.blobs()) == 0



async def test_a_file_a_tool_made_is_a_download_link_on_the_run(tmp_path: Path) -> None:
    script = ScriptedProvider([{"tool_calls": [{"name": "export", "arguments": {}}]},
                               {"text": "Here."}])
    async with SQLiteStore(tmp_path / "m.db") as store, \
            Runtime(store, script, ToolRegistry([export])) as rt, \
            served(rt, token=TOKEN) as (client, _):
        answer = (await client.post("/v1/threads/t/messages", json={"text": "go"})).json()
        (made,) = answer["files"]
        assert (made["name"], made["media_type"], made["size"]) == ("report.csv", "text/csv", 8)
        assert made["url"] == f"/v1/files/{made['digest']}?name=report.csv"
        got = await client.get(made["url"])
        assert got.content == b"a,b\n1,2\n"
        assert got.headers["content-disposition"] == 'attachment; filename="report.csv"'
        run = (await client.get(f"/v1/runs/{answer['run_id']}")).json()
        assert run["files"] == answer["files"]
