"""`polarcatalog experiments`: the DVC experiments of a repository as one short table: which experiment, what it
changed against its baseline commit, and the test headline with its CI. `dvc exp show` lists every declared param
and metric (hundreds of columns); this is the view a researcher compares runs by, at any terminal width."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from polarcatalog.config import flatten

HEADLINE = ("reports/metrics/retrieval.json", "test mRR@1")  # the configured pipeline's test number, with " lo" / " hi"
READER = ("reports/metrics/ablate_top_k.json", "test reader accuracy (")  # at the configured k: the one with a CI


def _metric(data: dict[str, Any], where: tuple[str, str]) -> str:
    values = ((data.get("metrics") or {}).get(where[0]) or {}).get("data") or {}
    key = next((k for k in values if k.startswith(where[1]) and f"{k} lo" in values), where[1])
    v, lo, hi = (values.get(f"{key}{s}") for s in ("", " lo", " hi"))
    if v is None:
        return "—"
    return f"{100 * v:.2f}" + (f" [{100 * lo:.2f}, {100 * hi:.2f}]" if lo is not None and hi is not None else "")


def _params(data: dict[str, Any]) -> dict[str, Any]:
    return flatten(((data.get("params") or {}).get("params.yaml") or {}).get("data") or {})


def _changed(mine: dict[str, Any], base: dict[str, Any], width: int) -> str:
    items = [f"{k}={json.dumps(mine.get(k), ensure_ascii=False)}" for k in sorted(set(mine) | set(base)) if mine.get(k) != base.get(k)]
    if not items:
        return "—"
    text, shown = "", 0
    for item in items:
        more = f" (+{len(items) - shown - 1} more)" if shown + 1 < len(items) else ""
        candidate = f"{text}, {item}" if text else item
        if len(candidate) + len(more) > width:
            if text:
                break
            candidate = candidate[: max(width - len(more) - 1, 8)] + "…"  # one value longer than the column
        text, shown = candidate, shown + 1
    rest = len(items) - shown
    return text + (f" (+{rest} more)" if rest else "")


def rows(shown: list[dict[str, Any]]) -> list[dict[str, str]]:
    """`dvc exp show --json` -> one row per baseline commit and per experiment on it (the workspace only when its
    params differ from HEAD's)."""
    out = []
    baselines = [b for b in shown if b.get("rev") != "workspace"]
    head = _params((baselines[0].get("data") if baselines else {}) or {})
    for b in shown:
        data = b.get("data") or {}
        if b.get("rev") == "workspace":
            if _params(data) != head:
                out.append({"experiment": "workspace (uncommitted)", "base": head, "data": data})
            continue
        label = f"{b.get('name') or b['rev'][:7]} ({b['rev'][:7]})"
        out.append({"experiment": label, "base": None, "data": data})
        for e in b.get("experiments") or []:
            last = (e.get("revs") or [e])[0]
            out.append({"experiment": f"  {e.get('name') or last.get('name') or last['rev'][:7]}",
                        "base": _params(data), "data": last.get("data") or {}})
    return out


def table(shown: list[dict[str, Any]], width: int = 160) -> str:
    """The table at `width` columns: the changed-params column takes what the others leave."""
    found = rows(shown)
    cells = [(r["experiment"], _metric(r["data"], HEADLINE), _metric(r["data"], READER), r) for r in found]
    name_w = max([len("experiment"), *(len(c[0]) for c in cells)])
    head_w = max([len("test mRR@1 [95% CI]"), *(len(c[1]) for c in cells)])
    reader = any(c[2] != "—" for c in cells)
    read_w = max([len("reader acc. [95% CI]"), *(len(c[2]) for c in cells)]) if reader else 0
    changed_w = max(20, width - name_w - head_w - read_w - 3 * (3 if reader else 2))
    line = lambda a, b, c, d: "  ".join([a.ljust(name_w), b.ljust(head_w), *([c.ljust(read_w)] if reader else []), d]).rstrip()  # noqa: E731
    out = [line("experiment", "test mRR@1 [95% CI]", "reader acc. [95% CI]", "changed (against its baseline commit)")]
    for name, headline, read, r in cells:
        changed = "baseline" if r["base"] is None else _changed(_params(r["data"]), r["base"], changed_w)
        out.append(line(name, headline, read, changed))
    return "\n".join(out)


def show(root: Path = Path("."), width: int = 160) -> str:
    proc = subprocess.run(["dvc", "exp", "show", "--json"], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"dvc exp show failed: {proc.stderr.strip()[-2000:]}")
    return table(json.loads(proc.stdout), width)
