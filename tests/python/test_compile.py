"""torch.compile(backend="neuron"): the graph compiler (issue 17).

Values match eager; a graph without breaks is one program per call; the
compile cache holds in memory and across processes; fusion and linking pay
in simulated time; host-bound nodes fall back per node, counted and named."""
import copy
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import torch_neuronsim

NEURON = torch.device("neuron")


def stats():
    return torch_neuronsim.stats()


def eager_and_compiled(fn, *args, calls=2):
    """eager values and stats, then the compiled function's last call's"""
    with torch.no_grad():
        torch_neuronsim.reset_stats()
        want = fn(*args)
        se = stats()
        want = want.cpu()
        c = torch.compile(fn, backend="neuron")
        for _ in range(calls - 1):
            c(*args)
        torch_neuronsim.reset_stats()
        got = c(*args)
        sc = stats()
    return want, got.cpu(), se, sc


class Block(torch.nn.Module):
    """a pre-norm transformer block: attention and MLP with residuals"""

    def __init__(self, d=128, heads=4, ff=256):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, ff), torch.nn.Linear(ff, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def small_llama():
    import transformers as T
    cfg = T.LlamaConfig(hidden_size=128, intermediate_size=256, num_attention_heads=4, num_key_value_heads=2,
                        vocab_size=1000, num_hidden_layers=2)
    torch.manual_seed(0)
    return T.LlamaForCausalLM(cfg).eval(), cfg


def test_mlp_is_one_program_per_call_and_compiles_once():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32)).to(NEURON)
    x = torch.randn(16, 64).to(NEURON)
    want, got, se, sc = eager_and_compiled(mlp, x, calls=3)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert se["programs_executed"] >= 3                       # (plus first-call weight layouts)
    assert sc["programs_executed"] == 1                      # the graph's one linked program
    assert sc["compile"]["graphs_compiled"] == 0             # the second and third calls did not compile
    assert sc["compile"]["segment_runs"] == 1 and sc["compile"]["fallback_node_runs"] == 0
    assert sc["simulated_time_ns"] < se["simulated_time_ns"]


def test_elementwise_chain_moves_its_data_through_hbm_once():
    x = torch.randn(256, 1024).to(NEURON)

    def chain(x):   # five pointwise ops
        return torch.sigmoid((x * 2.0 + 1.0).relu() - 0.5)
    want, got, se, sc = eager_and_compiled(chain, x)
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert sc["programs_executed"] == 1
    assert sc["hbm_read_bytes"] == x.nbytes and sc["hbm_write_bytes"] == x.nbytes   # 2 x tensor bytes
    assert se["hbm_read_bytes"] + se["hbm_write_bytes"] == 10 * x.nbytes            # eager: each op both ways


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_fused_regions_mixing_engines_match_eager(dtype):
    torch.manual_seed(1)
    x = torch.randn(100, 300).to(dtype).to(NEURON)          # a tail tile too
    y = torch.randn(100, 300).to(dtype).to(NEURON)

    def f(x, y):
        return F.silu(x) * y + x.exp() / (y.abs() + 1) - torch.tanh(y) * 0.5
    want, got, _, sc = eager_and_compiled(f, x, y)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(got.float(), want.float(), **tol)
    assert sc["programs_executed"] == 1
    assert sc["hbm_read_bytes"] == 2 * x.nbytes and sc["hbm_write_bytes"] == x.nbytes


def test_transformer_block_fusion_and_linking_pay():
    torch.manual_seed(0)
    block = Block().eval().to(NEURON)
    x = torch.randn(2, 64, 128).to(NEURON)
    want, got, se, sc = eager_and_compiled(block, x)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert sc["programs_executed"] == 1 and sc["compile"]["fallback_node_runs"] == 0
    # launch charges included on both sides (simulated_time_ns is stream time)
    assert sc["simulated_time_ns"] <= 0.6 * se["simulated_time_ns"], (sc["simulated_time_ns"], se["simulated_time_ns"])


def test_small_llama_forward_matches_eager():
    model, _ = small_llama()
    model.to(NEURON)
    ids = torch.randint(0, 1000, (2, 16)).to(NEURON)
    want, got, se, sc = eager_and_compiled(lambda i: model(i).logits, ids)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert sc["cpu_fallbacks"] == 0
    # one program: the rotary positions (arange, its views, its cast) are
    # constants of the graph, folded once
    assert sc["programs_executed"] == 1 and sc["compile"]["fallback_node_runs"] == 0
    assert sc["simulated_time_ns"] * 3 < se["simulated_time_ns"]


