"""freezeview.engine.load.loading: what a file is, said in one sentence, without running it.

torch is the oracle for the good path (a loaded model computes what torch.jit.load's
does); the catalogue in ``bad_inputs`` supplies the bad paths, checked here in-process
against ``load_model`` (the CLI runs of the same inputs live in test_bad_inputs_cli.py).
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import struct
import zipfile
from pathlib import Path

import pytest
import torch
from bad_inputs.catalogue import CATALOGUE, MARKER_NAME, BadInput, by_name, save_tiny
from bad_inputs.models import TinyNet

from freezeview.engine.load.loading import (
    LoadedModel,
    check_eval,
    check_model_file,
    load_model,
    pickle_globals,
    sniff_pickle,
    storage_refs,
)
from freezeview.engine.plumbing.errors import BadInputError, FreezeviewError, PlanError

LOAD_CASES = [c for c in CATALOGUE if c.stage == "load"]


class _Runs:
    """Unpickling this calls os.system (never actually unpickled by these tests)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("true",))


# --------------------------------------------------------------------------- good path


def test_loads_a_valid_model_like_torch(tmp_path: Path) -> None:
    path = save_tiny(tmp_path / "model.pt")
    loaded = load_model(path)
    reference = torch.jit.load(str(path))
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(loaded.module(x), reference(x))
    assert loaded.path == path
    assert loaded.name == "model.pt"
    assert loaded.was_training is False
    assert loaded.load_seconds > 0


def test_eval_mode_switch_and_check(tmp_path: Path) -> None:
    path = save_tiny(tmp_path / "training.pt", training=True)
    loaded = load_model(path)
    assert loaded.was_training and loaded.module.training
    with pytest.raises(PlanError, match=r"training\.pt holds a module in training mode.*--eval"):
        check_eval(loaded)
    switched = load_model(path, eval_mode=True)
    assert switched.was_training and not switched.module.training
    check_eval(switched)  # no error
    # torch agrees that the switched module can be frozen
    torch.jit.freeze(switched.module)


def test_file_is_never_modified(tmp_path: Path) -> None:
    path = save_tiny(tmp_path / "model.pt")
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    load_model(path, eval_mode=True).module.eval()
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime


def test_from_module_refuses_plain_modules() -> None:
    with pytest.raises(BadInputError, match="TinyNet is not a TorchScript module"):
        LoadedModel.from_module(TinyNet())  # type: ignore[arg-type]
    wrapped = LoadedModel.from_module(torch.jit.script(TinyNet().eval()))
    assert wrapped.name == "TinyNet" and wrapped.path is None


def test_cuda_tensors_load_on_cpu(tmp_path: Path) -> None:
    """A model saved on a GPU machine opens here (map_location defaults to cpu)."""
    from bad_inputs.catalogue import _edit_member

    path = save_tiny(tmp_path / "gpu.pt")
    # Rewrite the storages' device as a GPU machine would have written it.
    _edit_member(
        path,
        lambda m: m == "data.pkl",
        lambda c: c.replace(b"X\x03\x00\x00\x00cpu", b"X\x04\x00\x00\x00cuda"),
    )
    with pytest.raises(RuntimeError):
        torch.jit.load(str(path))  # torch's default keeps the device, and fails here
    loaded = load_model(path)
    reference = torch.jit.load(str(path), map_location="cpu")
    x = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(loaded.module(x), reference(x))


def test_traced_model_loads(tmp_path: Path) -> None:
    traced = torch.jit.trace(TinyNet().eval(), torch.randn(1, 3, 8, 8))
    path = tmp_path / "traced.pt"
    torch.jit.save(traced, str(path))
    loaded = load_model(path)
    x = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(loaded.module(x), torch.jit.load(str(path))(x))


# --------------------------------------------------------------------------- catalogue


