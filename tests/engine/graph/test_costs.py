"""Engine costs that grow with the model (issue 23): work per attribute, per module and
per pickle record that stays constant as the model grows."""

from __future__ import annotations

from typing import Any

import torch

from freezeview.engine.freeze import fold_picture


def _stack(n: int) -> torch.jit.ScriptModule:
    layers = [torch.nn.Linear(2, 2) for _ in range(n)]
    return torch.jit.script(torch.nn.Sequential(*layers).eval())


def _inlined(module: torch.jit.ScriptModule) -> torch._C.Graph:
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def test_fold_picture_sets_its_insert_point_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Setting a graph's insert point resets torch's count of inserts there, and with it
    the spacing of their positions: once per constant, a 100k-node graph was renumbered
    every forty constants. The constants still come first, in the order they are read."""
    module = _stack(6)
    graph = _inlined(module)
    guards = 0
    real = torch._C.Graph.insert_point_guard

    def counting(self: torch._C.Graph, point: Any) -> Any:
        nonlocal guards
        guards += 1
        return real(self, point)

    monkeypatch.setattr(torch._C.Graph, "insert_point_guard", counting)
    assert fold_picture.fold_graph(graph, module._c, set()) == set()
    assert guards == 1
    names = [node.output().debugName() for node in graph.nodes()][:12]
    expect = [f"self.{i}.{w}" for i in range(6) for w in ("weight", "bias")]
    # torch may suffix a debug name with a number; the paths and their order are what count.
    assert [name.split("_")[0] if name.count(".") == 2 else name for name in names] == expect
    assert not graph.findAllNodes("prim::GetAttr")  # type: ignore[attr-defined]


class _CountedList(list):  # type: ignore[type-arg]
    """A list that counts the entries read from it by iteration."""

    reads = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        for item in super().__iter__():
            _CountedList.reads += 1
            yield item


def test_inventory_module_lookups_do_not_scan_every_module() -> None:
    """``Inventory.module`` in a loop over the modules was quadratic: each call scanned
    the list. Now the entries are indexed once, and modules appended later are found."""
    from freezeview.engine.graph.inventory import build_inventory
    from freezeview.engine.graph.inventory_values import Inventory, ModuleInfo

    inv = build_inventory(_stack(40))
    counted = Inventory(modules=_CountedList(inv.modules), attributes=inv.attributes)
    _CountedList.reads = 0
    for mod in list.__iter__(counted.modules):
        assert counted.module(mod.path) is mod
    assert _CountedList.reads <= len(inv.modules)
    assert counted.module("nowhere") is None
    extra = ModuleInfo(path="late", type_name="X", qualified_type="X", methods=(), children=())
    counted.modules.append(extra)
    assert counted.module("late") is extra
    assert counted.by_path("0.weight") is inv.by_path("0.weight") is not None
    counted.attributes = []
    assert counted.by_path("0.weight") is None  # a replaced list is indexed afresh


def test_an_inventory_sent_to_the_screen_keeps_its_lookups() -> None:
    """The screen process receives the inventory pickled; the index is not sent, and
    the copy equals the original whether or not either was asked before."""
    import pickle

    from freezeview.engine.graph.inventory import build_inventory

    inv = build_inventory(_stack(3))
    assert inv.module("1") is not None
    copy = pickle.loads(pickle.dumps(inv))
    assert copy == inv
    assert copy.module("1") == inv.module("1") and copy.by_path("2.bias") is not None


def _archive_pickles(tmp_path: Any) -> list[bytes]:
    import zipfile

    path = tmp_path / "m.pt"
    torch.jit.save(_stack(4), str(path))
    with zipfile.ZipFile(path) as archive:
        return [archive.read(i) for i in archive.infolist() if i.filename.endswith("pkl")]


def test_the_model_check_reads_archive_pickles_without_genops(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The check reads every opcode of data.pkl (half a million at N2048): it decodes
    the common ones itself instead of through ``pickletools.genops``, which was half of
    the walk's time. The answers stay genops' (next test)."""
    import pickletools

    from freezeview.engine.load.archive import check_model_file

    path = tmp_path / "m.pt"
    torch.jit.save(_stack(4), str(path))
    calls = 0
    real = pickletools.genops

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(pickletools, "genops", counting)
    assert check_model_file(path) == path
    assert calls == 0


def test_the_opcode_reader_reads_what_genops_reads(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every opcode and argument as pickletools reads them, and a damaged pickle stops
    the reading where genops raises."""
    import io
    import pickle
    import pickletools
    import random

    from freezeview.engine.load.pickle_scan import _opcodes

    def genops(data: bytes) -> tuple[list[tuple[str, Any]], bool]:
        read: list[tuple[str, Any]] = []
        try:
            for op, arg, _pos in pickletools.genops(io.BytesIO(data)):
                read.append((op.name, arg))
        except Exception:
            return read, False
        return read, True

    def ours(data: bytes) -> tuple[list[tuple[str, Any]], bool]:
        read: list[tuple[str, Any]] = []
        try:
            for item in _opcodes(data, [0]):
                read.append(item)
        except Exception:
            return read, False
        return read, True

    plain = [
        pickle.dumps(([1, -300, 70000, 2**40], "é\udc80", b"x", 1.5, {"k": (None, True)}), p)
        for p in range(6)
    ]
    samples = _archive_pickles(tmp_path) + plain
    rnd = random.Random(0)
    for data in list(samples):
        for _ in range(20):
            cut = bytearray(data[: rnd.randrange(len(data) + 1)])
            if cut and rnd.random() < 0.5:
                cut[rnd.randrange(len(cut))] = rnd.randrange(256)
            samples.append(bytes(cut))
    for data in samples:
        assert ours(data) == genops(data)
