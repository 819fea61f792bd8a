"""The web application in-process (Starlette's TestClient) over knowledge bases written through
the store: every page and its JSON twin, links, paging, the token gate, and stored text that
tries to be markup. The browser tests (test_browser.py) load the same pages in Chromium."""

from __future__ import annotations

import html
import re

import pytest
from starlette.testclient import TestClient

from tests import kb
from tests.interfaces.web.twin import shown
from torchport.interfaces.web import pages
from torchport.interfaces.web.app import create_app
from torchport.kb import open_store
from torchport.views.compare import compare_runs

HOSTILE = "<script>alert(1)</script>"
# The TestClient's default host is "testserver", which the guard does not answer.
LOCAL = "http://localhost"


@pytest.fixture(scope="module")
def kb_path(tmp_path_factory):
    path = kb.build(tmp_path_factory.mktemp("web") / "kb.db", labels={"release": "a"})
    second = kb.results()
    second[0] = dict(
        second[0],
        status="crash",
        stage="run",
        error={
            "type": "Crash",
            "message": "worker died: signal 11",
            "traceback": "Traceback (most recent call last):\n  worker.py",
        },
    )
    kb.build(path, run_id="r2", labels={"release": "b", "note": HOSTILE}, results_=second)
    with open_store(path, write=True) as store:
        store.add_note("r2", f"accepted: {HOSTILE}", case="smoke/mlp", author="ana")
    return path


@pytest.fixture(scope="module")
def client(kb_path):
    with open_store(kb_path, write=False) as store:
        yield TestClient(create_app(store), base_url=LOCAL)


def _tables(text: str) -> dict[str, dict]:
    """The tables of a page as shown: section name -> title, header and cell texts."""
    out = {}
    for name, body in re.findall(
        r'<section class="view" data-view="([^"]+)".*?>(.*?)</section>', text, re.S
    ):
        title = re.search(r"<h2>(.*?)</h2>", body, re.S).group(1)
        head = re.findall(r"<th data-kind=\"[^\"]*\">(.*?)</th>", body, re.S)
        rows = [
            [
                " ".join(html.unescape(re.sub(r"<[^>]+>", "", c)).split())
                for c in re.findall(r"<td[^>]*>(.*?)</td>", tr, re.S)
            ]
            for tr in re.findall(r"<tr>(.*?)</tr>", body.split("</thead>")[-1], re.S)
        ]
        notes = [
            " ".join(html.unescape(n).split()) for n in re.findall(r"<li>(.*?)</li>", body, re.S)
        ]
        out[name] = {
            "title": html.unescape(title),
            "columns": [html.unescape(h) for h in head],
            "rows": rows,
            "notes": notes,
        }
    return out


