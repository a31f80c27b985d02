"""Crash safety of the state store: SIGKILL during writes never leaves a half-written state."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numalign.errors import StateError
from numalign.node import store

WRITER = """
import sys
from pathlib import Path
from numalign.node import store
d = Path(sys.argv[1])
i = int(sys.argv[2])
big = ["x" * 200] * 2000  # ~400 kB per write: the kill lands mid-write often
print("ready", flush=True)
while True:
    i += 1
    store.save(d, "m1", {"generation": i, "filler": big})
"""


def test_roundtrip_and_refusals(tmp_path: Path) -> None:
    assert store.load(tmp_path, "m1") is None
    store.save(tmp_path, "m1", {"a": 1})
    assert store.load(tmp_path, "m1") == {"a": 1}
    with pytest.raises(StateError, match="another machine"):
        store.load(tmp_path, "m2")
    doc = json.loads((tmp_path / "state.json").read_text())
    doc["payload"]["a"] = 2
    (tmp_path / "state.json").write_text(json.dumps(doc))
    with pytest.raises(StateError, match="checksum mismatch"):
        store.load(tmp_path, "m1")
    (tmp_path / "state.json").write_text("{trunc")
    with pytest.raises(StateError, match="corrupt state"):
        store.load(tmp_path, "m1")
    (tmp_path / "state.json").write_text('{"hello": 1}')
    with pytest.raises(StateError, match="not a numalign node state"):
        store.load(tmp_path, "m1")


def test_sigkill_during_writes_leaves_old_or_new(tmp_path: Path) -> None:
    rng = random.Random(1234)
    store.save(tmp_path, "m1", {"generation": 0, "filler": []})
    last = 0
    for _round in range(25):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(last)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        payload = store.load(tmp_path, "m1")
        assert payload is not None
        gen = payload["generation"]
        # monotone: the state is the last complete write, never older than the previous round
        assert gen >= last
        if gen:
            assert payload["filler"] == ["x" * 200] * 2000
        last = gen
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # a killed writer may leave its temp file; it is never mistaken for the state
    assert all(name.startswith(".state.") for name in leftovers)
    assert last > 0


def test_lock_excludes_other_processes(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys,time;from pathlib import Path;from numalign.node import store\n"
         "with store.locked(Path(sys.argv[1])):\n print('held',flush=True);time.sleep(30)",
         str(tmp_path)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(StateError, match="locked by another numalign process"), store.locked(tmp_path, wait=False):
            pass
    finally:
        holder.kill()
        holder.wait()
    with store.locked(tmp_path, wait=False):
        pass


def test_lock_cleans_temp_files_of_killed_writers(tmp_path: Path) -> None:
    (tmp_path / ".state.abc.tmp").write_text("half")
    with store.locked(tmp_path):
        pass
    assert not (tmp_path / ".state.abc.tmp").exists()
