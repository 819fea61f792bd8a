"""``torchport serve`` and ``torchport report`` as users run them (the installed script from a
temp folder): the bind rule, the token, a taken port, and the one-file report's size and
self-containment on a 200-case run."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import urllib.error
import urllib.request

import pytest

from tests import kb
from tests.conftest import TORCHPORT, torchport
from tests.synthetic_kb import whole_run_kb  # synthetic hf results, as benchmarks/web_pages.py's


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    path = kb.build(tmp_path_factory.mktemp("servecli") / "kb.db", labels={"release": "a"})
    return kb.build(path, run_id="r2", labels={"release": "b"})


def _one_line(proc, code: int, needle: str) -> None:
    assert proc.returncode == code, (proc.stdout[-2000:], proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], proc.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.7", "myhost.example"])
def test_non_local_bind_without_token_is_refused(kb_path, host):
    proc = torchport("serve", "--db", kb_path, "--host", host, timeout=60)
    _one_line(proc, 2, f"--host {host} is reachable from other machines: pass --token")


def test_bad_database_and_taken_port_are_one_line(kb_path, tmp_path):
    _one_line(torchport("serve", "--db", tmp_path / "none.db", timeout=60), 2, "none.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = torchport("serve", "--db", kb_path, "--port", port, timeout=60)
    _one_line(proc, 2, f"cannot listen on 127.0.0.1:{port}")


def _get(url: str, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_served_with_a_token_every_request_needs_it(kb_path):
    proc = subprocess.Popen(
        [TORCHPORT, "serve", "--db", kb_path, "--host", "0.0.0.0", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, TORCHPORT_TOKEN="t0ken"),
    )
    try:
        line = proc.stdout.readline()
        assert "requests need the token" in line, (line, proc.stderr.read() if proc.poll() else "")
        port = re.search(r":(\d+)/", line).group(1)
        base = f"http://127.0.0.1:{port}"
        assert _get(base + "/runs.json")[0] == 401
        status, body = _get(base + "/runs.json", {"Authorization": "Bearer t0ken"})
        assert status == 200 and [row[0] for row in json.loads(body)["views"]["runs"]["rows"]] == [
            "r2",
            "r1",
        ]
        assert _get(base + "/runs/r1?token=t0ken")[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)


SECURITY_HEADERS = (
    b"content-security-policy:",
    b"x-frame-options: deny",
    b"x-content-type-options: nosniff",
    b"referrer-policy: no-referrer",
)


def _raw(port: int, request: bytes) -> bytes:
    """What the server answers to ``request`` sent as bytes on a socket of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and b"connection: close" not in answer.lower():
                break
    return answer


MALFORMED_REQUEST_LINES = (
    b"GET /\xff HTTP/1.1",  # a raw non-ASCII byte: uvicorn's (h11's) own 400
    b"GET / HTTP/1.1 extra",
    b"\x16\x03\x01 TLS",  # a TLS hello sent to the plain port
)


def test_uvicorns_own_answer_to_a_malformed_request_has_the_security_headers(kb_path):
    """Issue 44 (4): the "400 Invalid HTTP request" uvicorn makes before the application
    sees a request carries the headers every answer promises, as the application's do."""
    proc = subprocess.Popen(
        [TORCHPORT, "serve", "--db", kb_path, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        port = int(re.search(r":(\d+)/", line).group(1))
        answers = [
            _raw(port, request_line + b"\r\nHost: localhost\r\n\r\n").lower()
            for request_line in MALFORMED_REQUEST_LINES
        ]
        assert all(bad.startswith(b"http/1.1 400") for bad in answers), answers
        good = _raw(port, b"GET /runs.json HTTP/1.1\r\nHost: localhost\r\n\r\n").lower()
        assert good.startswith(b"http/1.1 200"), good[:200]
        for answer in (*answers, good):
            head = answer.split(b"\r\n\r\n", 1)[0]
            for header in SECURITY_HEADERS:
                assert header in head, (header, head)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_report_html_and_markdown(kb_path, tmp_path):
    out = torchport(
        "report", "r2", "--compare", "r1", "-o", "r.html", "--db", kb_path, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert "report of run r2 compared to r1: r.html" in out.stdout
    text = (tmp_path / "r.html").read_text()
    assert "<title>Run r2 / Compare r1 -&gt; r2 · torchport</title>" in text
    assert 'data-view="status-transitions"' in text and 'data-view="matrix"' in text
    assert not re.search(r"""(src|href)=["'](?!#|data:)""", text)  # nothing to fetch, no links
    assert "uPlot" in text and 'class="chart-data"' in text
    md = torchport("report", "release=b", "-o", "r.md", "--db", kb_path, cwd=tmp_path)
    assert md.returncode == 0, md.stderr
    body = (tmp_path / "r.md").read_text()
    assert body.startswith("# Run r2\n") and "| case | eager | compile |" in body
    assert "| hf/llama | eager_fail @run (Could not run 'aten::empty_strided'" in body
    _one_line(
        torchport("report", "nope", "-o", "x.html", "--db", kb_path, cwd=tmp_path),
        2,
        "no run 'nope'",
    )
    assert not (tmp_path / "x.html").exists()


def test_report_of_a_200_case_run_is_under_2_mb(tmp_path):
    path = whole_run_kb(str(tmp_path / "kb.db"), 400)  # 200 cases, eager and compile
    out = torchport("report", "whole", "-o", tmp_path / "big.html", "--db", path)
    assert out.returncode == 0, out.stderr
    size = (tmp_path / "big.html").stat().st_size
    text = (tmp_path / "big.html").read_text()
    assert 'data-view="matrix"' in text and 'data-view="perf"' in text
    assert text.count("<tr>") > 400
    assert size < 2 * 1024 * 1024, size
    print(f"report of a 200-case run (400 results): {size / 1024:.0f} KiB")