def test_decode_step_is_at_least_5x_faster_than_eager():
    from transformers import StaticCache
    model, cfg = small_llama()
    model.to(NEURON)

    def decode(fn):
        torch.manual_seed(3)
        cache = StaticCache(config=cfg, max_cache_len=64)
        ids = torch.randint(0, 1000, (1, 8)).to(NEURON)
        with torch.no_grad():
            fn(input_ids=ids, past_key_values=cache, cache_position=torch.arange(8).to(NEURON), use_cache=True)
            tok = torch.tensor([[5]]).to(NEURON)
            fn(input_ids=tok, past_key_values=cache, cache_position=torch.tensor([8]).to(NEURON), use_cache=True)
            torch_neuronsim.reset_stats()
            out = fn(input_ids=tok, past_key_values=cache, cache_position=torch.tensor([9]).to(NEURON),
                     use_cache=True).logits
            return out.cpu(), stats()
    want, se = decode(model)
    got, sc = decode(torch.compile(model, backend="neuron"))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert sc["compile"]["graphs_compiled"] == 0                       # the step replayed
    assert sc["simulated_time_ns"] * 5 <= se["simulated_time_ns"], (sc["simulated_time_ns"], se["simulated_time_ns"])


def test_training_step_with_adamw_matches_eager():
    model, _ = small_llama()
    ids = torch.randint(0, 1000, (2, 16)).to(NEURON)

    def make():
        m = copy.deepcopy(model).to(NEURON).train()
        return m, torch.optim.AdamW(m.parameters(), lr=1e-3)

    def step(m, opt, ids):
        loss = m(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    me, oe = make()
    mc, oc = make()
    cstep = torch.compile(step, backend="neuron")
    for i in range(3):
        torch_neuronsim.reset_stats()
        le = step(me, oe, ids).item()
        pe = stats()["programs_executed"]
        torch_neuronsim.reset_stats()
        lc = cstep(mc, oc, ids).item()
        sc = stats()
        assert lc == pytest.approx(le, rel=1e-5)
    for a, b in zip(me.parameters(), mc.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach().cpu(), rtol=1e-4, atol=1e-5)
    c = sc["compile"]
    assert c["graphs_compiled"] == 0 and c["segment_runs"] >= 3      # forward, backward, optimizer
    assert sc["cpu_fallbacks"] == 0
    # AdamW's CPU step counters run on the host first; the device work of
    # the step is one linked program per graph (the loss's token count, an
    # int64 sum of booleans, is cast to float through int32: no host read)
    # plus autograd's seed gradient (a fill outside every graph)
    assert c["host_node_runs"] > 0 and c["fallback_node_runs"] == 0
    assert c["segment_runs"] == 3 and sc["programs_executed"] == 4 < pe


def test_host_bound_nodes_fall_back_per_node_counted_and_named(monkeypatch):
    # binary cross-entropy asks the host whether every input lies in [0, 1]
    # (CPU PyTorch's error otherwise): that node runs eagerly, between two
    # linked segments
    def f(x, i):
        return (x * 2).sum(-1) + F.binary_cross_entropy(torch.sigmoid(i), torch.ones_like(i)) * 0
    x = torch.randn(8, 32).to(NEURON)
    i = torch.arange(8).float().to(NEURON)
    with torch.no_grad():
        want = f(x, i).cpu()
        monkeypatch.setenv("NEURON_STRICT", "1")
        c = torch.compile(f, backend="neuron")
        torch_neuronsim.reset_stats()
        with pytest.warns(UserWarning, match=r"binary_cross_entropy.*reads device values on the host"):
            c(x, i)
        assert stats()["compile"]["fallback_nodes"] >= 1
        torch_neuronsim.reset_stats()
        got = c(x, i).cpu()
        s = stats()
    torch.testing.assert_close(got, want)
    assert s["compile"]["fallback_node_runs"] >= 1 and s["compile"]["segment_runs"] >= 1


def test_a_cpu_fallback_in_a_graph_is_named_under_strict_mode(monkeypatch):
    def f(x):
        return torch.special.zeta(x * 2 + 3, torch.full_like(x, 2.0)) + 1
    x = torch.rand(16).to(NEURON)
    want = f(x.cpu())
    torch._dynamo.reset()
    got = torch.compile(f, backend="neuron")(x).cpu()
    torch.testing.assert_close(got, want)
    monkeypatch.setenv("NEURON_STRICT", "1")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="zeta"):
        torch.compile(f, backend="neuron")(x)


_SAVE = """
import json, sys, torch, torch_neuronsim
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).to("neuron")
x = torch.randn(4, 32).to("neuron")
with torch.no_grad():
    torch_neuronsim.reset_stats()
    y = torch.compile(m, backend="neuron")(x)
    s = torch_neuronsim.stats()
"""