@pytest.mark.parametrize("case", LOAD_CASES, ids=lambda c: c.name)
def test_catalogue_input_gets_its_sentence(case: BadInput, tmp_path: Path) -> None:
    built = case.build(tmp_path)
    with pytest.raises(BadInputError) as info:
        load_model(built.model)
    message = str(info.value)
    assert case.matches(message), message
    assert built.model.name in message
    assert "\n" not in message
    assert info.value.exit_code == case.exit_code
    if built.marker is not None:
        assert not built.marker.exists()


@pytest.mark.parametrize("name", ["hostile-pickle", "hostile-torch-save", "hostile-torchscript"])
def test_hostile_files_are_refused_before_torch_sees_them(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pre-checks alone refuse them: torch.jit.load / torch.load are never called."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch was handed a hostile file")

    monkeypatch.setattr(torch.jit, "load", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    built = by_name(name).build(tmp_path)
    with pytest.raises(BadInputError):
        check_model_file(built.model)
    with pytest.raises(BadInputError):
        load_model(built.model)
    assert not (tmp_path / MARKER_NAME).exists()


def test_bad_map_location(tmp_path: Path) -> None:
    path = save_tiny(tmp_path / "model.pt")
    with pytest.raises(BadInputError, match="--map-location 'gpu0' is not a device"):
        load_model(path, map_location="gpu0")
    if not torch.cuda.is_available():
        with pytest.raises(BadInputError, match="asks for CUDA"):
            load_model(path, map_location="cuda")


def test_missing_path_without_close_names(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match=r"does not exist: check the path\.$"):
        load_model(tmp_path / "nothing-like-it.pt")


def test_broken_symlink(tmp_path: Path) -> None:
    link = tmp_path / "model.pt"
    link.symlink_to(tmp_path / "gone.pt")
    with pytest.raises(BadInputError, match="broken symbolic link"):
        load_model(link)


def test_path_through_a_file(tmp_path: Path) -> None:
    path = save_tiny(tmp_path / "model.pt")
    with pytest.raises(BadInputError, match=r"is a file, not a\s+directory"):
        load_model(path / "inner.pt")


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root reads everything, so the permission check is exercised by injection.
    path = save_tiny(tmp_path / "model.pt")
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if Path(p) == path else real_access(p, mode)
    )
    with pytest.raises(BadInputError, match="cannot be read \\(permission denied\\)"):
        load_model(path)


def test_every_load_failure_is_a_freezeview_error(tmp_path: Path) -> None:
    """Errors torch raises on load become a BadInputError whose cause is kept (--debug)."""
    case = by_name("garbled-code")
    built = case.build(tmp_path)
    with pytest.raises(BadInputError) as info:
        load_model(built.model)
    assert isinstance(info.value, FreezeviewError)
    assert info.value.__cause__ is not None  # torch's own error, for --debug


