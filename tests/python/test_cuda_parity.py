"""What a script written for CUDA (or TorchNeuron) expects of the `neuron`
device, the traps of the SFT workflow (issue 38): events and streams that
are torch.Event / torch.Stream, one rank per core (LOCAL_RANK), operands on
two cores an error, Parameter identity across Module.to, torch.compile's
default backend, and the torch.cuda-like calls."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import neuronsim
import torch_neuronsim

NEURON = torch.device("neuron")


# ------------------------------------------------------------ events, streams
def test_neuron_events_are_torch_events_on_simulated_time():
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    assert isinstance(start, torch.Event) and start.device.type == "neuron"
    x = torch.randn(256, 256).to(NEURON)
    start.record()
    torch_neuronsim.reset_stats()
    x @ x
    end.record()
    assert end.device == torch.device("neuron", 0)
    ms = start.elapsed_time(end)
    assert ms * 1e6 >= torch_neuronsim.stats()["kernel_time_ns"] > 0
    # what a stream records is a torch.neuron.Event, on the stream's device
    s = torch.neuron.Stream(device=1)
    ev = s.record_event()
    assert isinstance(ev, torch.neuron.Event) and ev.device == torch.device("neuron", 1)


def test_a_stream_waits_on_any_torch_event_of_the_device():
    """FSDP2's evaluation path: torch.accelerator's stream waits on an event
    a neuron stream recorded, and a neuron stream on a torch.Event"""
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        y = torch.randn(512, 512).to(NEURON)
        y @ y
    ev = side.record_event()
    main = torch.accelerator.current_stream()
    before = torch.neuron.Event(enable_timing=True)
    before.record(main)
    main.wait_event(ev)                       # main's clock moves up to side's
    after = torch.neuron.Event(enable_timing=True)
    after.record(main)
    assert before.elapsed_time(after) > 0
    # a plain torch.Event recorded on a neuron stream, waited on by another
    with torch.neuron.stream(side):
        y @ y
    plain = torch.Event(device="neuron", enable_timing=True)
    plain.record(side)
    t0 = torch.neuron.Event(enable_timing=True)
    t0.record(main)
    torch.neuron.current_stream().wait_event(plain)
    t1 = torch.neuron.Event(enable_timing=True)
    t1.record(main)
    assert t0.elapsed_time(t1) > 0 and t0.elapsed_time(t1) == pytest.approx(t0.elapsed_time(plain))


# --------------------------------------------------------- one rank, one core
def _run(code, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "NEURON_RT_VISIBLE_CORES")}
    env = dict(base, NEURON_SIM="1", **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_current_device_follows_local_rank():
    code = """
        import torch, torch_neuronsim
        print(torch.neuron.current_device(), torch.ones(1).to("neuron").device, torch.neuron.device_count())
    """
    r = _run(code, LOCAL_RANK="3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "neuron:3", str(torch.neuron.device_count())]
    # one visible core per process (NEURON_RT_VISIBLE_CORES, as on hardware): core 0 of it
    r = _run(code, LOCAL_RANK="3", NEURON_RT_VISIBLE_CORES="5")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "neuron:0", "1"]
    # more ranks than visible cores: CUDA's default, device 0, and a warning
    r = _run(code, LOCAL_RANK="3", NEURON_RT_VISIBLE_CORES="4-5")
    assert r.returncode == 0 and r.stdout.split() == ["0", "neuron:0", "2"], r.stderr
    assert "LOCAL_RANK=3 but this process sees 2 NeuronCores" in r.stderr
    r = _run(code, LOCAL_RANK="rank-one")
    assert r.returncode != 0 and "LOCAL_RANK='rank-one' is not a process index" in r.stderr


def test_operands_on_two_cores_raise_as_on_cuda():
    a, b = torch.ones(4, 4).to("neuron:0"), torch.ones(4, 4).to("neuron:1")
    want = "Expected all tensors to be on the same device, but found at least two devices, neuron:0 and neuron:1"
    torch_neuronsim.reset_stats()
    for f in (torch.add, torch.mm, torch.igamma):        # igamma: no native kernel, the fallback's check
        with pytest.raises(RuntimeError, match=want):
            f(a, b)
    # what CUDA allows across devices: a 0-dim fill value, indices (moved to self's device)
    c = a.clone()
    c.fill_(torch.tensor(3.0).to("neuron:1"))
    assert torch.equal(c.cpu(), torch.full((4, 4), 3.0))
    with pytest.raises(RuntimeError, match="same device"):
        torch.cat([a, b])
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0          # nothing ran on the CPU instead
    # a CPU scalar beside a device tensor is fine, as on CUDA; so is a copy
    assert (a + torch.tensor(2.0)).device == a.device
    assert torch.equal(b.to("neuron:0").cpu(), a.cpu())


# ------------------------------------------------------- Parameter identity
def test_an_optimizer_built_before_the_move_trains_the_device_model():
    torch.manual_seed(0)
    m = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(m.parameters(), lr=0.1)
    w = m.weight
    m.to(NEURON)
    assert m.weight is w and m.weight.device.type == "neuron" and isinstance(m.weight, torch.nn.Parameter)
    before = m.weight.detach().cpu().clone()
    m(torch.ones(2, 4).to(NEURON)).sum().backward()
    opt.step()
    assert not torch.equal(before, m.weight.detach().cpu())
    m.to("cpu")
    assert m.weight is w and opt.param_groups[0]["params"][0] is w and w.device.type == "cpu"


# ------------------------------------------------------------ torch.compile
def test_compile_with_no_backend_uses_the_neuron_compiler():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    x = torch.randn(4, 8)
    want = m(x)
    m.to(NEURON)
    torch_neuronsim.reset_stats()
    got = torch.compile(m)(x.to(NEURON))
    assert torch_neuronsim.stats()["compile"]["graphs_compiled"] >= 1
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)


def test_compile_with_no_backend_leaves_cpu_graphs_to_inductor(monkeypatch):
    import torch._inductor.compile_fx as cfx
    seen = []

    def compile_fx(gm, inputs, **kw):
        seen.append([t.device.type for t in inputs if isinstance(t, torch.Tensor)])
        return gm.forward
    monkeypatch.setattr(cfx, "compile_fx", compile_fx)
    torch._dynamo.reset()
    torch.compile(lambda t: t * 2 + 1)(torch.ones(3))
    torch._dynamo.reset()
    assert seen == [["cpu"]]


# ------------------------------------------------------ torch.cuda-like calls
def test_the_cuda_like_calls():
    x = torch.randn(256, 256).to(NEURON)
    (x @ x).sum().item()
    summary = torch.neuron.memory_summary()
    assert "PyTorch NEURON memory summary, device ID 0" in summary and "Allocated memory" in summary
    assert "from large pool" not in torch.neuron.memory_summary(abbreviated=True)
    want = neuronsim.target_info(torch_neuronsim.target())["core_version"]
    assert torch.neuron.get_device_capability() == (want, 0)
    assert 0 < torch.neuron.utilization() <= 100
    with pytest.raises(ValueError, match="does not exist"):
        torch.neuron.utilization(99)
    assert torch.backends.neuron.is_built() and torch.backends.neuron.is_available()
    import torch.backends.neuron as tbn
    assert tbn is torch.backends.neuron


# ------------------------------------------------------------------ printing
def test_printing_runs_on_the_device_under_strict():
    """print(loss) and friends: the formatter's range finding in float32 on
    the device (NeuronCores have no float64), the text as on CPU"""
    r = _run("""
        import re, torch, torch_neuronsim
        g = torch.Generator().manual_seed(0)
        cases = [torch.tensor(1.2345), torch.randn(3, 4, generator=g), torch.randn(3, 4, generator=g).bfloat16(),
                 torch.tensor([1e-9, 1e9, 3.0]), torch.tensor([float("nan"), float("inf"), -1.0]),
                 torch.arange(10), torch.tensor([True, False]), torch.randn(2000, generator=g),
                 torch.randn(2, 3, dtype=torch.complex64, generator=g), torch.zeros(3).half()]
        for c in cases:
            got = re.sub(r",?\\s*device='neuron:0'", "", str(c.to("neuron")))
            assert " ".join(got.split()) == " ".join(str(c).split()), (got, str(c))
        print("fallbacks", torch_neuronsim.stats()["cpu_fallbacks"])
    """, NEURON_STRICT="1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["fallbacks", "0"]