def run_python(script, cache):
    """`script` in a new process with the compile cache at `cache`: the JSON
    of its last line"""
    import json
    env = dict(os.environ, NEURON_SIM_COMPILE_CACHE_DIR=str(cache), NEURON_SIM="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_new_process_loads_the_compiled_graph_from_the_disk_cache(tmp_path):
    script = _SAVE + ('print(json.dumps({"c": s["compile"], "programs": s["programs_executed"], '
                      '"y": y.cpu().tolist()}))\n')
    runs = [run_python(script, tmp_path) for _ in range(2)]
    assert runs[0]["c"]["graphs_compiled"] == 1 and runs[0]["c"]["disk_cache_writes"] == 1
    assert runs[1]["c"]["graphs_compiled"] == 0 and runs[1]["c"]["disk_cache_hits"] == 1
    assert runs[1]["programs"] == 1                                 # straight to the linked program
    assert runs[1]["y"] == runs[0]["y"]



def test_a_graph_cached_by_one_core_runs_on_another(tmp_path):
    """torchrun's ranks share the disk cache: a graph rank 1 compiled on
    neuron:1 is a cache hit for rank 0 on neuron:0 and runs there (it was
    loaded for neuron:1: "graph_run: input 0 is not on neuron:1")"""
    script = _SAVE.replace('.to("neuron")', '.to(DEV)').replace("import json", "DEV = sys.argv[1]\nimport json")
    script = "import sys\n" + script + 'print(json.dumps({"c": s["compile"], "y": y.cpu().tolist(), "dev": str(y.device)}))\n'
    import json
    env = dict(os.environ, NEURON_SIM_COMPILE_CACHE_DIR=str(tmp_path), NEURON_SIM="1")
    runs = []
    for dev in ("neuron:1", "neuron:0"):
        out = subprocess.run([sys.executable, "-c", script, dev], env=env, capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stderr[-2000:]
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[1]["c"]["graphs_compiled"] == 0 and runs[1]["c"]["disk_cache_hits"] == 1
    assert runs[1]["dev"] == "neuron:0" and runs[1]["y"] == runs[0]["y"]


@pytest.mark.parametrize("load_cache", ["empty", "off"])
def test_cache_artifacts_carry_compiled_graphs_to_a_new_process(tmp_path, load_cache):
    """torch.compiler.save_cache_artifacts() after a compile holds the graph;
    load_cache_artifacts() in a new process with an empty (or no) disk cache
    makes the same compile a cache hit"""
    import json
    blob = tmp_path / "artifacts.bin"
    save = _SAVE + textwrap.dedent(f"""
        data, info = torch.compiler.save_cache_artifacts()
        open({str(blob)!r}, "wb").write(data)
        print(json.dumps({{"n": len(info.neuronsim_graph_artifacts), "c": s["compile"], "y": y.cpu().tolist()}}))
    """)
    load = textwrap.dedent(f"""
        import json, torch
        info = torch.compiler.load_cache_artifacts(open({str(blob)!r}, "rb").read())
        n = len(info.neuronsim_graph_artifacts)
    """) + _SAVE + 'print(json.dumps({"n": n, "c": s["compile"], "programs": s["programs_executed"], ' \
        '"y": y.cpu().tolist()}))\n'
    runs = [run_python(save, tmp_path / "a"), run_python(load, tmp_path / "b" if load_cache == "empty" else "off")]
    assert runs[0]["n"] == 1 and runs[0]["c"]["graphs_compiled"] == 1
    assert runs[1]["n"] == 1
    assert runs[1]["c"]["graphs_compiled"] == 0 and runs[1]["c"]["disk_cache_hits"] == 1
    assert runs[1]["programs"] == 1 and runs[1]["y"] == runs[0]["y"]
    if load_cache == "empty":
        assert len(list((tmp_path / "b").iterdir())) == 1


def test_a_foreign_cache_artifact_is_refused_by_name(tmp_path, monkeypatch):
    from torch_neuronsim.compile_cache import _bundle, _populate
    monkeypatch.setenv("NEURON_SIM_COMPILE_CACHE_DIR", str(tmp_path))
    good = _bundle({"graph.json": b"{}", "seg1.nsp": b"abc"})
    with pytest.raises(ValueError, match="not a compile-cache key"):
        _populate("../../etc", good)
    key = "0" * 64
    with pytest.raises(ValueError, match="bad file entry"):
        _populate(key, b'[["../graph.json", 2]]\n{}')
    with pytest.raises(ValueError, match="disagree"):
        _populate(key, good + b"trailing")
    with pytest.raises(ValueError, match="no index line"):
        _populate(key, b"garbage")
    assert not any(tmp_path.iterdir())
    with pytest.raises(ValueError, match="sha256"):   # a byte changed: the digest does not match
        _populate(key, good.replace(b"abc", b"abd"))
    _populate(key, good)
    assert sorted(p.name for p in (tmp_path / key).iterdir()) == ["graph.json", "seg1.nsp", "sha256"]


def test_cache_artifacts_of_any_bytes_raise_value_error_only():
    """torch.compiler.load_cache_artifacts hands our populate any bytes: a
    seeded mutation sweep of a good bundle (bytes flipped, cut, spliced,
    index lines rewritten) gives a ValueError or an intact entry, nothing
    else (tests/fuzz/fuzz_compile_cache.py is the coverage-guided form)."""
    import random
    from torch_neuronsim.compile_cache import _bundle, _unbundle
    good = _bundle({"graph.json": b'{"format": 5}', "seg0.nsp": bytes(range(256))})
    rng = random.Random(7)
    seeds = [good, b"", b"\n", b"[]\n", b'[["graph.json", 1e400]]\n', b"[" * 100000 + b"\n",
             b'[["graph.json", -1]]\n', b'[["sha256", 0], ["sha256", 0]]\n', b'{"a": 1}\n']
    for i in range(3000):
        b = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 4)):
            op = rng.randrange(4)
            if op == 0 and b:
                b[rng.randrange(len(b))] = rng.randrange(256)
            elif op == 1:
                b = b[:rng.randrange(len(b) + 1)]
            elif op == 2:
                b[rng.randrange(len(b) + 1):0] = rng.choice(seeds)[:rng.randrange(64)]
            else:
                b = bytearray(b'[["graph.json", %d], ["seg%d.nsp", %d]]\n' % (
                    rng.randrange(-2, 40), rng.randrange(3), rng.randrange(-2, 300))) + b[b.find(b"\n") + 1:]
        try:
            files = _unbundle(bytes(b))
        except ValueError:
            continue
        assert "graph.json" in files