PAGES = [
    "/",
    "/?device=cpu&label=release%3Db",
    "/runs/r1",
    "/cases/smoke/mlp",
    "/cases/hf/gpt2",
    "/compare?a=r1&b=r2",
    "/compare?a=release%3Da&b=release%3Db",
    "/compare?a=r1&b=r2&list=newly_failing",
    "/ops/cumsum",
    "/search?q=llama",
    "/search?q=accepted",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_and_its_json_twin_show_the_same_tables(client, path):
    page = client.get(path)
    assert page.status_code == 200, page.text[:500]
    assert page.headers["content-type"].startswith("text/html")
    base, _, query = path.partition("?")
    twin = client.get((base.rstrip("/") or "/runs") + ".json" + (f"?{query}" if query else ""))
    assert twin.headers["content-type"] == "application/json"
    data = twin.json()
    assert client.get(path, headers={"Accept": "application/json"}).json() == data
    tables = _tables(page.text)
    assert list(tables) == list(data["views"]) and tables
    for name, view in data["views"].items():
        assert tables[name] == shown(view), name
    for chart in data["charts"]:
        assert f'id="chart-{chart["id"]}"' in page.text


def test_run_page_matrix_coloured_by_status_with_grade_marks(client):
    text = client.get("/runs/r1").text
    data = client.get("/runs/r1.json").json()
    assert data["run"]["labels"] == {"release": "a"} and "plan" not in data["run"]
    assert data["environments"][0]["torch"] == "2.13.0"
    assert {
        "matrix",
        "coverage",
        "failures",
        "placement",
        "host_ops",
        "compile",
        "perf",
        "train",
        "loss",
        "profile",
    } <= set(data["views"])
    assert 'class="st-pass gr-fallback"' in text  # mlp compile: a pass with host ops
    assert 'class="st-accuracy_fail gr-host"' in text
    # each status's colour comes from records/status.py, inlined in the page
    assert ".st-accuracy_fail { background: var(--fail); }" in text
    assert ".st-crash { background: var(--dead); }" in text
    assert '<a href="/cases/smoke/mlp">smoke/mlp</a>' in text
    assert '<a href="/ops/cumsum">cumsum</a>' in text
    assert 'href="/compare?a=r2&amp;b=r1"' in text
    charts = {c["id"]: c for c in data["charts"]}
    assert set(charts) == {"coverage", "throughput", "compile", "loss-0"}
    assert charts["throughput"]["series"][0]["values"][0] == pytest.approx(1000 / 2.71, rel=1e-3)
    assert charts["compile"]["series"][0]["values"][0] == 12.3


def test_case_page_history_parity_traceback_and_notes(client):
    data = client.get("/cases/smoke/mlp.json").json()
    history = data["views"]["history"]
    assert [row[0] for row in history["rows"]] == ["r1", "r1", "r2", "r2"]
    assert data["latest_failure"]["error"]["message"] == "worker died: signal 11"
    assert data["compare"] == [{"a": "r1", "b": "r2", "href": "/compare?a=r1&b=r2"}]
    assert data["views"]["notes"]["rows"][0][-1] == f"accepted: {HOSTILE}"
    assert {c["id"] for c in data["charts"]} == {"history-step"}  # no compile figures here
    text = client.get("/cases/smoke/mlp").text
    assert '<pre class="traceback">Traceback (most recent call last):\n  worker.py' in text
    assert "compile ran past 3 s" in client.get("/cases/hf/llama").text  # the newest failure


def test_compare_page_links_each_changed_case(client):
    data = client.get("/compare.json?a=r1&b=r2").json()
    assert data["common"] == 8
    assert data["views"]["newly-failing"]["rows"][0][:2] == ["smoke/mlp", "eager"]
    text = client.get("/compare?a=r1&b=r2").text
    section = text.split('data-view="newly-failing"')[1].split("</section>")[0]
    assert '<a href="/cases/smoke/mlp">smoke/mlp</a>' in section


def test_a_long_list_is_linked_and_paged_on_its_own(tmp_path, monkeypatch):
    """The compare page shows each list's first rows and links a list that holds more; that
    list's page shows it a page at a time, the same rows as the whole comparison."""
    path = kb.build(tmp_path / "kb.db")
    failing = [
        dict(r, status="eager_fail", stage="run", error={"type": "E", "message": "boom"})
        if r["status"] == "pass"
        else r
        for r in kb.results()
    ]
    kb.build(path, run_id="r2", results_=failing)
    monkeypatch.setattr(pages, "LIST_ROWS", 1)
    monkeypatch.setattr(pages, "PAGE_ROWS", 2)
    with open_store(path, write=False) as store:
        whole = compare_runs(store, "r1", "r2")
        client = TestClient(create_app(store), base_url=LOCAL)
        first = client.get("/compare.json?a=r1&b=r2").json()
        every = [e["case"] for e in whole.newly_failing]
        assert len(every) > 2 and first["views"]["newly-failing"]["rows"][0][0] == every[0]
        [more] = [m for m in first["more"] if m["list"] == "newly_failing"]
        assert more["rows"] == len(every)
        assert more["href"] in client.get("/compare?a=r1&b=r2").text.replace("&amp;", "&")
        seen, href = [], more["href"]
        while href:
            page = client.get(href.replace("/compare?", "/compare.json?")).json()
            rows = page["views"]["newly-failing"]["rows"]
            assert 0 < len(rows) <= 2 and list(page["views"])[:2] == list(first["views"])[:2]
            seen += [r[0] for r in rows]
            href = page["paging"]["next"]
        assert seen == every
        assert client.get("/compare?a=r1&b=r2&list=nope").status_code == 404


def test_stored_markup_is_shown_as_text(client):
    for path in ("/", "/cases/smoke/mlp", "/compare?a=r1&b=r2", "/search?q=accepted"):
        text = client.get(path).text
        assert HOSTILE not in text and html.escape(HOSTILE, quote=False) in text, path


def test_paging_and_op_page(client, monkeypatch):
    monkeypatch.setattr(pages, "PAGE_ROWS", 1)
    first = client.get("/search.json?q=llama").json()
    assert first["paging"]["total"] == 4 and first["paging"]["shown"] == 1
    assert first["paging"]["next"] == "/search?q=llama&offset=1" and first["paging"]["prev"] is None
    second = client.get("/search.json?q=llama&offset=1").json()
    assert second["views"]["results"]["rows"] != first["views"]["results"]["rows"]
    op = client.get("/ops/cumsum.json").json()
    assert op["op"] == "aten.cumsum" and op["paging"]["total"] == 2
    assert [row[0] for row in op["views"]["runs"]["rows"]] == ["r2", "r1"]


def test_large_run_shows_a_summary_a_page_at_a_time(client, monkeypatch):
    monkeypatch.setattr(pages, "FULL_VIEWS_UP_TO", 4)
    monkeypatch.setattr(pages, "PAGE_ROWS", 3)
    data = client.get("/runs/r1.json?offset=3").json()
    assert data["summary"] and data["charts"] == []
    assert set(data["views"]) == {"summary", "common_failures", "worst_failures", "results"}
    assert len(data["views"]["results"]["rows"]) == 3
    assert (
        data["paging"]["prev"] == "/runs/r1?offset=0"
        and data["paging"]["next"] == "/runs/r1?offset=6"
    )


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("/runs/nope", "no run 'nope'"),
        ("/cases/hf/none", "no results for case 'hf/none'"),
        ("/compare?a=r1&b=release%3Dzz", "no complete run matches release=zz"),
        ("/compare?a=r1", "compare needs two runs"),
    ],
)
def test_unknown_things_are_404_with_the_reason(client, path, needle):
    page = client.get(path)
    assert page.status_code == 404 and needle in html.unescape(page.text)
    assert (
        client.get(path, headers={"Accept": "application/json"})
        .json()["error"]
        .startswith(needle[:8])
    )


