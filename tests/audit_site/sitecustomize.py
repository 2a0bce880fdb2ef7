"""Loaded by every Python process started with tests/audit_site on PYTHONPATH (`read_audit.kernel_env`): in a Jupyter
kernel, or in the warm process stage kernels are forked from (runner/warm_kernel.py; a forked kernel runs no
sitecustomize of its own), install the read audit before the stage notebook's first cell runs."""

import os
import sys

ARGV = " ".join(getattr(sys, "orig_argv", []))
if os.environ.get("POLARCATALOG_AUDIT") and ("ipykernel_launcher" in ARGV or "polarcatalog.runner.warm_kernel serve" in ARGV):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tests import read_audit

    read_audit.install()
