"""One module per DVC stage, named as in dvc.yaml: the stage's wiring (validated params -> library calls), its
headline numbers (`reports/metrics/<stage>.json`, what `dvc exp show` compares) and its report rendering. The
notebook of stage X imports `polarcatalog.stages.X` and the library, never another stage's module."""
