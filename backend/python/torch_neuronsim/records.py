"""The flat integer records the graph compiler passes to the library's ops
(graph_link, graph_run, fused_pointwise), laid out by the library: each
record's field order comes from neuronsim::records (backend/csrc/compile/
records.h), and this package packs by field name.  A module that builds a
record states at import which fields it fills (expect); a field added,
dropped or renamed on either side fails that check instead of shifting
every value after it."""
import torch

_LAYOUT = {}


def layout(name):
    """the library's field order of record `name`"""
    if not _LAYOUT:
        _LAYOUT.update({k: tuple(v) for k, v in torch.ops.neuronsim.records().items()})
    if name not in _LAYOUT:
        raise RuntimeError(f"neuronsim record {name!r}: the library has none ({', '.join(sorted(_LAYOUT))}): "
                           "the plugin and this package are from different builds")
    return _LAYOUT[name]


def expect(name, fields):
    """the check at import: this package fills exactly the library's fields"""
    lib = layout(name)
    if set(lib) != set(fields) or len(set(fields)) != len(fields):
        raise RuntimeError(f"neuronsim record {name!r}: the library lays it out as {list(lib)}, this package "
                           f"fills {list(fields)}: the plugin and this package are from different builds")


def pack(name, **fields):
    """record `name` as the library lays it out; a list value (a
    variable-length field) contributes its elements"""
    out = []
    for f in layout(name):
        v = fields[f]
        if isinstance(v, (list, tuple)):
            out.extend(v)
        else:
            out.append(v)
    return out