def _compile_as_a_new_process(f, x):
    """f compiled on neuron with nothing in memory (as a new process: the
    disk cache is all there is), the counters from zero"""
    from torch_neuronsim.compile import clear_memory_cache
    torch._dynamo.reset()
    clear_memory_cache()
    torch_neuronsim.reset_stats()
    return torch.compile(f, backend="neuron")(x)


def test_a_corrupt_disk_cache_entry_is_compiled_again(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURON_SIM_COMPILE_CACHE_DIR", str(tmp_path))
    f = lambda x: (x + 1) * 2   # noqa: E731
    x = torch.randn(64).to(NEURON)
    _compile_as_a_new_process(f, x)
    for d in tmp_path.iterdir():
        (d / "graph.json").write_text("{not json")
    got = _compile_as_a_new_process(f, x)
    assert stats()["compile"]["graphs_compiled"] == 1
    torch.testing.assert_close(got.cpu(), f(x.cpu()))
    # the damaged entry was rewritten: the next fresh compile is a disk hit
    _compile_as_a_new_process(f, x)
    assert stats()["compile"]["graphs_compiled"] == 0 and stats()["compile"]["disk_cache_hits"] == 1


@pytest.mark.parametrize("kind", ["fifo", "symlink", "huge", "flipped"])
def test_a_cache_entry_that_is_not_a_regular_intact_file_is_a_miss(tmp_path, monkeypatch, kind):
    """A FIFO in place of graph.json would block the reader forever, a link
    would read a file elsewhere, a damaged byte would feed the linker wrong
    data: each is a miss, compiled again, and the entry rewritten."""
    import os
    monkeypatch.setenv("NEURON_SIM_COMPILE_CACHE_DIR", str(tmp_path))
    f = lambda x: (x - 1) * 3   # noqa: E731
    x = torch.randn(64).to(NEURON)
    _compile_as_a_new_process(f, x)
    (entry,) = [d for d in tmp_path.iterdir() if not d.name.startswith(".")]
    g = entry / "graph.json"
    if kind == "flipped":
        data = bytearray(g.read_bytes())
        data[len(data) // 2] ^= 1
        g.write_bytes(bytes(data))
    else:
        target = tmp_path / "elsewhere.json"
        target.write_bytes(g.read_bytes())
        g.unlink()
        if kind == "fifo":
            os.mkfifo(g)
        elif kind == "symlink":
            g.symlink_to(target)
        else:
            with open(g, "wb") as fh:   # sparse: over the entry size limit, no disk used
                fh.truncate((1 << 30) + 1)
    got = _compile_as_a_new_process(f, x)
    assert stats()["compile"]["graphs_compiled"] == 1
    torch.testing.assert_close(got.cpu(), f(x.cpu()))
    assert g.is_file() and not g.is_symlink() and g.stat().st_size < 1 << 20


def test_random_nodes_are_not_replayed():
    # a seed drawn on the host makes the node host-bound: every call draws anew
    f = lambda x: torch.rand_like(x) + x * 0   # noqa: E731
    x = torch.zeros(1024).to(NEURON)
    c = torch.compile(f, backend="neuron")
    a, b, d = c(x).cpu(), c(x).cpu(), c(x).cpu()
    assert not torch.equal(b, d) and not torch.equal(a, b)
    assert 0 <= float(d.min()) and float(d.max()) < 1
    assert stats()["compile"]["fallback_node_runs"] >= 1


def test_trainer_torch_compile_uses_the_neuron_backend(tmp_path, monkeypatch):
    import transformers as T
    from datasets import Dataset
    model, _ = small_llama()
    model.train()
    g = torch.Generator().manual_seed(0)
    rows = [{"input_ids": torch.randint(3, 1000, (32,), generator=g).tolist()} for _ in range(8)]
    ds = Dataset.from_list([dict(r, labels=r["input_ids"]) for r in rows])
    args = T.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4, max_steps=3,
                               report_to=[], learning_rate=1e-3, torch_compile=True,
                               torch_compile_backend="neuron", save_strategy="no")
    torch_neuronsim.reset_stats()
    T.Trainer(model=model, args=args, train_dataset=ds).train()
    c = stats()["compile"]
    assert c["graphs_compiled"] >= 2                         # forward and backward graphs
    assert c["segment_runs"] > c["graphs_compiled"]          # later steps replayed linked programs
    assert stats()["cpu_fallbacks"] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh", "silu", "relu"])
def test_matmul_epilogue_applies_the_activation_in_the_evacuation(act, dtype):
    torch.manual_seed(2)
    # m and n span several PSUM banks and result slots; bias and no bias
    x = torch.randn(300, 192).to(dtype).to(NEURON)
    w1, b1 = torch.randn(640, 192).to(dtype).to(NEURON) * 0.1, torch.randn(640).to(dtype).to(NEURON)
    w2 = torch.randn(96, 640).to(dtype).to(NEURON) * 0.1
    fn = {"gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
          "relu": F.relu}[act]

    def f(x):
        return fn(fn(F.linear(x, w1, b1)) @ w2.t())
    want, got, se, sc = eager_and_compiled(f, x)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(got.float(), want.float(), **tol)
    assert sc["programs_executed"] == 1
    # the activations never crossed HBM: the inputs, weights and the output
    # once, the bias once per partition (a broadcasting DMA), plus the
    # hidden [300, 640] written and read back once
    es = x.element_size()
    moved = (x.numel() + w1.numel() + 128 * b1.numel() + w2.numel() + 2 * 300 * 640 + 300 * 96) * es
    assert sc["hbm_read_bytes"] + sc["hbm_write_bytes"] <= moved


def test_linked_program_runs_check_their_plan():
    ops = torch.ops.neuronsim
    a, b = torch.randn(64).to(NEURON), torch.randn(64).to(NEURON)
    ops.capture_begin()
    ops.capture_node(0, "add")
    y = torch.ops.aten.add.Tensor(a, b)
    assert ops.capture_end() == [0, 1]                 # node 0 ran one program
    prog, plan = ops.graph_link(0, 0, list(ops.device_span(a)) + list(ops.device_span(b)),
                                list(ops.device_span(y)) + [4], "add")
    h = ops.graph_load(prog, 0)
    meta = [1, 64, 1]             # rank 1, size 64, stride 1 (an out_meta record)
    (out,) = ops.graph_run(h, "add", [a, b], plan, [torch.float32], meta)
    torch.testing.assert_close(out.cpu(), a.cpu() + b.cpu())
    bad = list(plan)
    bad[-2] = 99                  # the output's region
    with pytest.raises(RuntimeError, match="does not allocate"):
        ops.graph_run(h, "add", [a, b], bad, [torch.float32], meta)
    with pytest.raises(RuntimeError, match="spans"):
        ops.graph_run(h, "add", [a, b[:32]], plan, [torch.float32], meta)
    with pytest.raises(RuntimeError, match="output dtypes"):
        ops.graph_run(h, "add", [a, b], plan, [torch.float32, torch.float32], meta)
    with pytest.raises(RuntimeError, match="output dtypes"):
        ops.graph_run(h, "add", [a, b], plan, [], meta)
    ops.graph_free(h)
    with pytest.raises(RuntimeError, match="no linked program"):
        ops.graph_run(h, "add", [a, b], plan, [torch.float32], meta)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("bias", [False, True], ids=["mm", "addmm"])
def test_matmul_epilogue_adds_the_residual_in_the_evacuation(bias, dtype):
    torch.manual_seed(4)
    x = torch.randn(3, 100, 192).to(dtype).to(NEURON)        # 300 rows: a partial last m-tile
    w = (torch.randn(640, 192) * 0.1).to(dtype).to(NEURON)
    b = torch.randn(640).to(dtype).to(NEURON) if bias else None
    r = torch.randn(3, 100, 640).to(dtype).to(NEURON)

    def f(x, r):
        return r + F.linear(x, w, b)
    want, got, se, sc = eager_and_compiled(f, x, r)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=3e-2)
    torch.testing.assert_close(got.float(), want.float(), **tol)
    assert sc["programs_executed"] == 1
    es = x.element_size()
    # the product never crossed HBM: x, w, the residual and the result once
    # each (the bias once per partition, a broadcasting DMA)
    moved = (x.numel() + w.numel() + 2 * r.numel() + (128 * 640 if bias else 0)) * es
    assert sc["hbm_read_bytes"] + sc["hbm_write_bytes"] == moved


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("name", ["qwen2", "gpt2", "bert"])
def test_other_architectures_compile_to_linked_programs(name, dtype):
    from test_models import build
    torch.manual_seed(0)
    model = build(name).eval().to(dtype).to(NEURON)
    ids = torch.randint(0, 1000, (2, 12)).to(NEURON)
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :3] = 0
    mask = mask.to(NEURON)
    fn = lambda i, m: model(i, attention_mask=m)[0]   # noqa: E731
    want, got, se, sc = eager_and_compiled(fn, ids, mask)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(got.float(), want.float(), **tol)
    assert sc["cpu_fallbacks"] == 0
    assert sc["programs_executed"] * 4 < se["programs_executed"]
    assert sc["simulated_time_ns"] * 2 < se["simulated_time_ns"]


