"""nki.isa.constants: the enums nki.isa's calls take, importable on their
own (`from nki.isa.constants import dge_mode, oob_mode`), as in NKI."""
from .isa import dge_mode, engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd  # noqa: F401