def _trace_kb(tmp_path, recorded: str) -> str:
    result = dict(kb.results()[0])
    result["findings"] = dict(result["findings"], profile=dict(kb.PROFILE, trace=recorded))
    return kb.build(tmp_path / "t.db", results_=[result])


def test_trace_link_serves_only_the_recorded_file(tmp_path):
    folder = tmp_path / "artifacts"
    folder.mkdir()
    trace = folder / "profile-smoke_mlp-eager-0123456789ab.json"
    trace.write_text('{"traceEvents": []}')
    path = _trace_kb(tmp_path, str(trace))
    with open_store(path, write=False) as store:
        client = TestClient(create_app(store, artifacts=str(folder)), base_url=LOCAL)
        text = client.get("/runs/r1").text
        href = html.unescape(re.search(r'<a href="([^"]*/trace\?[^"]*)"', text).group(1))
        assert client.get(href).json() == {"traceEvents": []}
        missing = client.get("/runs/r1/trace?case=smoke/mlp&mode=compile")
        assert missing.status_code == 404
    trace.unlink()
    with open_store(path, write=False) as store:
        gone = TestClient(create_app(store, artifacts=str(folder)), base_url=LOCAL).get(href)
        assert gone.status_code == 404 and "is not on this machine" in gone.text


SECRET = "root:x:0:0:the server's own file"