def test_input_mutation_and_aliased_outputs_behave_as_eager():
    def f(x, y):
        x.mul_(2).add_(y)            # mutates a graph input in place
        t = y * 3
        return x[1:], t, t.view(-1), y.t()   # a view of the input, an output twice, a view of one
    torch.manual_seed(5)
    x0, y = torch.randn(4, 4), torch.randn(4, 4)
    want = f(x0.clone(), y)
    c = torch.compile(f, backend="neuron")
    for i in range(3):   # compile, then replays
        xd, yd = x0.clone().to(NEURON), y.to(NEURON)
        torch_neuronsim.reset_stats()
        got = c(xd, yd)
        assert stats()["compile"]["segment_runs"] == (1 if i else 0)
        torch.testing.assert_close(xd.cpu(), x0 * 2 + y)                        # the mutation landed
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w)
        assert got[0].data_ptr() == xd[1:].data_ptr()                          # still a view of x
        assert got[2].data_ptr() == got[1].data_ptr()
        assert stats()["cpu_fallbacks"] == 0


def test_a_call_whose_inputs_alias_differently_does_not_replay():
    def f(a, b):
        return a[:32] * 2 + b.exp()
    c = torch.compile(f, backend="neuron")
    base = torch.randn(64).to(NEURON)
    x, y = base, base[:32]                # y inside x at capture: b's reads resolve into a's region
    torch.testing.assert_close(c(x, y).cpu(), f(x.cpu(), y.cpu()))
    c(x, y)
    p, q = torch.randn(64).to(NEURON), torch.randn(64).to(NEURON)[:32]   # same geometry, no overlap
    torch_neuronsim.reset_stats()
    got = c(p, q)
    torch.testing.assert_close(got.cpu(), f(p.cpu(), q.cpu()))
    assert stats()["compile"]["replay_mismatches"] == 1
    torch_neuronsim.reset_stats()
    c(x, y)
    assert stats()["compile"]["replay_mismatches"] == 0 and stats()["compile"]["segment_runs"] == 1


