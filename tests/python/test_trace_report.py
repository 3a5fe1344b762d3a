"""`neuronsim trace report`: a self-contained HTML page that a headless
Chromium renders (screenshot checked for content, not a blank page)."""
import shutil
import subprocess

import numpy as np
import pytest
import torch

import torch_neuronsim


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no Chromium to render the report (scripts/setup.sh installs Debian's chromium)")


def test_report_renders_in_headless_chromium(neuronsim, tmp_path):
    x = torch.randn(128, 256, device="neuron")
    w = torch.randn(256, 256, device="neuron")
    trace = tmp_path / "r.pftrace"
    with torch_neuronsim.profile(trace):
        y = torch.nn.functional.gelu(x @ w)
        y = torch.softmax(y, dim=-1).sum(dim=0)
    html = tmp_path / "report.html"
    r = subprocess.run([str(neuronsim), "trace", "report", str(trace), "-o", str(html)], capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    page = html.read_text()
    assert "<svg" in page and "aten::mm" in page and "Roofline" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained
    shot = tmp_path / "shot.png"
    r = subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1200,1500", f"--screenshot={shot}", html.as_uri()],
                       capture_output=True, timeout=180)
    assert shot.exists(), r.stderr.decode()[-2000:]
    from PIL import Image
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    nonwhite = (img.sum(axis=2) < 600).mean()
    assert nonwhite > 0.02, f"screenshot nearly blank ({nonwhite:.4f} non-white)"
    # the timeline's engine blue and the roofline's red ceiling are on screen
    blue = ((abs(img[..., 0] - 0x2f) < 20) & (abs(img[..., 1] - 0x6f) < 20) & (abs(img[..., 2] - 0xb3) < 20))
    red = ((abs(img[..., 0] - 0xbb) < 30) & (img[..., 1] < 0x50) & (img[..., 2] < 0x50))
    assert blue.sum() > 200 and red.sum() > 50
