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


def test_collective_table_follows_the_model(neuronsim):
    """`neuronsim collective` prints nccom-test's table from the collective
    model: the same times as the bindings, busbw = algbw x 2(n-1)/n for an
    all-reduce, and clear errors for bad ranks, sizes and ops"""
    import neuronsim as ns
    r = run(neuronsim, "collective", "-r", 16, "-b", "1kb", "-e", "64mb", "-f", 8, "--target", "trn1", "allr")
    assert r.returncode == 0, r.stderr
    lines = [ln.split() for ln in r.stdout.decode().splitlines()[1:] if ln.strip()[:1].isdigit()]
    assert [int(ln[0]) for ln in lines] == [1024 * 8 ** k for k in range(6)]
    for size, ranks, us, algbw, busbw, algo in lines:
        want = ns.collective_estimate("all_reduce", 16, int(size), "trn1")
        assert float(us) == pytest.approx(want["us"], abs=0.05) and algo == want["algorithm"]
        assert float(busbw) == pytest.approx(float(algbw) * 2 * 15 / 16, abs=0.02)
    assert b"Avg bus bandwidth" in r.stdout
    for args, code, msg in ((("-r", 0, "allr"), 2, b"ranks"), (("-b", "1zb", "allr"), 2, b"bad size"),
                            (("allx",), 1, b"unknown collective 'allx'"), (("-f", 1, "allr"), 2, b"step factor")):
        r = run(neuronsim, "collective", *args)
        assert r.returncode == code and msg in r.stderr, (args, r.stderr)


def test_collective_estimate_bindings():
    import neuronsim as ns
    a = ns.collective_estimate("all_reduce", 8, 64 << 20, "trn2")
    g = ns.collective_estimate("all_gather", 8, 64 << 20, "trn2")
    assert a["algorithm"] == g["algorithm"] == "ring" and a["steps"] == 2 * g["steps"] == 14
    assert a["wire_bytes"] == 2 * g["wire_bytes"] == 2 * (64 << 20) // 8 * 7
    assert ns.collective_estimate("barrier", 4, 0, "trn2")["us"] == pytest.approx(58.0)
    # a group by its global ranks: the first eight cost what 8 does; eight
    # strided over the chips cross them: two rings (both torus dimensions)
    # and cross-chip steps, which dominate a small (rdh) all-reduce
    assert ns.collective_estimate("all_reduce", range(8), 64 << 20, "trn2") == a
    s = ns.collective_estimate("all_reduce", range(0, 128, 16), 64 << 20, "trn2")
    assert s["rings"] == 2 and a["rings"] == 1 and s["steps"] == a["steps"]
    small = [ns.collective_estimate("all_reduce", r, 2 << 20, "trn2")["us"] for r in (8, range(0, 128, 16))]
    assert small[1] > 2 * small[0]
    with pytest.raises(ns.NeuronSimError, match="ranks 0..4095"):
        ns.collective_estimate("all_reduce", [0, 4096], 1, "trn2")
    with pytest.raises(ValueError, match="negative rank"):
        ns.collective_estimate("all_reduce", [0, -1], 1, "trn2")
    with pytest.raises(ns.NeuronSimError, match="unknown collective"):
        ns.collective_estimate("gossip", 2, 1, "trn2")
    with pytest.raises(ns.NeuronSimError, match="unknown target"):
        ns.collective_estimate("all_reduce", 2, 1, "trn9")