def test_a_folded_constant_returned_is_a_fresh_tensor_each_call():
    f = lambda x: (x + 1, torch.arange(8, device=x.device))   # noqa: E731
    c = torch.compile(f, backend="neuron")
    x = torch.randn(8).to(NEURON)
    for _ in range(3):
        _, r = c(x)
        torch.testing.assert_close(r.cpu(), torch.arange(8))
        r.add_(100)                       # the caller's to change


# ------------------------------------------- checkpointed regions (issue 38)
def test_compiled_checkpointed_attention_trains_as_on_cpu():
    """SDPA is tagged random (it may drop out): in a checkpointed region
    AOTAutograd wraps it in run_and_save_rng_state / run_with_rng_state,
    which PyTorch implements only for its own devices"""
    from torch.utils.checkpoint import checkpoint

    def f(q, k, v):
        return checkpoint(F.scaled_dot_product_attention, q, k, v, is_causal=True, use_reentrant=False).sum()
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.randn(1, 2, 16, 32, generator=g, requires_grad=True) for _ in range(3)]
    f(q, k, v).backward()
    qn, kn, vn = [t.detach().to(NEURON).requires_grad_() for t in (q, k, v)]
    torch._dynamo.reset()
    torch_neuronsim.reset_stats()
    got = torch.compile(f, backend="neuron")(qn, kn, vn)
    got.backward()
    # SDPA without dropout draws nothing: no state to save or replay, so
    # both graphs link whole
    assert stats()["compile"]["fallback_nodes"] == 0 and stats()["compile"]["segments_linked"] == 2
    torch.testing.assert_close(got.detach().cpu(), f(q, k, v).detach(), rtol=1e-4, atol=1e-4)
    for a, b in ((qn, q), (kn, k), (vn, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-3, atol=1e-4)


def test_dropout_recomputed_in_backward_draws_the_forward_mask():
    """the recompute replays the device generator's state: the gradient
    through dropout has exactly the forward's mask, and the state moves on
    between calls"""
    from torch.utils.checkpoint import checkpoint

    def f(x):
        y = checkpoint(lambda t: F.dropout(t * 3.0, p=0.5, training=True), x, use_reentrant=False)
        return y, (y * y).sum()
    torch.neuron.manual_seed(0)
    x = torch.randn(64, 64).to(NEURON).requires_grad_()
    torch._dynamo.reset()
    cf = torch.compile(f, backend="neuron")
    masks = []
    for _ in range(2):
        x.grad = None
        y, loss = cf(x)
        loss.backward()
        mask = (y != 0).float()
        torch.testing.assert_close(x.grad.cpu(), (12.0 * y * mask).detach().cpu(), rtol=0, atol=0)
        masks.append(mask.cpu())
    assert 0.4 < masks[0].mean() < 0.6 and not torch.equal(masks[0], masks[1])


def test_casts_of_int64_values_a_bound_fits_in_int32_stay_in_the_program():
    """a loss's token count (an int64 sum of booleans) cast to float: the
    graph proves it below 2^31, so the cast goes through int32 on the device
    instead of asking the host; an int64 input has no bound and still does"""
    from torch_neuronsim.bounds import narrow_bounded_casts

    def f(x, labels):
        n = (labels != -100).sum()
        return x.sum() / n.float() + (labels.unsqueeze(0) > 3).sum(-1).float()
    x = torch.randn(4, 64).to(NEURON)
    labels = torch.randint(-1, 8, (64,)).to(NEURON)
    labels[::5] = -100
    want, got, _, sc = eager_and_compiled(f, x, labels)
    torch.testing.assert_close(got, want)
    assert sc["programs_executed"] == 1 and sc["compile"]["fallback_node_runs"] == 0
    # the bounds: an unsigned cast of -1 is 255, not 1; uint8 arithmetic wraps
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch_neuronsim.bounds import bound

    def g(i, m):
        return (m.to(torch.uint8) * 3).float(), (i * 2).float(), (m.to(torch.int64) - 1).sum().float()
    gm = make_fx(g, tracing_mode="fake")(torch.ones(4, dtype=torch.int64), torch.ones(4, dtype=torch.bool))
    memo = {}
    nodes = {n.name: n for n in gm.graph.nodes}
    assert bound(nodes["mul"], memo) == 255 and bound(nodes["mul_1"], memo) is None
    assert bound(nodes["sum_1"], memo) == 8
    assert narrow_bounded_casts(gm) == 1                  # only the sum is known to fit int32


def test_a_loss_over_its_token_count_links_whole_forward_and_backward():
    """TRL's loss: a masked sum over the count of real tokens (an int64 sum
    of booleans, clamped) -- the forward bounds the count, and the backward
    knows the bound of the count its forward saved"""
    def f(x, mask):
        return -(x * mask).sum() / mask.sum().clamp(1)
    x = torch.randn(2, 127, requires_grad=True)
    mask = torch.rand(2, 127, generator=torch.Generator().manual_seed(0)) > 0.3
    f(x, mask).backward()
    xn = x.detach().to(NEURON).requires_grad_()
    torch._dynamo.reset()
    torch_neuronsim.reset_stats()
    got = torch.compile(f, backend="neuron")(xn, mask.to(NEURON))
    got.backward()
    c = stats()["compile"]
    assert c["fallback_nodes"] == 0 and c["segments_linked"] == 2
    torch.testing.assert_close(got.detach().cpu(), f(x, mask).detach())
    torch.testing.assert_close(xn.grad.cpu(), x.grad)


def test_a_masked_put_of_one_value_links_into_the_program():
    """DTensor's vocab-parallel embedding: token ids outside this rank's
    shard are masked, embedded as row 0, and their rows zeroed with
    out[mask] = 0 -- a select on the device, no mask count read on the host"""
    w = torch.randn(5, 8)

    def f(w, ids):
        mask = (ids < 0) | (ids >= 5)
        out = F.embedding(ids.masked_fill(mask, 0), w)
        out[mask] = 0.0
        return out
    ids = torch.tensor([[0, 7, 3, -1], [4, 4, 9, 2]])
    want, got, _, sc = eager_and_compiled(f, w.to(NEURON), ids.to(NEURON))
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(got, f(w, ids), rtol=0, atol=0)
    assert sc["programs_executed"] == 1 and sc["compile"]["fallback_node_runs"] == 0


def test_independent_nodes_of_a_graph_overlap_and_dependent_ones_do_not():
    """The linker schedules parts that share no written bytes side by side
    (their SBUF moved apart, one's loads under another's compute): four
    independent pointwise ops take less simulated time than run one after
    another, never less than the slowest alone; a chain of four keeps its
    order and its values."""
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(256, 512, generator=g) for _ in range(4)]
    dev = [x.to("neuron") for x in xs]

    def branches(a, b, c, d):
        return torch.exp(a), torch.sin(b), torch.tanh(c), torch.sigmoid(d)

    def chain(a, b, c, d):
        return torch.sigmoid(torch.tanh(torch.sin(torch.exp(a) + b) * c) - d)

    def timed(fn, args):
        fn(*args)
        torch_neuronsim.reset_stats()
        out = fn(*args)
        return out, torch_neuronsim.stats()

    for f in (branches, chain):
        torch._dynamo.reset()
        got, s = timed(torch.compile(f, backend="neuron"), dev)
        assert s["programs_executed"] == 1
        want = f(*xs)
        for a, b in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            torch.testing.assert_close(a.cpu(), b, rtol=2e-6, atol=2e-6)
    torch._dynamo.reset()
    _, eager = timed(branches, dev)
    _, linked = timed(torch.compile(branches, backend="neuron"), dev)
    singles = [timed(lambda x: torch.exp(x), dev[:1])[1]["kernel_time_ns"]]
    assert linked["kernel_time_ns"] < 0.8 * eager["kernel_time_ns"], (linked["kernel_time_ns"], eager["kernel_time_ns"])
    assert linked["kernel_time_ns"] >= max(singles)


