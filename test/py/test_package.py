"""The Debian package (issue 18.4): `dpkg-buildpackage` builds weir's .deb from debian/ in a
copy of the tree, the .deb installs, `weir --check` runs from the installed files (binary
and default config), the systemd unit passes `systemd-analyze verify`, and the package
removes and purges cleanly (nothing of it left behind).

PID 1 here is not systemd, so the unit is verified, not started: test_service.py runs its
start and stop hooks and the sd_notify protocol directly. Runs as root (dpkg); skipped
when the weir package is already installed by someone else (it would be replaced)."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = ["/usr/sbin/weir", "/usr/bin/weirctl", "/etc/weir/weir.cfg", "/etc/default/weir",
         "/lib/systemd/system/weir.service", "/usr/libexec/weir/weir-failopen",
         "/usr/share/weir/lua/examples/quota.lua", "/usr/share/doc/weir/install.md"]


def run(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 120)
    return subprocess.run(argv, **kw)


def installed():
    r = run(["dpkg-query", "-W", "-f=${Status}", "weir"])
    return r.returncode == 0 and "installed" in r.stdout and "not-installed" not in r.stdout


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("dpkg needs root")
    for tool in ("dpkg-buildpackage", "dh", "systemd-analyze"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} missing (scripts/install-deps installs it)")
    if installed():
        pytest.skip("a weir package is installed already; not replacing it")
    top = tmp_path_factory.mktemp("pkg")
    src = top / "weir-src"
    # The tracked and new files of the tree (no build directories, no results).
    files = run(["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard", "-z"]).stdout
    for name in files.split("\0"):
        if not name or name.startswith("docs/results/") or not (REPO / name).is_file():
            continue
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, src / name)
    # No debug-symbol package, every core: CI time (the build itself is ~1 min).
    env = dict(os.environ, DEB_BUILD_OPTIONS=f"nocheck noddebs parallel={os.cpu_count() or 1}")
    r = run(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=src, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = sorted(top.glob("weir_*_amd64.deb"))
    assert len(debs) == 1, list(top.iterdir())
    yield debs[0]
    if installed():
        run(["dpkg", "--purge", "weir"])


def test_install_check_verify_remove(deb):
    r = run(["dpkg", "-i", str(deb)])
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        for f in FILES:
            assert Path(f).exists(), f
        # weir --check from the installed binary on the installed default config.
        r = run(["/usr/sbin/weir", "--", "--config", "/etc/weir/weir.cfg", "--check"])
        assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
        r = run(["/usr/sbin/weir", "--", "--version"])
        assert r.returncode == 0 and r.stdout.startswith("weir "), r.stdout + r.stderr
        # An error in the installed config is FILE:LINE, as from the tree.
        r = run(["/usr/bin/weirctl", "--help"])
        assert r.returncode == 0, r.stderr
        r = run(["systemd-analyze", "verify", "/lib/systemd/system/weir.service"])
        assert r.returncode == 0, r.stdout + r.stderr
        # Nothing the verifier complains about, even as a warning.
        assert "weir.service" not in r.stderr, r.stderr
        # The hook finds the interfaces in the default config (PCI: none) and says so.
        r = run(["/usr/libexec/weir/weir-failopen", "status"])
        assert r.returncode == 0 and "nothing to do" in r.stdout, r.stdout + r.stderr
    finally:
        r = run(["dpkg", "-r", "weir"])
    assert r.returncode == 0, r.stdout + r.stderr
    for f in FILES:
        if not f.startswith("/etc/"):
            assert not Path(f).exists(), f"{f} left after dpkg -r"
    assert Path("/etc/weir/weir.cfg").exists()      # conffiles stay until purge
    r = run(["dpkg", "--purge", "weir"])
    assert r.returncode == 0, r.stdout + r.stderr
    for f in FILES + ["/etc/weir", "/usr/share/weir", "/usr/libexec/weir"]:
        assert not Path(f).exists(), f"{f} left after purge"
