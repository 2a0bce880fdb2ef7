"""The application layer: what reads params and wires the library together. The stage notebooks and the
`polarcatalog` command line call in here; nothing below imports it."""
