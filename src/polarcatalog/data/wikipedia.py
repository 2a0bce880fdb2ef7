"""Species articles from Wikipedia through the MediaWiki Action API: plain article text and the article's image list,
as VR-RAG (§3) gathers them for its 11,202 bird species.

Built to be left running for hours and restarted: every answer (a missing page too) is one JSON file in an on-disk
cache, written atomically, so a rerun fetches only what is not there yet; requests keep a minimum interval between
them (Wikimedia asks API clients for serial, unhurried requests and a descriptive User-Agent); a 429 or 5xx answer
is retried after its Retry-After or an exponential backoff; with no network the first title fails at once with a
message that says so and where the cache is. Nothing here runs at import, and nothing is fetched unless asked.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from polarcatalog.progress import progress

API = "https://en.wikipedia.org/w/api.php"
USER_AGENT = "polarcatalog/0.1 (research workspace; species articles for open-vocabulary recognition)"
RETRY_STATUS = {429, 500, 502, 503, 504}


class WikipediaError(RuntimeError):
    """The fetch cannot go on (offline, retries exhausted, an answer that is not the API's)."""


@dataclass
class Article:
    query: str  # the title asked for
    title: str  # the page's title after redirects
    text: str  # plain text (the API's `extracts`, explaintext)
    images: list[str] = field(default_factory=list)  # `File:...` titles on the page
    missing: bool = False
    redirected_from: str | None = None


class WikipediaFetcher:
    def __init__(self, cache_dir: str | Path, api: str = API, min_interval_s: float = 1.0, retries: int = 5,
                 backoff_s: float = 2.0, max_wait_s: float = 120.0, timeout_s: float = 30.0,
                 user_agent: str = USER_AGENT, sleep: Callable[[float], None] = time.sleep):
        import requests  # heavy (optional at import): nothing network-related loads with the package

        self.cache_dir = Path(cache_dir)
        self.api, self.min_interval_s, self.retries = api, min_interval_s, retries
        self.backoff_s, self.max_wait_s, self.timeout_s = backoff_s, max_wait_s, timeout_s
        self.sleep = sleep
        self.session = requests.Session()
        self.session.headers["User-Agent"] = user_agent
        self._last = float("-inf")
        self.requests = 0  # HTTP requests sent (a cache hit sends none)
        self.retried = 0

    # -- cache ---------------------------------------------------------------------------------------------------
    def _path(self, kind: str, key: str) -> Path:
        return self.cache_dir / kind / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def _read(self, kind: str, key: str) -> dict | None:
        p = self._path(kind, key)
        if not p.is_file():
            return None
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # a damaged entry (a killed writer cannot leave one, see _write) is fetched again

    def _write(self, kind: str, key: str, value: dict) -> None:
        p = self._path(kind, key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(value, ensure_ascii=False, sort_keys=True), encoding="utf-8")
        os.replace(tmp, p)

    # -- HTTP ----------------------------------------------------------------------------------------------------
    def _get(self, params: dict[str, str]) -> dict:
        """One API call: polite spacing, retries on 429/5xx and dropped connections, JSON checked."""
        import requests  # heavy (see __init__)

        params = {"format": "json", "formatversion": "2", **params}
        for attempt in range(self.retries + 1):
            wait = self._last + self.min_interval_s - time.monotonic()
            if wait > 0:
                self.sleep(wait)
            self._last = time.monotonic()
            self.requests += 1
            try:
                r = self.session.get(self.api, params=params, timeout=self.timeout_s)
            except requests.ConnectionError as e:
                if attempt == 0 and _offline(e):
                    raise WikipediaError(
                        f"cannot reach {self.api} ({type(e).__name__}): this machine looks offline. Articles fetched "
                        f"so far are kept in {self.cache_dir}; rerun with network to go on from there.") from None
                reason = f"connection failed ({type(e).__name__})"
            except requests.Timeout:
                reason = f"no answer in {self.timeout_s:g} s"
            else:
                if r.status_code == 200:
                    try:
                        data = r.json()
                    except ValueError:
                        raise WikipediaError(f"{self.api} answered 200 with non-JSON ({r.text[:80]!r})") from None
                    if "error" in data:
                        raise WikipediaError(f"{self.api}: API error {data['error'].get('code')}: {data['error'].get('info')}")
                    return data
                if r.status_code not in RETRY_STATUS:
                    raise WikipediaError(f"{self.api} answered HTTP {r.status_code} for {params.get('titles')!r}")
                reason = f"HTTP {r.status_code}"
                retry_after = _seconds(r.headers.get("Retry-After"))
                if retry_after is not None and attempt < self.retries:
                    self.retried += 1
                    self.sleep(min(retry_after, self.max_wait_s))
                    continue
            if attempt < self.retries:
                self.retried += 1
                self.sleep(min(self.backoff_s * 2 ** attempt, self.max_wait_s))
        raise WikipediaError(f"{self.api}: gave up after {self.retries + 1} attempts ({reason}) for "
                             f"{params.get('titles')!r}; the cache in {self.cache_dir} keeps what was fetched")

    # -- articles ------------------------------------------------------------------------------------------------
    def article(self, title: str) -> Article:
        """The page (following redirects) or `missing=True`; from the cache when it is there."""
        cached = self._read("articles", title)
        if cached is not None:
            return Article(**cached)
        data = self._get({"action": "query", "prop": "extracts|images", "explaintext": "1", "redirects": "1",
                          "imlimit": "max", "titles": title})
        query = data.get("query") or {}
        pages = query.get("pages") or []
        if len(pages) != 1:
            raise WikipediaError(f"{self.api}: expected one page for {title!r}, got {len(pages)}")
        page = pages[0]
        redirect = next((r["from"] for r in query.get("redirects", []) if r.get("to") == page.get("title")), None)
        art = Article(query=title, title=page.get("title", title), text=page.get("extract", "") or "",
                      images=[i["title"] for i in page.get("images", [])], missing=bool(page.get("missing")),
                      redirected_from=redirect)
        self._write("articles", title, asdict(art))
        return art

    def articles(self, titles: Iterable[str], desc: str = "Wikipedia articles") -> dict[str, Article]:
        """Every title, resumable: cached titles cost nothing, the rest are fetched in order with progress."""
        titles = list(dict.fromkeys(titles))
        return {t: self.article(t) for t in progress(titles, len(titles), desc, unit="page")}

    def image_urls(self, files: Iterable[str]) -> dict[str, str | None]:
        """`File:` title -> its original URL (None when the file has none), 50 titles per request, cached."""
        files = list(dict.fromkeys(files))
        out: dict[str, str | None] = {}
        todo = []
        for f in files:
            hit = self._read("imageinfo", f)
            if hit is not None:
                out[f] = hit["url"]
            else:
                todo.append(f)
        for i in range(0, len(todo), 50):
            chunk = todo[i : i + 50]
            data = self._get({"action": "query", "prop": "imageinfo", "iiprop": "url", "titles": "|".join(chunk)})
            query = data.get("query") or {}
            renamed = {n["to"]: n["from"] for n in query.get("normalized", [])}
            for page in query.get("pages", []):
                asked = renamed.get(page["title"], page["title"])
                info = page.get("imageinfo") or [{}]
                out[asked] = info[0].get("url")
                self._write("imageinfo", asked, {"url": out[asked]})
        return {f: out.get(f) for f in files}


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to the backoff


def _offline(error: BaseException) -> bool:
    """A failure to resolve or to connect at all (not a connection dropped mid-answer). requests wraps urllib3, which
    wraps the socket error: walk the chain for the socket-level cause (a failed name lookup, a refused or unreachable
    connection); the message text is the fallback for wrappers that keep only the text."""
    stack, seen = [error], set()
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, socket.gaierror) or getattr(e, "errno", None) in _UNREACHABLE:  # ConnectionRefusedError too
            return True
        stack += [e.__cause__, e.__context__, getattr(e, "reason", None), *(a for a in e.args if isinstance(a, BaseException))]
    text = str(error).lower()
    return any(s in text for s in ("name or service not known", "temporary failure in name resolution",
                                   "nodename nor servname", "failed to resolve", "connection refused",
                                   "network is unreachable", "no route to host"))


_UNREACHABLE = {errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ECONNREFUSED}