def test_export_archive_is_named(tmp_path: Path) -> None:
    class Small(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    path = tmp_path / "program.pt2"
    try:
        program = torch.export.export(Small(), (torch.ones(2),))
        torch.export.save(program, str(path))
    except Exception as exc:  # torch.export is optional in some builds
        pytest.skip(f"torch.export unavailable: {exc}")
    with pytest.raises(BadInputError, match=r"torch\.export archive"):
        load_model(path)


def test_safetensors_is_named(tmp_path: Path) -> None:
    header = b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0\0\0")
    with pytest.raises(BadInputError, match="safetensors weights"):
        load_model(path)


# --------------------------------------------------------------------------- pickles


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_hostile_pickle_found_at_every_protocol(protocol: int) -> None:
    data = pickle.dumps([_Runs()], protocol=protocol)
    assert sniff_pickle(data) == "code"
    assert any(n.endswith(".system") for n in pickle_globals(data))


def test_memoised_global_names_are_resolved() -> None:
    """A global built from memoised strings, with decoy strings pushed last, is still
    seen for what it is (a scan of 'the last two strings' would say OrderedDict)."""
    data = (
        b"\x80\x04"
        b"\x8c\x02os\x94"  # memo 0
        b"\x8c\x06system\x94"  # memo 1
        b"00"  # pop both
        b"\x8c\x0bcollections0\x8c\x0bOrderedDict0"  # decoys, popped
        b"h\x00h\x01\x93"  # STACK_GLOBAL from the memo: os.system
        b"\x8c\x04true\x85R."
    )
    pickletools.dis(io.BytesIO(data), out=io.StringIO())  # well-formed, never unpickled
    assert pickle_globals(data) == ["os.system"]
    assert sniff_pickle(data) == "code"


def test_sniff_pickle_kinds() -> None:
    def saved(obj: object) -> bytes:
        buf = io.BytesIO()
        torch.save(obj, buf)
        with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as archive:
            name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
            return archive.read(name)

    assert sniff_pickle(saved(TinyNet().state_dict())) == "state_dict"
    assert sniff_pickle(saved(TinyNet())) == "module"
    assert sniff_pickle(saved([torch.ones(2)])) == "tensors"
    assert sniff_pickle(pickle.dumps([1, 2, 3])) == "pickle"
    assert sniff_pickle(b"not a pickle at all") == "pickle"


def test_storage_refs_match_the_archive(tmp_path: Path) -> None:
    """Every storage the pickle declares has a record of exactly the declared size."""
    path = save_tiny(tmp_path / "model.pt")
    with zipfile.ZipFile(path) as archive:
        prefix = archive.namelist()[0].split("/", 1)[0]
        refs = storage_refs(archive.read(f"{prefix}/data.pkl"))
        sizes = {i.filename: i.file_size for i in archive.infolist()}
    tensors = list(torch.jit.load(str(path)).state_dict().values())
    assert len(refs) == len({t.untyped_storage().data_ptr() for t in tensors})
    for key, storage_type, device, numel in refs:
        assert device == "cpu"
        dtype = {"torch.FloatStorage": torch.float32, "torch.LongStorage": torch.int64}[
            storage_type
        ]
        assert sizes[f"{prefix}/data/{key}"] == numel * dtype.itemsize


# --------------------------------------------------------------------------- no false alarms


def _corpus_params() -> list[object]:
    try:
        from corpus import params
    except ImportError:  # the corpus is another part of the suite; absent, skip
        return [pytest.param(None, marks=pytest.mark.skip(reason="tests/corpus not present"))]
    return params()


@pytest.mark.parametrize("case", _corpus_params())
def test_every_corpus_module_loads_like_torch(case: object, tmp_path: Path) -> None:
    """The pre-checks never refuse a file torch.jit.save wrote (scripted and traced,
    mutations, interfaces, lists, dicts, tied weights...), and the module computes what
    torch.jit.load's does."""
    try:
        module = case.build()  # type: ignore[attr-defined]
    except Exception as exc:  # a case torch itself cannot build is not ours to load
        pytest.skip(f"torch cannot build {case.name}: {exc}")  # type: ignore[attr-defined]
    path = tmp_path / "model.pt"
    torch.jit.save(module, str(path))
    check_model_file(path)
    loaded = load_model(path)
    reference = torch.jit.load(str(path))
    if not reference._c._has_method("forward"):
        return  # e.g. a scripted LSTM: only forward__0/forward__1 overloads
    inputs = case.inputs()  # type: ignore[attr-defined]
    torch.manual_seed(0)
    ours = loaded.module(*inputs)
    torch.manual_seed(0)
    theirs = reference(*inputs)
    modules = (torch.jit.ScriptModule, torch._C.ScriptModule)
    if isinstance(theirs, modules):
        assert isinstance(ours, modules)  # forward returns self
        return
    torch.testing.assert_close(ours, theirs)


def test_error_messages_are_one_line() -> None:
    """Torch's text quoted in a message can hold newlines; the sentence stays one line."""
    err = BadInputError("model.pt could not be loaded (line one\n  line two\n):  fix it.")
    assert err.message == "model.pt could not be loaded (line one line two ): fix it."
    assert str(err) == err.message
    assert "\n" in err.detail
    assert err.exit_code == 2 and PlanError("x").exit_code == 1


@pytest.mark.slow
def test_torchs_cpp_warnings_while_loading_become_information(tmp_path: Path) -> None:
    """c10 prints some warnings straight to descriptor 2 (a quantized model's
    __setstate__): freezeview shows them as "torch said", never as raw log lines."""
    import subprocess
    import sys

    from corpus import case_by_name

    model = tmp_path / "quantized.pt"
    torch.jit.save(case_by_name("quant_static_linear_saved").build(), str(model))
    # What torch itself prints while loading it depends on the release (2.13 and 2.14 warn
    # that torch.quantize_per_tensor is deprecated; 2.4 to 2.12 print nothing).
    plain = subprocess.run(
        [sys.executable, "-c", "import sys, torch; torch.jit.load(sys.argv[1])", str(model)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert plain.returncode == 0, plain.stderr
    torch_warns = "torch.quantize_per_tensor" in plain.stderr
    done = subprocess.run(
        [sys.executable, "-m", "freezeview", "explain", str(model)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Quantizer.cpp" not in done.stderr and "[W" not in done.stderr
    said = "torch said: torch.quantize_per_tensor" in done.stdout.replace("\n", " ")
    assert said == torch_warns, (plain.stderr, done.stdout)


def test_archive_pickles_are_read_in_one_pass(tmp_path: Path) -> None:
    """One opcode pass over a pickle as torch writes it gives what the careful passes give;
    anything else (stray bytes, cut short, no protocol header) is left to them."""
    from freezeview.engine.load.pickle_scan import scan_archive_pickle

    path = save_tiny(tmp_path / "model.pt")
    with zipfile.ZipFile(path) as archive:
        pickles = {
            info.filename: archive.read(info)
            for info in archive.infolist()
            if info.filename.endswith("pkl")
        }
    assert any(name.endswith("/data.pkl") for name in pickles)
    for raw in pickles.values():
        assert scan_archive_pickle(raw) == (pickle_globals(raw), storage_refs(raw))
        assert scan_archive_pickle(raw + b"\x00") is None
        assert scan_archive_pickle(raw[:-1]) is None
        assert scan_archive_pickle(raw[1:]) is None


def test_member_checksums_need_no_zipfile_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An intact archive's members are checked where they lie in the file (a 2,048-block
    model has 12k of them): zipfile opens only the pickles the opcode scan reads. A member
    whose bytes fail their CRC-32, stored or deflated, still gets zipfile's verdict and
    freezeview's sentence for it."""
    path = save_tiny(tmp_path / "model.pt")
    opened: list[str] = []
    real_open = zipfile.ZipFile.open

    def counted(self: zipfile.ZipFile, name: object, *a: object, **kw: object) -> object:
        opened.append(getattr(name, "filename", name))  # type: ignore[arg-type]
        return real_open(self, name, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile.ZipFile, "open", counted)
    check_model_file(path)
    assert opened and all(name.endswith("pkl") for name in opened)
    monkeypatch.setattr(zipfile.ZipFile, "open", real_open)
    raw = path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    stored = next(i for i in infos if i.compress_type == zipfile.ZIP_STORED and i.file_size > 8)
    deflated = next(i for i in infos if i.compress_type == zipfile.ZIP_DEFLATED)
    for info in (stored, deflated):
        name_len, extra_len = struct.unpack_from("<2H", raw, info.header_offset + 26)
        at = info.header_offset + 30 + name_len + extra_len
        damaged = bytearray(raw)
        damaged[at + info.compress_size // 2] ^= 0x01
        bad = tmp_path / "bad.pt"
        bad.write_bytes(bytes(damaged))
        short = info.filename.split("/", 1)[1]
        with pytest.raises(BadInputError, match=f"archive member '{short}' (fails its|cannot)"):
            check_model_file(bad)
