"""PolarCatalog: verifiable open-vocabulary recognition with retrieval (VR-RAG + PolarMem)."""

from polarcatalog.numerics import pin_process

pin_process()  # before numpy loads: BLAS kernel and thread count that give the same bits on every machine

__version__ = "0.1.0"
