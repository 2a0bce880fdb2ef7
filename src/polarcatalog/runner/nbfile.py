"""nbformat, imported without jsonschema's IRI grammar: for every process that reads or writes a notebook file.

jsonschema (which nbformat validates with) registers its "iri" format checker only if `rfc3987_syntax` imports, and
that import builds a Lark grammar, paid twice per stage (papermill's process, and the kernel rendering its
notebook for MLflow). Notebook validation never checks that format, so `import_nbformat` marks the module absent
(the standard `sys.modules` opt-out) unless something loaded it first. Call it before importing papermill or nbconvert.
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_nbformat() -> ModuleType:
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import nbformat  # heavy: jsonschema, after the opt-out above

    return nbformat
