"""`python -m polarcatalog.cli`: the `polarcatalog` command."""

from polarcatalog.cli import main

main()
