"""The `neuronsim` program tools from the outside: exit codes, messages,
round trips, and that no input -- however broken -- kills the process with a
signal."""
import random
import subprocess

import pytest


def run(cli, *args, input_bytes=None):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, input=input_bytes,
                          timeout=120)


def test_help_and_version(neuronsim):
    r = run(neuronsim, "--help")
    assert r.returncode == 0
    for cmd in (b"asm", b"disasm", b"validate"):
        assert cmd in r.stdout
    r = run(neuronsim, "--version")
    assert r.returncode == 0 and r.stdout.startswith(b"neuronsim ")


def test_usage_errors_exit_2(neuronsim):
    assert run(neuronsim).returncode == 2
    assert run(neuronsim, "frobnicate").returncode == 2
    assert run(neuronsim, "asm", "x.nsasm").returncode == 2          # no -o
    assert run(neuronsim, "validate").returncode == 2
    assert run(neuronsim, "disasm", "--bogus", "x").returncode == 2


def test_examples_round_trip(neuronsim, examples, tmp_path):
    assert len(examples) >= 6
    for src in examples:
        a, b, t = tmp_path / "a.nsp", tmp_path / "b.nsp", tmp_path / "t.nsasm"
        assert run(neuronsim, "asm", src, "-o", a).returncode == 0
        r = run(neuronsim, "disasm", a)
        assert r.returncode == 0
        t.write_bytes(r.stdout)
        assert run(neuronsim, "asm", t, "-o", b).returncode == 0
        assert a.read_bytes() == b.read_bytes(), src.name
        r = run(neuronsim, "validate", a)
        assert r.returncode == 0 and b"valid neuronsim program" in r.stdout


def test_bad_input_exits_1_with_message(neuronsim, tmp_path, examples):
    bad = tmp_path / "bad.nsasm"
    bad.write_text(".engine vector\nmemset dst=sbuf:fp32[0:129]{1x4}\nend\n")
    r = run(neuronsim, "validate", bad)
    assert r.returncode == 1
    msg = r.stderr.decode()
    assert "bad.nsasm" in msg and "line 2" in msg and "field dst" in msg and "[0, 129)" in msg

    missing = tmp_path / "nope.nsp"
    r = run(neuronsim, "disasm", missing)
    assert r.returncode == 1 and b"No such file" in r.stderr

    a = tmp_path / "a.nsp"
    assert run(neuronsim, "asm", examples[0], "-o", a).returncode == 0
    data = a.read_bytes()
    for cut in (0, 7, 8, 64, len(data) // 2, len(data) - 1):
        f = tmp_path / f"cut{cut}.nsp"
        f.write_bytes(data[:cut])
        r = run(neuronsim, "validate", f)
        assert r.returncode == 1, cut
        assert r.stderr, cut


def test_validate_reports_every_file(neuronsim, tmp_path, examples):
    bad = tmp_path / "bad.nsasm"
    bad.write_text("nop\n")
    r = run(neuronsim, "validate", examples[0], bad, examples[1])
    assert r.returncode == 1
    assert r.stdout.count(b"valid neuronsim program") == 2
    assert b"before any .engine" in r.stderr


def test_garbage_never_kills_the_process(neuronsim, tmp_path, examples):
    """Random byte flips of valid binaries and texts: exit 0 or 1, never a signal."""
    rng = random.Random(1234)
    a = tmp_path / "a.nsp"
    seeds = []
    for src in examples:
        assert run(neuronsim, "asm", src, "-o", a).returncode == 0
        seeds.append(a.read_bytes())
        seeds.append(src.read_bytes())
    files = []
    for i in range(120):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            pos = rng.randrange(len(data))
            data[pos] = rng.randrange(256)
        f = tmp_path / f"g{i}.bin"
        f.write_bytes(bytes(data))
        files.append(f)
    r = run(neuronsim, "validate", "-q", *files)
    assert r.returncode in (0, 1), r.returncode
    for f in files[:30]:
        r = run(neuronsim, "disasm", f)
        assert r.returncode in (0, 1), (f, r.returncode)


def test_isa_listing(neuronsim):
    r = run(neuronsim, "isa")
    assert r.returncode == 0
    out = r.stdout.decode()
    for name in ("load_stationary", "multiply_moving", "activation", "dma_copy", "sem_wait", "end"):
        assert name in out
    assert "fp8_e4m3" in out and "trn3 (NeuronCore-v4)" in out
    r = run(neuronsim, "isa", "tensor_scalar")
    out = r.stdout.decode()
    assert r.returncode == 0 and "scalar0=NUMBER|AP[P,1]" in out and "reverse0 (flag)" in out
    assert "cost: elementwise" in out
    r = run(neuronsim, "isa", "frob")
    assert r.returncode == 1 and b"no instruction 'frob'" in r.stderr