@pytest.mark.parametrize("where", ["outside", "symlink", "fifo", "named_like_a_trace"])
def test_a_recorded_path_never_chooses_the_file_served(tmp_path, where):
    """Issue 35 (1): a stored or imported trace path naming any file on the server (its
    password file) is not served; only a regular file in the artifacts folder is."""
    import os

    folder = tmp_path / "artifacts"
    folder.mkdir()
    secret = tmp_path / "passwd"
    secret.write_text(SECRET)
    name = "profile-smoke_mlp-eager-0123456789ab.json"
    recorded = {
        "outside": str(secret),
        "symlink": str(folder / name),
        "fifo": str(folder / name),
        # the right name, in another folder: the server still reads only its own folder
        "named_like_a_trace": str(tmp_path / name),
    }[where]
    if where == "symlink":
        os.symlink(secret, folder / name)
    elif where == "fifo":
        os.mkfifo(folder / name)
    elif where == "named_like_a_trace":
        (tmp_path / name).write_text(SECRET)
    with open_store(_trace_kb(tmp_path, recorded), write=False) as store:
        client = TestClient(create_app(store, artifacts=str(folder)), base_url=LOCAL)
        answer = client.get("/runs/r1/trace?case=smoke/mlp&mode=eager")
    assert answer.status_code == 404 and SECRET not in answer.text


def test_other_hosts_are_refused_and_every_answer_has_the_security_headers(client):
    """Issue 35 (2): DNS rebinding (a foreign name in Host) gets 400; every response,
    errors included, carries CSP without inline script, frame denial, nosniff, no referrer."""
    foreign = client.get("/runs", headers={"Host": "attacker.example"})
    assert foreign.status_code == 400 and "does not answer for host" in foreign.text
    for path in ("/runs", "/runs/r1.json", "/runs/nope", "/static/app.css", "/search?offset=x"):
        for answer in (client.get(path), client.get(path, headers={"Host": "evil.example:80"})):
            csp = answer.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("style-src")[0]
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["referrer-policy"] == "no-referrer"
    assert client.get("/runs", headers={"Host": "127.0.0.1:8000"}).status_code == 200
    assert client.get("/runs", headers={"Host": "[::1]:8000"}).status_code == 200


