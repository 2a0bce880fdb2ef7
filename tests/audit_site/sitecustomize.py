"""Loaded by every Python process started with tests/audit_site on PYTHONPATH (`read_audit.kernel_env`): in a Jupyter
kernel, install the read audit before the stage notebook's first cell runs."""

import os
import sys

if os.environ.get("POLARCATALOG_AUDIT") and "ipykernel_launcher" in " ".join(getattr(sys, "orig_argv", [])):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests import read_audit

    read_audit.install()
