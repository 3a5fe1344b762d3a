"""The `neuron` device in PyTorch (tests in the style of OpenReg's suite):
device registration and autoload, memory, copies in every direction with
strided and non-contiguous tensors, views sharing storage, printing,
save/load, autograd through the CPU fallback, out-of-memory, strict mode,
statistics, threads."""
import io
import os
import subprocess
import sys
import threading
import warnings

import pytest
import torch

warnings.filterwarnings("ignore", message="neuron: operator")
import torch_neuronsim  # noqa: E402  (already loaded by torch's autoload)

NEURON = torch.device("neuron")


def run_py(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                          text=True, env=e, timeout=300)


def test_autoload_without_importing_the_package():
    r = run_py("import torch; x = torch.arange(6., device='neuron').view(2, 3); print(x.t() + 1)")
    assert r.returncode == 0, r.stderr
    assert "tensor([[1., 4.],\n        [2., 5.],\n        [3., 6.]], device='neuron:0')" in r.stdout


def test_importing_the_package_before_torch():
    r = run_py("import torch_neuronsim, torch; print(torch.ones(2, device='neuron') * 3)")
    assert r.returncode == 0, r.stderr
    assert "tensor([3., 3.], device='neuron:0')" in r.stdout


def test_device_module():
    assert torch.neuron.is_available()
    assert torch.neuron.device_count() == 8          # trn2: 8 NeuronCores
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(3):
        assert torch.neuron.current_device() == 3
        t = torch.ones(2, device="neuron")
        assert t.device == torch.device("neuron", 3)
    assert torch.neuron.current_device() == 0
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.neuron.set_device(99)
    assert torch.neuron.is_bf16_supported()
    assert torch.ones(1).neuron().is_neuron


def test_visible_cores_follow_the_environment():
    r = run_py("import torch; print(torch.neuron.device_count())", NEURON_RT_VISIBLE_CORES="0-2")
    assert r.stdout.strip() == "3", r.stderr
    r = run_py("import torch; print(torch.neuron.device_count())",
               NEURON_PLATFORM_TARGET_OVERRIDE="trn1")
    assert r.stdout.strip() == "2", r.stderr