def test_timesteps_complex_rotary_tables_and_host_uploads_link(monkeypatch):
    """what diffusers' pipelines put in a graph links into its programs with
    no node run eagerly: an int64 timestep cast to float (UNet's
    get_timestep_embedding), a float cast to int64 with -inf among the
    values (T5's relative-position buckets take log(0)), complex64 rotary
    tables kept on the CPU and moved in forward (QwenImage's), multiplied as
    complex numbers"""
    table = torch.polar(torch.ones(16, 4), torch.randn(16, 4))        # a CPU attribute, as QwenImage keeps it

    def f(x, t):
        emb = t[:, None].float() * torch.arange(4, device=x.device).float()[None, :]
        rel = torch.arange(-3, 5, device=x.device).abs()
        big = (torch.log(rel.float() / 2) * 3).to(torch.long)           # log(0) = -inf -> INT64_MIN
        buckets = torch.where(rel < 2, rel, big)
        q = torch.view_as_complex(x.float().reshape(16, 4, 2)) * table.to(x.device)
        return torch.view_as_real(q).flatten(1) + emb.sum() + buckets.sum()
    x = torch.randn(16, 8).to(NEURON)
    t = torch.tensor([999, 3]).to(NEURON)
    monkeypatch.setenv("NEURON_STRICT", "1")
    want = f(x.cpu(), t.cpu())
    torch._dynamo.reset()
    c = torch.compile(f, backend="neuron", fullgraph=True)
    torch_neuronsim.reset_stats()
    with torch.no_grad():
        c(x, t)
        got = c(x, t).cpu()
    s = stats()
    torch.testing.assert_close(got, want)
    assert s["compile"]["fallback_nodes"] == 0 and s["cpu_fallbacks"] == 0
