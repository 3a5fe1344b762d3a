"""torch.distributed on `neuron` (torch_neuronsim/distributed.py): the c10d
backend "neuron" under torchrun -- every collective's values, DDP training
matching one process, the collective model's time on each rank's clock,
mismatched calls raising on every rank, a dead peer surfacing as an error --
and in one process, the backend's registration and defaults."""
import datetime
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

import torch_neuronsim

NEURON = torch.device("neuron")


def torchrun(tmp_path, body, nproc=2, expect_ok=True):
    """runs `body` (after a process-group prologue) on nproc ranks; each
    rank's `out(obj)` lands in rank<r>.json; returns {rank: [objs]}"""
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent("""
        import datetime, json, os, sys, torch, torch.distributed as dist, torch_neuronsim
        R = int(os.environ["RANK"])
        def out(obj):
            with open(os.path.join(sys.argv[1], f"rank{R}.json"), "a") as f:
                f.write(json.dumps(obj) + "\\n")
        def train(model, batch, between=None, **opt_kw):
            # two AdamW steps: the losses averaged over the ranks; between() after each step
            opt = torch.optim.AdamW(model.parameters(), lr=1e-2, **opt_kw)
            losses = []
            for _ in range(2):
                loss = model(batch, labels=batch).loss
                loss.backward()
                opt.step()
                opt.zero_grad()
                l = loss.detach().clone()
                dist.all_reduce(l, op=dist.ReduceOp.AVG)
                losses.append(l.item())
                if between:
                    between()
            return losses
    """) + textwrap.dedent(body))
    env = dict(os.environ, NEURON_SIM="1")
    # --standalone: torchrun's own rendezvous on a port it finds free
    # a run expected to fail (a rank dies): torchrun's agent stops the other
    # ranks at its next check after the death -- every 0.1 s by default,
    # which on a loaded 2-core machine can come before a survivor has seen
    # the death and written its error; 5 s leaves it that time
    mon = [] if expect_ok else ["--monitor-interval", "5"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *mon,
           str(script), str(tmp_path)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if expect_ok:
        assert r.returncode == 0, r.stderr[-4000:]
    res = {}
    for k in range(nproc):
        p = tmp_path / f"rank{k}.json"
        res[k] = [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []
    return res, r


def test_every_collective_gives_gloos_values_on_neuron_tensors(tmp_path):
    res, _ = torchrun(tmp_path, """
        dist.init_process_group()                      # the device's default backend: neuron
        r, n = dist.get_rank(), dist.get_world_size()
        dev = torch.device("neuron", torch.neuron.current_device())   # LOCAL_RANK
        got = {"backend": dist.get_backend_config()}
        x = torch.arange(6, dtype=torch.float32).to(dev) + r
        dist.all_reduce(x); got["sum"] = x.cpu().tolist()
        y = torch.full((3,), float(r)).to(dev); dist.all_reduce(y, op=dist.ReduceOp.AVG); got["avg"] = y.cpu().tolist()
        m = torch.tensor([r, -r], dtype=torch.int32).to(dev); dist.all_reduce(m, op=dist.ReduceOp.MAX)
        got["max"] = m.cpu().tolist()
        b = torch.full((4,), float(r + 10)).to(dev); dist.broadcast(b, src=1); got["bcast"] = b.cpu().tolist()
        o = torch.empty(2 * n).to(dev); dist.all_gather_into_tensor(o, torch.full((2,), float(r)).to(dev))
        got["gather_t"] = o.cpu().tolist()
        lst = [torch.empty(2).to(dev) for _ in range(n)]; dist.all_gather(lst, torch.full((2,), float(r)).to(dev))
        got["gather_l"] = [t.cpu().tolist() for t in lst]
        rs = torch.empty(2).to(dev); dist.reduce_scatter_tensor(rs, torch.arange(2 * n, dtype=torch.float32).to(dev))
        got["rs"] = rs.cpu().tolist()
        rs_in = (torch.arange(2 * n, dtype=torch.float32) * (r + 1)).to(dev)
        for name, op in (("rs_max", dist.ReduceOp.MAX), ("rs_avg", dist.ReduceOp.AVG)):
            o = torch.empty(2).to(dev); dist.reduce_scatter_tensor(o, rs_in, op=op); got[name] = o.cpu().tolist()
        o = torch.empty(2).to(dev); dist.reduce_scatter(o, [torch.full((2,), float(r + i)).to(dev) for i in range(n)])
        got["rs_list"] = o.cpu().tolist()
        a = torch.empty(n).to(dev); dist.all_to_all_single(a, torch.arange(n, dtype=torch.float32).to(dev) + 100 * r)
        got["a2a"] = a.cpu().tolist()
        # uneven splits: rank 0 sends 1 element to each, rank 1 sends 2 to each
        u = torch.empty(3 if r == 0 else 3).to(dev)
        dist.all_to_all_single(u, torch.arange(2 * (r + 1), dtype=torch.float32).to(dev) + 10 * r,
                               output_split_sizes=[1, 2], input_split_sizes=[r + 1, r + 1])
        got["a2a_uneven"] = u.cpu().tolist()
        if r == 0:
            dist.send(torch.tensor([7.0, 8.0]).to(dev), 1)
        else:
            z = torch.empty(2).to(dev); dist.recv(z, 0); got["recv"] = z.cpu().tolist()
        w = dist.all_reduce(torch.ones(2).to(dev), async_op=True); w.wait(); got["async"] = w.is_completed()
        ca, cb = torch.ones(2).to(dev), torch.full((3,), 2.0).to(dev)
        torch_neuronsim.reset_stats()
        with dist._coalescing_manager(async_ops=True) as cm:   # one collective of 20 bytes
            dist.all_reduce(ca)
            dist.all_reduce(cb)
        cm.wait()
        s = torch_neuronsim.stats()
        got["coalesced"] = ca.cpu().tolist() + cb.cpu().tolist() + [s["collectives"], s["collective_bytes"]]
        dist.barrier()
        from torch.distributed._functional_collectives import all_reduce as far
        got["functional"] = far(torch.ones(2).to(dev), "sum", dist.group.WORLD).cpu().tolist()
        c = torch.full((2,), float(r)); dist.all_reduce(c); got["cpu"] = c.tolist()   # CPU tensors too
        pg = dist.group.WORLD
        ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2).to(dev))   # alive at exit
        dist.destroy_process_group()
        try:
            pg.allreduce([torch.ones(1).to(dev)])
        except RuntimeError as e:
            got["after"] = str(e)
        out(got)
    """)
    for r in (0, 1):
        g = res[r][0]
        assert "neuron:neuron" in g["backend"], g["backend"]
        assert g["sum"] == [1.0, 3.0, 5.0, 7.0, 9.0, 11.0] and g["avg"] == [0.5] * 3 and g["max"] == [1, 0]
        assert g["bcast"] == [11.0] * 4 and g["gather_t"] == [0.0, 0.0, 1.0, 1.0]
        assert g["gather_l"] == [[0.0, 0.0], [1.0, 1.0]] and g["rs"] == [[0.0, 2.0], [4.0, 6.0]][r]
        assert g["rs_max"] == [[0.0, 2.0], [4.0, 6.0]][r] and g["rs_avg"] == [[0.0, 1.5], [3.0, 4.5]][r]
        assert g["rs_list"] == [[1.0, 1.0], [3.0, 3.0]][r]
        assert g["a2a"] == [[0.0, 100.0], [1.0, 101.0]][r] and g["async"] is True
        assert g["a2a_uneven"] == [[0.0, 10.0, 11.0], [1.0, 12.0, 13.0]][r]
        assert g["functional"] == [2.0, 2.0] and g["cpu"] == [1.0, 1.0]
        assert g["coalesced"] == [2.0, 2.0, 4.0, 4.0, 4.0, 1, 20]
        assert "was destroyed" in g["after"]
    assert res[1][0]["recv"] == [7.0, 8.0]


# vocab 102: FSDP2's dim-0 shards of the embedding and lm_head are uneven
# over 4 ranks (26, 26, 26, 24), which it pads on the device
LLAMA = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=4, vocab_size=102,
             num_hidden_layers=2)


def reference_training():
    """one process, the whole batch: the losses and first parameters that
    every parallel mode must reproduce"""
    import transformers as T
    torch.manual_seed(0)
    model = T.LlamaForCausalLM(T.LlamaConfig(**LLAMA)).to(NEURON)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    data = torch.randint(0, 100, (4, 12), generator=torch.Generator().manual_seed(1)).to(NEURON)
    losses = []
    for _ in range(2):
        loss = model(data, labels=data).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, [p.detach().cpu() for p in list(model.parameters())[:4]]


@pytest.mark.parametrize("nproc", [2, 4])
def test_ddp_fsdp2_and_tensor_parallel_training_match_one_process(tmp_path, nproc):
    res, _ = torchrun(tmp_path, f"""
        import transformers as T
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        dist.init_process_group(backend="neuron")
        r, n = dist.get_rank(), dist.get_world_size()
        dev = torch.device("neuron", torch.neuron.current_device())   # LOCAL_RANK
        data = torch.randint(0, 100, (4, 12), generator=torch.Generator().manual_seed(1))
        mine = data[r * (4 // n):(r + 1) * (4 // n)].to(dev)

        def make():
            torch.manual_seed(0)
            return T.LlamaForCausalLM(T.LlamaConfig(**{LLAMA!r})).to(dev)


        def first(model):
            ps = list(model.parameters())[:4]
            return [(p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu().flatten().tolist() for p in ps]

        got = {{}}
        m = make()
        got["ddp"] = (train(torch.nn.parallel.DistributedDataParallel(m), mine), first(m))
        m = make()
        for layer in m.model.layers:
            fully_shard(layer)
        fully_shard(m)
        got["fsdp2"] = (train(m, mine), first(m))
        m = make()
        mesh = init_device_mesh("neuron", (n,))
        for layer in m.model.layers:
            parallelize_module(layer.self_attn, mesh, {{"q_proj": ColwiseParallel(), "k_proj": ColwiseParallel(),
                                                       "v_proj": ColwiseParallel(), "o_proj": RowwiseParallel()}})
            parallelize_module(layer.mlp, mesh, {{"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(),
                                                 "down_proj": RowwiseParallel()}})
        # plain tensors (embeddings, norms) beside DTensors: the per-tensor
        # optimizer path, as PyTorch's foreach kernels take one kind per group
        got["tp"] = (train(m, data.to(dev), foreach=False), first(m))
        out(got)
        dist.destroy_process_group()
    """, nproc=nproc)
    want_losses, want_params = reference_training()
    for r in range(nproc):
        for mode in ("ddp", "fsdp2", "tp"):
            losses, params = res[r][0][mode]
            assert losses == pytest.approx(want_losses, rel=2e-4), (mode, r)
            for p, w in zip(params, want_params):
                torch.testing.assert_close(torch.tensor(p), w.flatten(), rtol=1e-4, atol=2e-5,
                                           msg=lambda m: f"{mode} rank {r}: {m}")


def test_fsdp2_evaluates_between_training_steps(tmp_path):
    """an evaluation forward (no backward) between FSDP2 steps: FSDP2's
    streams wait on events the neuron streams recorded; training is the
    same as without it.  Each rank runs on the core of its LOCAL_RANK."""
    res, _ = torchrun(tmp_path, f"""
        import transformers as T
        from torch.distributed.fsdp import fully_shard
        dist.init_process_group(backend="neuron")
        r, n = dist.get_rank(), dist.get_world_size()
        dev = torch.device("neuron", torch.neuron.current_device())
        data = torch.randint(0, 100, (4, 12), generator=torch.Generator().manual_seed(1))
        mine = data[r * (4 // n):(r + 1) * (4 // n)].to(dev)
        torch.manual_seed(0)
        m = T.LlamaForCausalLM(T.LlamaConfig(**{LLAMA!r})).to(dev)
        for layer in m.model.layers:
            fully_shard(layer)
        fully_shard(m)
        evals = []

        def evaluate():
            m.eval()
            with torch.no_grad():
                evals.append(m(mine, labels=mine).loss.item())
            m.train()
        losses = train(m, mine, between=evaluate)
        out({{"device": str(dev), "losses": losses, "evals": evals}})
        dist.destroy_process_group()
    """)
    want_losses, _ = reference_training()
    for r in range(2):
        got = res[r][0]
        assert got["device"] == f"neuron:{r}"
        assert got["losses"] == pytest.approx(want_losses, rel=2e-4)
        assert all(e == e and e > 0 for e in got["evals"])


def test_accelerate_launch_puts_each_rank_on_its_core_under_strict(tmp_path):
    """`accelerate launch --num_processes 2`, NEURON_STRICT=1, the documented
    order (the optimizer built before prepare moves the model), no
    destroy_process_group at the end: each rank trains on neuron:LOCAL_RANK
    and exits cleanly"""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys, torch, torch_neuronsim
        from accelerate import Accelerator
        acc = Accelerator()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        data = torch.utils.data.TensorDataset(torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g))
        model, opt, dl = acc.prepare(model, opt, torch.utils.data.DataLoader(data, batch_size=4))
        first = acc.unwrap_model(model)[0].weight
        before = first.detach().cpu().clone()
        for x, y in dl:
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            opt.zero_grad()
        with open(os.path.join(sys.argv[1], f"rank{acc.process_index}.json"), "w") as f:
            json.dump({"device": str(acc.device), "param": str(first.device),
                       "trained": not torch.equal(before, first.detach().cpu()),
                       "fallbacks": torch_neuronsim.stats()["cpu_fallbacks"]}, f)
    """))
    env = dict(os.environ, NEURON_SIM="1", NEURON_STRICT="1")
    r = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
                        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                        str(script), str(tmp_path)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    for k in range(2):
        got = json.loads((tmp_path / f"rank{k}.json").read_text())
        assert got == {"device": f"neuron:{k}", "param": f"neuron:{k}", "trained": True, "fallbacks": 0}


def test_a_collective_takes_the_model_time_after_the_last_arrival(tmp_path):
    res, _ = torchrun(tmp_path, """
        import ctypes
        from torch_neuronsim import _lib
        from torch_neuronsim.device import _call, _stream_time_ps
        dist.init_process_group(backend="neuron")
        dev = torch.device("neuron", torch.neuron.current_device())   # LOCAL_RANK
        big = torch.ones(1 << 20).to(dev)                      # 4 MiB
        dist.barrier()
        sid = torch.neuron.current_stream().stream_id
        if dist.get_rank() == 1:                               # rank 1 arrives 1 ms of device time late
            _call(_lib.neuron_stream_wait_until, dev.index, sid, ctypes.c_uint64(_stream_time_ps(dev.index, sid) + 10**9))
        t0 = _stream_time_ps(dev.index, sid)
        torch_neuronsim.reset_stats()
        dist.all_reduce(big)
        s = torch_neuronsim.stats()
        t1 = _stream_time_ps(dev.index, sid)
        first = big[:2].cpu().tolist()
        # async: compute issued before wait() overlaps the collective, which
        # runs on the device's collective stream
        m = torch.randn(512, 512).to(dev)
        dist.barrier()
        ta = _stream_time_ps(dev.index, sid)
        work = dist.all_reduce(big, async_op=True)
        tb = _stream_time_ps(dev.index, sid)
        for _ in range(4):
            m = m @ m / 512
        tc = _stream_time_ps(dev.index, sid)
        work.wait()
        td = _stream_time_ps(dev.index, sid)
        # DDP's path: the future completes on the collective stream; a
        # stream that waits on it waits for the collective's end
        fut = dist.all_reduce(big, async_op=True).get_future()
        te = _stream_time_ps(dev.index, sid)
        fut.wait()
        tf = _stream_time_ps(dev.index, sid)
        out({"t0": t0, "t1": t1, "coll": s["collectives"], "coll_ns": s["collective_time_ns"],
             "wait_ns": s["collective_wait_ns"], "exposed_ns": s["collective_exposed_ns"],
             "big": first, "async": [ta, tb, tc, td, te, tf]})
        dist.destroy_process_group()
    """)
    import neuronsim
    model_ps = round(neuronsim.collective_estimate("all_reduce", 2, 4 << 20, torch_neuronsim.target())["us"] * 1e6)
    a, b = res[0][0], res[1][0]
    assert a["big"] == b["big"] == [2.0, 2.0] and a["coll"] == b["coll"] == 1
    # both end at the late rank's arrival plus the model's time
    assert a["t1"] == b["t1"] == max(a["t0"], b["t0"]) + model_ps
    assert a["coll_ns"] == b["coll_ns"] == model_ps // 1000
    assert a["wait_ns"] >= 999_000 and b["wait_ns"] == 0
    # a synchronous all_reduce: the caller's stream stood still from its arrival to the end
    for r in (a, b):
        assert r["exposed_ns"] == (r["t1"] - r["t0"]) // 1000
    # async_op: the call does not hold the stream up; the matmuls run
    # meanwhile; wait() ends at the collective's end or the compute's,
    # whichever is later -- not their sum
    start = max(a["async"][0], b["async"][0])
    for r in (a, b):
        ta, tb, tc, td, te, tf = r["async"]
        assert tb == ta and tc > tb
        assert td == max(tc, start + model_ps)
        assert te == td and tf == td + model_ps   # the next one queued behind nothing: full time exposed


def test_mismatched_collectives_raise_on_every_rank(tmp_path):
    res, _ = torchrun(tmp_path, """
        dist.init_process_group(backend="neuron")
        r = dist.get_rank()
        try:
            dist.all_reduce(torch.ones(3 + r).to("neuron"))
            out({"error": None})
        except RuntimeError as e:
            out({"error": str(e)})
        dist.destroy_process_group()
    """)
    for r in (0, 1):
        msg = res[r][0]["error"]
        assert msg and "collective mismatch" in msg and "3 elements" in msg and "4 elements" in msg, msg


def test_a_dead_rank_makes_the_others_fail_not_hang(tmp_path):
    res, r = torchrun(tmp_path, """
        dist.init_process_group(backend="neuron", timeout=datetime.timedelta(seconds=20))
        dist.all_reduce(torch.ones(2).to("neuron"))
        if dist.get_rank() == 1:
            os._exit(3)                               # killed mid-step
        try:
            dist.all_reduce(torch.ones(2).to("neuron"))
            out({"error": None})
        except RuntimeError as e:
            out({"error": type(e).__name__ + ": " + str(e)[:300]})
    """, expect_ok=False)
    assert r.returncode != 0                                   # torchrun reports the dead rank
    assert res[0] and res[0][0]["error"], res                 # rank 0 got an error, not a hang


def test_the_backend_is_registered_for_the_device(tmp_path):
    assert "neuron" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["neuron"] == "neuron"
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("cpu:gloo,neuron:neuron", store=store, rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    try:
        x = torch.arange(4.0).to(NEURON)
        torch_neuronsim.reset_stats()
        dist.all_reduce(x)
        assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
        assert torch_neuronsim.stats()["collectives"] == 1   # one rank: no time, but counted
        with pytest.raises(RuntimeError, match="PREMUL_SUM"):
            dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
    finally:
        dist.destroy_process_group()


def test_per_rank_traces_merge_into_one_with_collectives_aligned(tmp_path):
    """each rank profiles its device; `neuronsim trace merge` joins the
    traces (Perfetto and Chrome JSON alike) into one process per rank, and a
    collective's slice starts at the same simulated time on every rank"""
    torchrun(tmp_path, """
        dist.init_process_group(backend="neuron")
        r = dist.get_rank()
        x = torch.randn(128, 64 * (r + 1)).to("neuron")           # rank 1 computes longer
        ext = ".pftrace" if r == 0 else ".json"
        with torch_neuronsim.profile(path=os.path.join(sys.argv[1], f"trace{r}{ext}")):
            y = (x @ x.T).sum(0)
            dist.all_reduce(y)
            y.relu()
        dist.destroy_process_group()
    """)
    from neuronsim_trace.__main__ import main as trace_main
    out = tmp_path / "merged.json"
    assert trace_main(["merge", str(tmp_path / "trace0.pftrace"), str(tmp_path / "trace1.json"), "-o", str(out),
                       "--labels", "host a,host b"]) == 0
    events = json.loads(out.read_text())["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert procs == {1: "host a", 2: "host b"}
    threads = {(e["pid"], e["args"]["name"]) for e in events if e.get("name") == "thread_name"}
    for pid in (1, 2):                    # rank r on core r (LOCAL_RANK)
        assert (pid, f"NeuronCore {pid - 1} / TensorE") in threads
    tid_name = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    coll = [e for e in events if e.get("ph") == "X" and e["name"].startswith("all_reduce")]
    assert len(coll) == 2 and {e["pid"] for e in coll} == {1, 2}
    assert {(e["pid"], tid_name[(e["pid"], e["tid"])]) for e in coll} == {(1, "NeuronCore 0 / Collectives"),
                                                                           (2, "NeuronCore 1 / Collectives")}
    assert all(e["args"]["bytes"] == 128 * 4 for e in coll)
    assert all(e["args"]["peers"] == "0-1" and e["args"]["algorithm"] == "mesh" for e in coll)
    assert coll[0]["ts"] == pytest.approx(coll[1]["ts"], abs=1e-3) and coll[0]["dur"] == pytest.approx(coll[1]["dur"])
    assert trace_main(["merge", str(tmp_path / "trace0.pftrace"), "-o", str(out), "--labels", "a,b"]) == 1
    # the same merge as one Perfetto file: a process track per rank, the
    # collective's slices at the same time with their arguments
    from neuronsim_trace import load
    pf = tmp_path / "merged.pftrace"
    assert trace_main(["merge", str(tmp_path / "trace0.pftrace"), str(tmp_path / "trace1.json"), "-o", str(pf)]) == 0
    merged = load(pf)
    assert merged.kind == "perfetto"
    pcoll = [s for s in merged.slices if s.name.startswith("all_reduce")]
    assert sorted(merged.tracks[s.track].process for s in pcoll) == ["rank 0", "rank 1"]
    assert sorted(merged.tracks[s.track].name for s in pcoll) == ["NeuronCore 0 / Collectives",
                                                                   "NeuronCore 1 / Collectives"]
    assert pcoll[0].start_ns == pytest.approx(pcoll[1].start_ns, abs=1) and pcoll[0].start_ns == pytest.approx(
        coll[0]["ts"] * 1000, abs=1)
    assert all(s.args["peers"] == "0-1" and s.args["bytes"] == 128 * 4 for s in pcoll)
    # every slice of both ranks made it, none left open
    assert len(merged.slices) == sum(1 for e in events if e.get("ph") == "X")


def test_one_process_stands_for_a_symmetric_mesh_in_timing_mode():
    """SymmetricStore: one process is every rank of a 32-rank world; its
    groups move no data and charge the model's time for their real size and
    placement -- a DeviceMesh's 4-rank and 8-rank dimensions each their own"""
    import subprocess
    script = textwrap.dedent("""
        import json, torch, torch.distributed as dist, torch_neuronsim, neuronsim
        from torch.distributed.device_mesh import init_device_mesh
        from torch_neuronsim.distributed import SymmetricStore
        dist.init_process_group("neuron", store=SymmetricStore(), rank=0, world_size=32)
        mesh = init_device_mesh("neuron", (8, 4), mesh_dim_names=("dp", "tp"))
        x = torch.ones(1 << 18).to("neuron")                      # 1 MiB
        got = {}
        for dim in ("dp", "tp"):
            torch_neuronsim.reset_stats()
            dist.all_reduce(x, group=mesh[dim].get_group())
            s = torch_neuronsim.stats()
            got[dim] = [mesh[dim].size(), s["collectives"], s["collective_time_ns"]]
        torch_neuronsim.reset_stats()
        dist.all_gather_into_tensor(torch.empty(32 << 18).to("neuron"), x)
        got["world"] = [dist.get_world_size(), torch_neuronsim.stats()["collective_time_ns"]]
        print(json.dumps(got))
        dist.destroy_process_group()
    """)
    r = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, NEURON_SIM="1", NEURON_SIM_MODE="timing"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    import neuronsim

    def model_ns(op, ranks, nbytes):
        return round(neuronsim.collective_estimate(op, ranks, nbytes, torch_neuronsim.target())["us"] * 1e6) // 1000
    # rank 0's groups by their global ranks: dp strided (0, 4, ..., 28:
    # four chips of eight cores), tp contiguous (0-3: one chip)
    for dim, ranks in (("dp", list(range(0, 32, 4))), ("tp", [0, 1, 2, 3])):
        size, count, ns = got[dim]
        assert size == len(ranks) and count == 1 and ns == model_ns("all_reduce", ranks, 1 << 20)
    if torch_neuronsim.target() == "trn2":   # the strided group crosses chips: it costs more than 8 in a row
        assert got["dp"][2] > model_ns("all_reduce", 8, 1 << 20)
    assert got["world"] == [32, model_ns("all_gather", 32, 32 << 20)]
