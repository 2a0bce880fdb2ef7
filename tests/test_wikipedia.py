"""The Wikipedia fetcher against a local HTTP server that plays recorded MediaWiki answers (tests/fixtures/wikipedia):
real HTTP through requests, no network."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from polarcatalog.data.wikipedia import WikipediaError, WikipediaFetcher

FIXTURES = Path(__file__).parent / "fixtures" / "wikipedia"


class Recorded:
    """titles -> a queue of (status, headers, fixture file); the last answer repeats. Logs every request."""

    def __init__(self, script: dict[str, list[tuple[int, dict, str]]]):
        self.script, self.log = script, []

    def answer(self, query: dict[str, list[str]]) -> tuple[int, dict, bytes]:
        titles = query["titles"][0]
        self.log.append((titles, query))
        queue = self.script[titles]
        status, headers, name = queue.pop(0) if len(queue) > 1 else queue[0]
        return status, headers, (FIXTURES / name).read_bytes()


@pytest.fixture
def server():
    started = []

    def start(script):
        recorded = Recorded(script)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                status, headers, body = recorded.answer(parse_qs(urlparse(self.path).query))
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        started.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/w/api.php", recorded

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def fetcher(api, cache, sleeps=None, **kw):
    return WikipediaFetcher(cache, api=api, min_interval_s=0.0, backoff_s=0.5, retries=3,
                            sleep=(sleeps.append if sleeps is not None else (lambda s: None)), **kw)


def test_success_text_images_and_the_request_the_api_needs(server, tmp_path):
    api, rec = server({"Black-footed albatross": [(200, {}, "black_footed_albatross.json")]})
    art = fetcher(api, tmp_path).article("Black-footed albatross")
    assert art.title == "Black-footed albatross" and not art.missing and art.redirected_from is None
    assert art.text.startswith("The black-footed albatross (Phoebastria nigripes)")
    assert art.images == ["File:Black-footed Albatross (Phoebastria nigripes).jpg", "File:Phoebastria nigripes map.svg"]
    q = rec.log[0][1]
    assert {k: v[0] for k, v in q.items()} == {"format": "json", "formatversion": "2", "action": "query",
                                              "prop": "extracts|images", "explaintext": "1", "redirects": "1",
                                              "imlimit": "max", "titles": "Black-footed albatross"}


def test_missing_page_and_redirect(server, tmp_path):
    api, _ = server({"Snowy puffbird of atlantis": [(200, {}, "missing.json")],
                     "Laysan Albatross": [(200, {}, "laysan_redirect.json")]})
    f = fetcher(api, tmp_path)
    gone = f.article("Snowy puffbird of atlantis")
    assert gone.missing and gone.text == "" and gone.images == []
    moved = f.article("Laysan Albatross")
    assert (moved.query, moved.title, moved.redirected_from) == ("Laysan Albatross", "Laysan albatross", "Laysan Albatross")
    assert "white head" in moved.text


def test_rate_limit_waits_retry_after_then_backs_off_exponentially(server, tmp_path):
    api, rec = server({"Black-footed albatross": [(429, {"Retry-After": "7"}, "rate_limited.json"),
                                                   (503, {}, "rate_limited.json"), (503, {}, "rate_limited.json"),
                                                   (200, {}, "black_footed_albatross.json")]})
    sleeps: list[float] = []
    f = fetcher(api, tmp_path, sleeps)
    assert f.article("Black-footed albatross").title == "Black-footed albatross"
    assert sleeps == [7.0, 1.0, 2.0]  # Retry-After, then backoff 0.5 * 2**attempt (attempts 1, 2)
    assert len(rec.log) == 4 and f.retried == 3


def test_gives_up_after_the_retries_naming_the_status(server, tmp_path):
    api, rec = server({"Black-footed albatross": [(503, {}, "rate_limited.json")]})
    with pytest.raises(WikipediaError, match=r"gave up after 4 attempts \(HTTP 503\).*cache"):
        fetcher(api, tmp_path).article("Black-footed albatross")
    assert len(rec.log) == 4
    assert not list(tmp_path.rglob("*.json"))  # nothing cached for a failure


def test_cache_makes_a_rerun_free_and_resumes(server, tmp_path):
    api, rec = server({"Black-footed albatross": [(200, {}, "black_footed_albatross.json")],
                       "Laysan Albatross": [(200, {}, "laysan_redirect.json")],
                       "Snowy puffbird of atlantis": [(200, {}, "missing.json")]})
    first = fetcher(api, tmp_path)
    first.articles(["Black-footed albatross", "Snowy puffbird of atlantis"])
    assert first.requests == 2
    again = fetcher(api, tmp_path)  # a restarted run: the cached two cost nothing, the new one is fetched
    got = again.articles(["Black-footed albatross", "Snowy puffbird of atlantis", "Laysan Albatross", "Laysan Albatross"])
    assert again.requests == 1 and len(rec.log) == 3
    assert got["Snowy puffbird of atlantis"].missing and got["Laysan Albatross"].title == "Laysan albatross"
    # a damaged cache entry is fetched again, not trusted
    entry = next((tmp_path / "articles").glob("*.json"))
    entry.write_text("{not json")
    third = fetcher(api, tmp_path)
    third.articles(["Black-footed albatross", "Snowy puffbird of atlantis", "Laysan Albatross"])
    assert third.requests == 1
    assert all(json.loads(p.read_text()) for p in (tmp_path / "articles").glob("*.json"))


def test_image_urls_batched_and_cached(server, tmp_path):
    files = ["File:Laysan Albatross RWD2.jpg", "File:Phoebastria nigripes map.svg"]
    api, rec = server({"|".join(files): [(200, {}, "imageinfo.json")]})
    f = fetcher(api, tmp_path)
    urls = f.image_urls(files)
    assert urls == {files[0]: "https://upload.wikimedia.org/wikipedia/commons/a/a0/Laysan_Albatross_RWD2.jpg", files[1]: None}
    assert fetcher(api, tmp_path).image_urls(files) == urls and len(rec.log) == 1


def test_offline_fails_at_once_with_a_clear_message(tmp_path):
    with socket.socket() as s:  # a port nothing listens on: connection refused, as with no network
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps: list[float] = []
    f = fetcher(f"http://127.0.0.1:{port}/w/api.php", tmp_path, sleeps)
    with pytest.raises(WikipediaError, match=r"looks offline.*rerun with network"):
        f.articles(["Black-footed albatross"])
    assert f.requests == 1 and sleeps == []


def test_offline_is_read_from_the_socket_error_under_the_wrappers_not_only_from_the_text():
    import requests

    from polarcatalog.data.wikipedia import _offline

    lookup = requests.ConnectionError("boom")
    lookup.__cause__ = socket.gaierror(-3, "x")  # a failed name lookup, whatever the wrappers' text says
    unreachable = requests.ConnectionError("boom", OSError(101, "x"))
    assert _offline(lookup) and _offline(unreachable)
    dropped = requests.ConnectionError("Connection aborted.", ConnectionResetError(104, "Connection reset by peer"))
    assert not _offline(dropped)  # dropped mid-answer: retried with backoff, not reported as offline