def test_simulator_use_is_logged_once_unless_requested():
    env = {k: v for k, v in os.environ.items() if k != "NEURON_SIM"}
    r = subprocess.run([sys.executable, "-W", "ignore", "-c",
                        "import torch; torch.ones(1, device='neuron'); torch.ones(2, device='neuron')"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("no Trainium runtime found") == 1
    r = run_py("import torch; torch.ones(1, device='neuron')", NEURON_SIM="1")
    assert "no Trainium runtime found" not in r.stderr


def test_hardware_request_fails_clearly():
    r = run_py("import torch; torch.ones(1, device='neuron')", NEURON_SIM="0")
    assert r.returncode != 0
    assert "no hardware runtime" in r.stderr


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_round_trip_copies(dtype):
    src = (torch.arange(24) % 5).to(dtype).view(2, 3, 4)
    d = src.to("neuron")
    assert d.device.type == "neuron" and d.dtype == dtype
    assert torch.equal(d.cpu(), src)
    # device -> device, with a dtype change
    d2 = d.to(torch.float32)
    assert torch.equal(d2.cpu(), src.to(torch.float32))


def test_strided_and_non_contiguous_copies():
    src = torch.arange(60, dtype=torch.float32).view(3, 4, 5)
    d = src.to("neuron")
    for view in (lambda t: t.transpose(0, 2), lambda t: t[:, 1:3, ::2], lambda t: t.permute(2, 0, 1)):
        # device view -> host
        assert torch.equal(view(d).cpu(), view(src))
        # host non-contiguous -> device
        dd = view(src).to("neuron")
        assert torch.equal(dd.cpu(), view(src))
        # host -> strided device destination, leaving the other elements
        target = torch.zeros(3, 4, 5).to("neuron")
        view(target).copy_(view(src) + 100)
        want = torch.zeros(3, 4, 5)
        view(want).copy_(view(src) + 100)
        assert torch.equal(target.cpu(), want)
        # device -> strided device destination
        target2 = torch.zeros(3, 4, 5).to("neuron")
        view(target2).copy_(view(d))
        want2 = torch.zeros(3, 4, 5)
        view(want2).copy_(view(src))
        assert torch.equal(target2.cpu(), want2)


def test_views_share_storage():
    d = torch.zeros(4, 4, device="neuron")
    v = d.view(16)
    row = d[1]
    v[5] = 7.0                                    # element (1, 1)
    row.fill_(2.0)
    assert d.cpu()[1].tolist() == [2.0, 2.0, 2.0, 2.0]
    d.zero_()
    assert v.cpu().sum().item() == 0
    assert d.t().untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
    assert d.view(2, 8).is_contiguous() and not d.t().is_contiguous()


def test_view_ops_resolve_natively():
    x = torch.arange(24.0).view(2, 3, 4)
    d = x.to("neuron")
    torch_neuronsim.reset_stats()
    views = [lambda t: t.transpose(0, 1), lambda t: t.permute(2, 0, 1), lambda t: t[:, 1],
             lambda t: t[..., ::2], lambda t: t.unsqueeze(0), lambda t: t.expand(2, 2, 3, 4),
             lambda t: t.narrow(2, 1, 2), lambda t: t.select(0, 1), lambda t: t.diagonal(0, 1, 2),
             lambda t: t.unfold(2, 2, 1), lambda t: t.split(1, 0)[0], lambda t: t.reshape(6, 4),
             lambda t: t.flatten(), lambda t: t.movedim(0, 2), lambda t: t.unbind(0)[0],
             lambda t: t.view(torch.int32), lambda t: t.mT, lambda t: t.as_strided((2, 2), (1, 1))]
    made = [v(d) for v in views]
    assert torch_neuronsim.stats()["cpu_fallbacks"] == 0       # metadata only, on the device
    for v, m in zip(views, made):
        assert m.device.type == "neuron"
        assert torch.equal(m.cpu(), v(x))


def test_scalars_and_printing():
    d = torch.tensor([1.5, -2.0, 3.25], device="neuron")
    assert d[2].item() == 3.25
    assert "device='neuron:0'" in repr(d)
    assert repr(d.cpu()) == repr(torch.tensor([1.5, -2.0, 3.25]))


def test_save_load_round_trip_through_cpu():
    d = torch.randn(5, 6).to("neuron")
    buf = io.BytesIO()
    torch.save(d.cpu(), buf)
    buf.seek(0)
    back = torch.load(buf).to("neuron")
    assert torch.equal(back.cpu(), d.cpu())


def test_autograd_small_mlp_matches_the_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    x, y = torch.randn(4, 8), torch.randn(4, 2)
    ref = torch.nn.functional.mse_loss(model(x), y)
    ref.backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model = model.neuron()
    loss = torch.nn.functional.mse_loss(model(x.neuron()), y.neuron())
    loss.backward()
    assert abs(loss.item() - ref.item()) < 1e-5
    for p, g in zip(model.parameters(), ref_grads):
        assert p.grad.device.type == "neuron"
        torch.testing.assert_close(p.grad.cpu(), g)


def test_caching_allocator_and_memory_stats():
    dev = 5                                     # a device no other test touches
    torch.neuron.empty_cache()
    base = torch.neuron.memory_allocated(dev)
    a = torch.empty(1000, dtype=torch.float32, device=f"neuron:{dev}")
    assert torch.neuron.memory_allocated(dev) == base + 4000
    assert torch.neuron.memory_reserved(dev) >= torch.neuron.memory_allocated(dev)
    segs = torch.neuron.memory_stats(dev)["segment.all.allocated"]
    del a
    assert torch.neuron.memory_allocated(dev) == base
    b = torch.empty(1000, dtype=torch.float32, device=f"neuron:{dev}")   # reuses the cached block
    assert torch.neuron.memory_stats(dev)["segment.all.allocated"] == segs
    peak = torch.neuron.max_memory_allocated(dev)
    assert peak >= base + 4000
    del b
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved(dev) == torch.neuron.memory_allocated(dev) == base
    torch.neuron.reset_peak_memory_stats(dev)
    assert torch.neuron.max_memory_allocated(dev) == base


def test_out_of_memory_then_keeps_working():
    keep = torch.arange(10, dtype=torch.float32).to("neuron")
    ooms = torch.neuron.memory_stats()["num_ooms"]
    with pytest.raises(torch.OutOfMemoryError, match="out of memory.*allocated and .* reserved"):
        torch.empty(200 * 2**30, dtype=torch.uint8, device="neuron")   # trn2 has 96 GiB
    assert torch.neuron.memory_stats()["num_ooms"] == ooms + 1
    x = torch.ones(1000, device="neuron")
    assert (x + keep.sum()).cpu()[0].item() == 46.0
    assert torch.equal(keep.cpu(), torch.arange(10, dtype=torch.float32))


def test_strict_mode_names_the_op_and_stats_count_fallbacks():
    # zeta has no native kernel (yet): it is the CPU fallback's
    r = run_py("import torch; x = torch.ones(2, device='neuron') + 1; torch.special.zeta(x, x).cpu()",
               NEURON_STRICT="1")
    assert r.returncode != 0
    assert "aten::special_zeta" in r.stderr and "NEURON_STRICT=1" in r.stderr
    torch_neuronsim.reset_stats()
    a = torch.ones(3, device="neuron") + 1
    torch.special.zeta(a, a).cpu()
    torch.special.zeta(a, a).cpu()
    s = torch_neuronsim.stats()
    assert s["cpu_fallbacks"] >= 2
    assert sum(v for k, v in s["fallback_ops"].items() if k.startswith("aten::special_zeta")) >= 2
    assert s["device_to_host_bytes"] > 0 and s["host_to_device_bytes"] > 0
    for key in ("programs_executed", "program_cache_hits", "program_cache_misses",
                "simulated_time_ns"):
        assert key in s


def test_stats_report_dma_active_time_as_the_profiler_defines_it():
    """dma_active_ps: time when at least one DMA engine moves data (SDK
    tools/neuron-explorer/profile-schema-reference.rst), the union of the
    engines' busy intervals, so at most their sum."""
    torch_neuronsim.reset_stats()
    x = torch.randn(256, 512, device="neuron")
    (x * 2.0).cpu()
    s = torch_neuronsim.stats()
    assert 0 < s["dma_active_ps"] < s["dma_busy_ps"]
    assert s["dma_active_ps"] <= s["simulated_time_ns"] * 1000


def test_stats_device_time_is_the_stream_clock():
    """One simulated clock: stats()' device time over some work is what the
    stream's events measure around it -- each program's launch charge plus
    its run, plus host-link copies -- and reports the parts apart."""
    a = torch.randn(64, 64, device="neuron")
    x = torch.zeros(1 << 16, dtype=torch.uint8)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    torch_neuronsim.reset_stats()
    start.record()
    for _ in range(5):
        a = (a @ a) * 0.01
    d = x.to("neuron")
    end.record()
    end.synchronize()
    s = torch_neuronsim.stats()
    assert s["programs_executed"] >= 10 and s["kernel_time_ns"] > 0 and s["transfer_time_ns"] > 0
    assert s["launch_time_ns"] == s["programs_executed"] * 15000     # the default launch charge
    parts = s["kernel_time_ns"] + s["launch_time_ns"] + s["transfer_time_ns"]
    assert abs(s["simulated_time_ns"] - parts) <= 2                  # each part rounded down to ns
    assert start.elapsed_time(end) * 1e6 == pytest.approx(s["simulated_time_ns"], abs=2)
    del d


def test_streams_and_events_report_simulated_time():
    dev = 6
    s = torch.neuron.Stream(dev)
    assert s != torch.neuron.default_stream(dev)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    x = torch.zeros(1 << 20, dtype=torch.uint8)             # 1 MiB over the host link
    with torch.neuron.device(dev), torch.neuron.stream(s):
        assert torch.neuron.current_stream(dev) == s
        start.record()
        d = x.to(f"neuron:{dev}")
        end.record()
    assert torch.neuron.current_stream(dev) == torch.neuron.default_stream(dev)
    ms = start.elapsed_time(end)
    # 1 MiB at the default 32 GB/s plus 2 us: 34.77 us
    assert abs(ms - (2e-3 + (1 << 20) / 32e9 * 1e3)) < 1e-6, ms
    # the default stream did not advance; waiting on s brings it level
    t0 = torch.neuron.Event(enable_timing=True)
    t0.record(torch.neuron.default_stream(dev))
    torch.neuron.default_stream(dev).wait_stream(s)
    t1 = torch.neuron.Event(enable_timing=True)
    t1.record(torch.neuron.default_stream(dev))
    assert t0.elapsed_time(t1) >= ms
    del d


def test_generic_torch_stream_and_event_api():
    s = torch.Stream(device="neuron:7")
    assert s.device.type == "neuron" and s.device_index == 7 and s.stream_id > 0
    e1, e2 = torch.Event(device="neuron:7", enable_timing=True), torch.Event(device="neuron:7",
                                                                           enable_timing=True)
    with torch.neuron.device(7), torch.neuron.stream(torch.neuron.Stream(7, _id=s.stream_id)):
        e1.record(s)
        d = torch.zeros(1 << 20, dtype=torch.uint8).to("neuron:7")
        e2.record(s)
    assert abs(e1.elapsed_time(e2) - (2e-3 + (1 << 20) / 32e9 * 1e3)) < 1e-6
    assert s.query() and e2.query()
    s.synchronize()
    del d


def test_what_fsdp2_asks_of_the_device():
    """FSDP2 / DTensor's device needs: set_data between neuron tensors,
    high-priority streams (torch.neuron.Stream is a torch.Stream), events
    recorded on one stream and waited on by another, wait_stream, and
    Tensor.record_stream (a CPU stream refused by name)"""
    dev = 5
    p = torch.nn.Parameter(torch.zeros(2, device=f"neuron:{dev}"))
    b = torch.arange(6.0).reshape(2, 3).to(f"neuron:{dev}")
    p.data = b                                             # set_data: new shape, same device type
    assert p.shape == (2, 3) and torch.equal(p.detach().cpu(), b.cpu())
    hi = torch.neuron.Stream(dev, priority=-1)
    assert isinstance(hi, torch.Stream) and hi.priority == -1 and torch.neuron.Stream(dev).priority == 0
    assert torch.neuron.Stream.priority_range() == (0, -1)
    cur = torch.neuron.current_stream(dev)
    done = torch.neuron.Event(enable_timing=True)
    x = torch.randn(256, 256)
    with torch.neuron.device(dev), torch.neuron.stream(hi):
        y = x.to(f"neuron:{dev}") @ x.to(f"neuron:{dev}")   # the "all-gather stream"'s work
        done.record(hi)
    before = torch.neuron.Event(enable_timing=True)
    before.record(cur)
    cur.wait_event(done)                                   # the consumer waits for the producer's event
    after = torch.neuron.Event(enable_timing=True)
    after.record(cur)
    assert before.elapsed_time(after) == before.elapsed_time(done) > 0   # level with the producer
    y.record_stream(cur)                                   # accepted: work finishes as issued
    y.record_stream(torch.Stream(device=f"neuron:{dev}"))
    with pytest.raises(RuntimeError, match="record_stream of a neuron tensor on a CPU stream"):
        y.record_stream(torch.Stream(device="cpu"))
    cur.wait_stream(hi)
    torch.testing.assert_close(y.cpu(), x @ x, rtol=1e-4, atol=1e-3)


def test_autocast_bf16_by_default():
    a, b = torch.randn(8, 8).neuron(), torch.randn(8, 8).neuron()
    assert torch.get_autocast_dtype("neuron") == torch.bfloat16
    with torch.autocast("neuron"):
        c = a @ b
        s = torch.softmax(c, dim=1)
        lin = torch.nn.functional.linear(a, b)
    assert c.dtype == torch.bfloat16 and lin.dtype == torch.bfloat16
    assert s.dtype == torch.float32
    ref = (a.cpu().bfloat16() @ b.cpu().bfloat16())
    torch.testing.assert_close(c.cpu(), ref, rtol=1e-2, atol=1e-2)
    with torch.autocast("neuron", dtype=torch.float16):
        assert (a @ b).dtype == torch.float16
    assert (a @ b).dtype == torch.float32                  # outside autocast


def test_random_numbers_follow_the_seed():
    torch.neuron.manual_seed(1234)
    a = torch.randn(16, device="neuron")
    state = torch.neuron.get_rng_state()
    b = torch.randn(16, device="neuron")
    torch.neuron.manual_seed(1234)
    assert torch.equal(torch.randn(16, device="neuron").cpu(), a.cpu())
    torch.neuron.set_rng_state(state)
    assert torch.equal(torch.randn(16, device="neuron").cpu(), b.cpu())
    assert torch.neuron.initial_seed() == 1234
    # its own stream, apart from the CPU generator
    torch.neuron.manual_seed(7)
    torch.default_generator.manual_seed(99)
    n1 = torch.randn(8, device="neuron")
    torch.neuron.manual_seed(7)
    torch.default_generator.manual_seed(12345)
    assert torch.equal(torch.randn(8, device="neuron").cpu(), n1.cpu())
    # explicit generators
    g = torch.Generator(device="neuron")
    assert g.device == torch.device("neuron", 0)
    g.manual_seed(5)
    a = torch.rand(4, device="neuron", generator=g)
    g.manual_seed(5)
    assert torch.equal(torch.rand(4, device="neuron", generator=g).cpu(), a.cpu())
    x = torch.ones(1000, device="neuron")
    torch.neuron.manual_seed(3)
    d1 = torch.nn.functional.dropout(x, 0.5)
    torch.neuron.manual_seed(3)
    assert torch.equal(torch.nn.functional.dropout(x, 0.5).cpu(), d1.cpu())


def test_pinned_host_memory():
    x = torch.arange(10.0).pin_memory()
    assert x.is_pinned() and not torch.arange(3.0).is_pinned()
    assert torch.equal(x.to("neuron", non_blocking=True).cpu(), torch.arange(10.0))


def test_two_threads_on_two_devices():
    results = {}

    def work(dev):
        torch.neuron.set_device(dev)
        a = torch.full((64, 64), float(dev + 1), device=f"neuron:{dev}")
        for _ in range(5):
            a = a @ torch.eye(64, device=f"neuron:{dev}") + 1
        results[dev] = (a.device.index, a.cpu())

    threads = [threading.Thread(target=work, args=(d,)) for d in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for dev in (0, 1):
        index, val = results[dev]
        assert index == dev
        assert torch.equal(val, torch.full((64, 64), float(dev + 1 + 5)))


def test_device_properties_name_memory_and_cores():
    """torch.neuron.get_device_properties / get_device_name as libraries call
    the torch.cuda ones: the simulated NeuronCore, the chip's HBM, its cores."""
    import neuronsim
    info = neuronsim.chip_info(torch_neuronsim.target())
    p = torch.neuron.get_device_properties(0)
    assert p.name == torch.neuron.get_device_name("neuron:0") == f"{info['core_name']} ({info['target']}, neuronsim)"
    assert p.total_memory == info["hbm_bytes"] and p.multi_processor_count == info["cores"]
    assert torch.neuron.get_device_properties(torch.device("neuron", 1)).target == info["target"]
    with pytest.raises(ValueError, match=r"device 99 does not exist \(\d+ visible\)"):
        torch.neuron.get_device_properties(99)


def test_mem_get_info_follows_device_allocations():
    free0, total = torch.neuron.mem_get_info()
    assert total == torch.neuron.get_device_properties().total_memory and 0 < free0 <= total
    x = torch.empty(64 << 20, dtype=torch.uint8, device="neuron")     # 64 MiB
    free1, _ = torch.neuron.mem_get_info(0)
    assert free0 - free1 >= 64 << 20
    del x


def test_amp_autocast_and_grad_scaler_train_like_cpu():
    """torch.neuron.amp.autocast is torch.autocast("neuron") (bf16 by
    default) and GradScaler torch.amp.GradScaler("neuron"): a scaled fp32
    step gives the CPU's weights."""
    a = torch.randn(8, 8).neuron()
    with torch.neuron.amp.autocast():
        assert (a @ a).dtype == torch.bfloat16
    with torch.neuron.amp.autocast(dtype=torch.float16):
        assert (a @ a).dtype == torch.float16

    def step(dev):
        torch.manual_seed(0)
        lin = torch.nn.Linear(16, 4).to(dev)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        scaler = torch.neuron.amp.GradScaler(init_scale=1024.0) if dev == "neuron" else \
            torch.amp.GradScaler("cpu", init_scale=1024.0)
        x = torch.linspace(-1, 1, 32).reshape(2, 16).to(dev)
        loss = lin(x).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return lin.weight.detach().cpu(), scaler.get_scale()
    (w_dev, s_dev), (w_cpu, s_cpu) = step("neuron"), step("cpu")
    assert s_dev == s_cpu == 1024.0
    torch.testing.assert_close(w_dev, w_cpu, rtol=1e-5, atol=1e-6)


def test_torch_accelerator_memory_api_reads_the_caching_allocator():
    """The allocator is a c10::DeviceAllocator: torch.accelerator.memory_*
    (device-generic, what libraries call) answers as torch.neuron.memory_*."""
    torch.neuron.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    base = torch.accelerator.memory_allocated()
    live0 = torch.accelerator.memory_stats()["allocation.all.current"]
    x = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    y = torch.empty(3000, dtype=torch.uint8, device="neuron")
    assert torch.accelerator.memory_allocated() == torch.neuron.memory_allocated() == base + (1 << 20) + 3000
    assert torch.accelerator.max_memory_allocated() == base + (1 << 20) + 3000
    assert torch.accelerator.memory_reserved() == torch.neuron.memory_reserved() >= base + (1 << 20) + 3000
    s = torch.accelerator.memory_stats()
    assert s["allocation.all.current"] == live0 + 2 and s["allocation.all.peak"] >= live0 + 2
    assert s["requested_bytes.all.current"] == s["allocated_bytes.all.current"]
    del x, y
    assert torch.accelerator.memory_allocated() == base
    assert torch.accelerator.max_memory_allocated() == base + (1 << 20) + 3000     # until reset
    assert torch.accelerator.memory_stats()["allocation.all.freed"] >= 2
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.max_memory_allocated() == base
    torch.accelerator.reset_accumulated_memory_stats()
    assert torch.accelerator.memory_stats()["allocation.all.freed"] == 0
    torch.accelerator.empty_cache()
    assert torch.accelerator.memory_reserved() == torch.neuron.memory_reserved()
    free, total = torch.accelerator.get_memory_info()
    assert (free, total)[1] == torch.neuron.mem_get_info()[1] and 0 < free <= total


def test_copy_between_cores_is_a_device_program_ordered_on_both_streams():
    """x.to("neuron:3") from neuron:2 is one DMA program (the cores share the
    chip's HBM), no host round trip: any layout, casts, int64; like a CUDA
    peer copy it starts when both devices' streams reach it, and the
    destination's stream waits for it."""
    a = torch.randn(96, 300)
    x = a.to("neuron:2")
    w = torch.randn(300, 300).to("neuron:2")
    s2, e2 = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    b3, f3 = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    torch.zeros(1, device="neuron:3")
    with torch.neuron.device(3):
        b3.record()
    with torch.neuron.device(2):
        s2.record()
        for _ in range(200):                         # work on core 2 only, until its clock
            w = (w @ w) * 1e-3                       # is past core 3's (events hold clocks)
            e2.record()
            if b3.elapsed_time(e2) > 0.05:
                break
    before = torch_neuronsim.stats()
    y = x.to("neuron:3")
    with torch.neuron.device(3):
        f3.record()
    f3.synchronize()
    z = x.t().to("neuron:3")                         # strided source
    h = x.to("neuron:3", dtype=torch.bfloat16)       # crosses, then casts on core 3
    i = torch.arange(-5, 5).to("neuron:2").to("neuron:3")
    after = torch_neuronsim.stats()
    assert y.device == torch.device("neuron:3") and torch.equal(y.cpu(), a)
    assert torch.equal(z.cpu(), a.t()) and torch.equal(h.cpu(), a.bfloat16())
    assert torch.equal(i.cpu(), torch.arange(-5, 5))
    assert after["cpu_fallbacks"] == before["cpu_fallbacks"]
    assert after["programs_executed"] > before["programs_executed"]
    assert after["device_to_host_bytes"] == before["device_to_host_bytes"]
    # core 3's stream waited for core 2's earlier work, which ran before the copy
    assert b3.elapsed_time(e2) > 0.05 and e2.elapsed_time(f3) > 0 and s2.elapsed_time(e2) > 0


def test_compile_backend_comes_from_the_public_entry_point():
    """torch.compile(backend="neuron") resolves through the package's
    torch_dynamo_backends entry point (the public route; no private Dynamo
    registry is touched), and a compiled function gives eager's values."""
    import inspect
    from importlib.metadata import entry_points
    import torch_neuronsim.compile as neuron_compile
    eps = {e.name: e.value for e in entry_points(group="torch_dynamo_backends")}
    assert eps.get("neuron") == "torch_neuronsim.compile:neuron_backend"
    assert "_COMPILER_FNS" not in inspect.getsource(neuron_compile)
    assert "neuron" in torch._dynamo.list_backends()
    x = torch.randn(64, 32).to("neuron")
    f = torch.compile(lambda t: torch.relu(t * 2.0 + 1.0), backend="neuron")
    torch.testing.assert_close(f(x).cpu(), torch.relu(x.cpu() * 2.0 + 1.0))


def test_compile_refuses_dynamic_true_with_the_neuron_compiler_message():
    """dynamic=True is refused as the Neuron compiler refuses dynamic shapes
    (NCC_EMOD025: static shapes, pad or bucket); dynamic=False and the
    default (Dynamo's own re-specialization after a shape change) run."""
    import torch._dynamo
    torch._dynamo.reset()
    x = torch.randn(4, 8).to("neuron")
    f = torch.compile(lambda t: t * 2.0 + 1.0, backend="neuron", dynamic=True)
    with pytest.raises(Exception, match=r"Dynamic shape is not supported: input '.*' has shape"
                                        r"(.|\n)*dynamic=False"):
        f(x)
    for dynamic in (False, None):
        torch._dynamo.reset()
        g = torch.compile(lambda t: t * 2.0 + 1.0, backend="neuron", dynamic=dynamic)
        for rows in (4, 5, 6):
            y = torch.randn(rows, 8)
            torch.testing.assert_close(g(y.to("neuron")).cpu(), y * 2.0 + 1.0)