@pytest.mark.parametrize(
    "host",
    [
        "localhost:8000.evil.com",
        "localhost:8000@evil.com",
        "[::1].evil.com",
        "[::1]:8000.evil.com",
        "localhost:",
        "localhost:http",
        "localhost:80:80",
        "127.0.0.1:8000/evil",
        "::1",  # an IPv6 address is bracketed in Host
        "localhost evil.com",
        "",
    ],
)
def test_a_host_is_a_name_and_a_numeric_port_or_refused(client, host):
    """Issue 44 (4): only ``name`` or ``name:port`` with a numeric port is a Host; the
    part after ':' was not checked to be a port."""
    answer = client.get("/runs", headers={"Host": host})
    assert answer.status_code == 400 and "does not answer for host" in answer.text
    assert answer.headers["x-frame-options"] == "DENY"


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8000", "127.0.0.1:1", "[::1]"])
def test_the_local_names_with_or_without_a_port_are_answered(client, host):
    assert client.get("/runs", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("path", ["/x", "/x.json", "/runs/r1/nothing.json", "/static/none.js"])
def test_a_missing_page_is_the_error_page_and_its_json_twin_is_json(client, path):
    """Issue 44 (4): a path no route has answers like every other error: HTML, or JSON for
    a ``.json`` twin (it answered text/plain), with the security headers."""
    answer = client.get(path)
    assert answer.status_code == 404
    assert answer.headers["x-content-type-options"] == "nosniff"
    if path.endswith(".json"):
        assert answer.headers["content-type"].startswith("application/json")
        assert set(answer.json()) == {"error"}
    else:
        assert answer.headers["content-type"].startswith("text/html")
    wants_json = client.get(path, headers={"Accept": "application/json"})
    assert wants_json.headers["content-type"].startswith("application/json")


def test_an_error_inside_the_application_is_a_500_with_the_security_headers():
    """The guard is outside Starlette's own 500 page too (a middleware added the usual way
    sits inside it): a store that fails in an unforeseen way still gets the headers."""

    class Broken:
        def __getattr__(self, name):
            raise RuntimeError("the store broke")

    client = TestClient(create_app(Broken()), base_url=LOCAL, raise_server_exceptions=False)
    answer = client.get("/runs")
    assert answer.status_code == 500 and "the store broke" not in answer.text
    assert answer.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in answer.headers["content-security-policy"]


def test_the_bound_name_is_answered_too(kb_path):
    from torchport.interfaces.web.guard import allowed_hosts

    with open_store(kb_path, write=False) as store:
        app = create_app(store, hosts=allowed_hosts("myhost.lan"))
        assert TestClient(app, base_url="http://myhost.lan:8000").get("/runs").status_code == 200
        assert TestClient(app, base_url="http://other.lan").get("/runs").status_code == 400
    assert allowed_hosts("0.0.0.0") is None  # every address: the token (required) guards


@pytest.mark.parametrize(
    "path",
    [
        "/search?q=mlp&offset=99999999999999999999",
        "/search?q=mlp&offset=-1",
        "/search?q=mlp&offset=x",
        "/runs/r1?offset=99999999999999999999",
        "/ops/aten.cumsum?offset=1e3",
        "/compare?a=r1&b=r2&list=steps&offset=99999999999999999999",
    ],
)
def test_paging_out_of_range_is_400_with_a_short_message(client, path):
    """Issue 35 (9): no 500, no silent 0."""
    answer = client.get(path)
    assert answer.status_code == 400 and "offset must be a whole number" in html.unescape(
        answer.text
    )


def test_a_nul_in_the_search_text_is_no_sql_error(client):
    answer = client.get("/search?q=%00")
    assert answer.status_code in (200, 400), answer.text
    assert "sqlite" not in answer.text.lower() and "syntax" not in answer.text.lower()


def test_token_gate(kb_path):
    with open_store(kb_path, write=False) as store:
        client = TestClient(create_app(store, token="s3cret"), base_url=LOCAL)
        refused = client.get("/runs/r1.json")
        assert refused.status_code == 401 and "needs its token" in refused.text
        assert client.get("/static/app.css").status_code == 401
        assert client.get("/runs/r1.json?token=wrong").status_code == 401
        assert (
            client.get("/runs/r1.json", headers={"Authorization": "Bearer s3cret"}).status_code
            == 200
        )
        assert client.get("/", headers={"X-Torchport-Token": "s3cret"}).status_code == 200
        client.cookies.clear()
        first = client.get("/runs/r1?token=s3cret")  # a browser's first visit
        assert first.status_code == 200 and "s3cret" not in first.headers["set-cookie"]
        assert client.get("/cases/smoke/mlp").status_code == 200  # the cookie carries it
        client.cookies.clear()
        assert client.get("/cases/smoke/mlp").status_code == 401


def test_compare_is_kept_until_a_run_changes_and_notes_are_fresh(tmp_path, monkeypatch):
    path = kb.build(tmp_path / "kb.db")
    kb.build(path, run_id="r2", results_=kb.results()[:-1])
    joins = []
    with open_store(path, write=False) as store:
        real = store.compare

        def compare(*a, **k):  # a read that joined the runs, not only read their versions
            got = real(*a, **k)
            return joins.append(a) if not got["unchanged"] else None, got

        monkeypatch.setattr(store, "compare", lambda *a, **k: compare(*a, **k)[1])
        client = TestClient(create_app(store), base_url=LOCAL)
        first = client.get("/compare.json?a=r1&b=r2").json()
        assert client.get("/compare.json?a=r1&b=r2").json() == first
        assert len(joins) == 1  # the second look came from the memo
        with open_store(path, write=True) as writer:
            writer.add_note("r2", "looked at it", author="ana")
        noted = client.get("/compare.json?a=r1&b=r2").json()
        assert len(joins) == 1 and noted["views"]["notes"]["rows"][0][-1] == "looked at it"
        with open_store(path, write=True) as writer:  # a resumed run records its last result
            writer.update_run("r2", state="running")
            writer.add_results("r2", [kb.results()[-1]])
            writer.update_run("r2", state="complete")
        after = client.get("/compare.json?a=r1&b=r2").json()
        assert len(joins) == 2 and after["common"] == first["common"] + 1
        client.get("/compare.json?a=r2&b=r1")
        assert len(joins) == 3  # the other direction is its own comparison


def test_the_markdown_report_shows_stored_markup_as_text(tmp_path):
    """Issue 35 (11): stored HTML went into the Markdown report as it was, and a Markdown
    renderer passes raw HTML through. Rendered (CommonMark, markdown-it), every stored
    field reads as text: no tag, no link, no image."""
    from markdown_it import MarkdownIt

    from torchport.interfaces.web.report import markdown_report, report_pages

    evil = "<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3))"
    results = kb.results()
    results[0] = dict(
        results[0],
        status="crash",
        stage="run",
        error={"type": "Crash", "message": evil, "traceback": evil},
    )
    path = kb.build(
        tmp_path / "md.db",
        labels={"release": evil},
        command=f"torchport run `{evil}`",
        results_=results,
    )
    with open_store(path, write=False) as store:
        text = markdown_report(report_pages(store, "r1"))
    rendered = MarkdownIt("commonmark").render(text)
    assert "<script" not in rendered and "<img" not in rendered
    assert 'href="javascript' not in rendered
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered  # shown, as text


def test_an_imported_run_serves_no_trace(tmp_path):
    """Issue 35 (1): an imported run's trace path is never looked up, not even by name."""
    import io

    from torchport.kb.exchange import export_runs, import_file

    folder = tmp_path / "artifacts"
    folder.mkdir()
    name = "profile-smoke_mlp-eager-0123456789ab.json"
    (folder / name).write_text('{"traceEvents": []}')  # a trace this machine wrote
    source = _trace_kb(tmp_path, f"/elsewhere/{name}")
    out = io.StringIO()
    with open_store(source, write=False) as store:
        export_runs(store, ["r1"], out)
    (tmp_path / "r1.jsonl").write_text(out.getvalue())
    target = str(tmp_path / "imported.db")
    with open_store(target, write=True) as store:
        import_file(store, str(tmp_path / "r1.jsonl"))
    with open_store(target, write=False) as store:
        client = TestClient(create_app(store, artifacts=str(folder)), base_url=LOCAL)
        answer = client.get("/runs/r1/trace?case=smoke/mlp&mode=eager")
    assert answer.status_code == 404 and "imported" in answer.text


def test_runs_and_run_pages_carry_the_headline_as_badges(client, kb_path):
    runs = client.get("/runs.json").json()
    head = next(row[-1] for row in runs["views"]["runs"]["rows"] if row[0] == "r1")
    assert runs["views"]["runs"]["columns"][-1]["name"] == "headline"
    assert head["host_results"] == 2 and head["badges"]["accuracy"]["tone"] == "bad"
    text = client.get("/").text
    assert 'class="badge tone-warn" data-badge="fallback"' in text
    assert html.escape(head["badges"]["fallback"]["text"], quote=False) in text
    run = client.get("/runs/r1.json").json()
    assert run["headline"]["badges"] == head["badges"]
    assert 'data-badge="speedup"' in client.get("/runs/r1").text


def test_report_keeps_its_css_as_css_and_names_the_headline(kb_path, tmp_path):
    from torchport.interfaces.web.html import inline_assets
    from torchport.interfaces.web.report import html_report, markdown_report, report_pages

    with open_store(kb_path, write=False) as store:
        pages_ = report_pages(store, "r2", "r1")
    report = html_report(pages_)
    assert f"<style>{inline_assets()['css']}</style>" in report
    assert "&#34;" not in report.split("</style>")[0]
    md = markdown_report(pages_)
    assert "- headline: 2/8 pass" in md and "host fallback" in md


def test_search_page_lists_host_op_hits_first(client):
    page = client.get("/search.json", params={"q": "cumsum"}).json()
    assert list(page["views"])[:2] == ["host_op_runs", "host_op_results"]
    assert {row[0] for row in page["views"]["host_op_runs"]["rows"]} == {"r1", "r2"}
