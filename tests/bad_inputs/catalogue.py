"""The catalogue of bad inputs: how to build each one, and what freezeview must answer.

Every entry builds its input inside a temporary directory (nothing is checked in) and
states the answer freezeview owes the user: exit code, a regex the one-line error must
match, and whether the sentence must name the model file. The CLI tests
(``tests/cli/test_bad_inputs.py``), the summary script (``summary.py``) and the app's
tests all read this one list, so a new bad input is added in one place.

The app can use :func:`app_catalogue`: ``(name, build, message_regex)`` triples for the
inputs that concern opening a model.
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import random
import re
import subprocess
import sys
import warnings
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from made_once import made_once

from .models import ContainerIndexNet, ReturnsSelf, TinyNet

__all__ = [
    "CATALOGUE",
    "COMMANDS",
    "MARKER_NAME",
    "BadInput",
    "Built",
    "app_catalogue",
    "by_name",
    "save_tiny",
]

#: The subcommands that take a model file. ``app`` is the Textual app.
COMMANDS: tuple[str, ...] = ("explain", "freeze", "export", "app")

#: The file a hostile pickle would create if anything ever unpickled it.
MARKER_NAME = "PWNED-marker"


@dataclass(frozen=True)
class Built:
    """What a builder made in its temporary directory.

    Attributes:
        model: the path given to freezeview as MODEL.pt (may not exist on purpose).
        args: extra arguments per subcommand (``{"freeze": [...]}``; key ``"*"`` for all).
        env: environment overrides (e.g. a PATH without ``dot``).
        outputs: per subcommand, the output to pass with ``-o`` (a file for
            ``freeze``, a directory for ``export``); missing means "a fresh path in the
            temporary directory".
        guarded: files whose bytes must be identical after the run (the model, an
            existing output): "files damaged" in the summary.
        marker: a file that must never exist (hostile pickles).
    """

    model: Path
    args: dict[str, list[str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, Path] = field(default_factory=dict)
    guarded: tuple[Path, ...] = ()
    marker: Path | None = None

    def args_for(self, command: str) -> list[str]:
        """Extra arguments for ``command``."""
        return [*self.args.get("*", []), *self.args.get(command, [])]

    def output_for(self, command: str, tmp: Path) -> Path | None:
        """The ``-o`` value for ``command`` (None for commands that write nothing)."""
        if command in self.outputs:
            return self.outputs[command]
        return {"freeze": tmp / "frozen.pt", "export": tmp / "export-out"}.get(command)


@dataclass(frozen=True)
class BadInput:
    """One bad input and the answer freezeview owes.

    Attributes:
        name: short id, used in test ids and the summary table.
        title: what the input is, in words (the Troubleshooting section uses it).
        build: makes the input in a temporary directory.
        message: regex the error sentence must match (searched, case-insensitive).
        exit_code: the exit code DESIGN.md prescribes (1 bad plan, 2 bad input/usage).
        commands: the subcommands this input concerns.
        names_file: the sentence must contain the model file's name.
        stage: ``load``, ``plan``, ``usage``, ``output`` or ``environment``.
        needs: option strings the subcommand must offer for the case to apply
            (``--input-shape``); absent options mean the case is skipped with a reason.
        ok_exit_codes: other acceptable exit codes when DESIGN.md leaves room.
    """

    name: str
    title: str
    build: Callable[[Path], Built]
    message: str
    exit_code: int
    commands: tuple[str, ...] = COMMANDS
    names_file: bool = True
    stage: str = "load"
    needs: tuple[str, ...] = ()
    ok_exit_codes: tuple[int, ...] = ()

    def matches(self, line: str) -> bool:
        """True if ``line`` matches :attr:`message`."""
        return re.search(self.message, line, re.IGNORECASE | re.DOTALL) is not None


# --------------------------------------------------------------------------- helpers


def save_tiny(path: Path, *, training: bool = False) -> Path:
    """Write a scripted :class:`TinyNet` to ``path`` (as ``torch.jit.save`` does).

    The bytes are made once per process and copied: the catalogue needs dozens of
    copies, and scripting costs far more than writing.
    """
    path.write_bytes(_tiny_bytes(training))
    return path


def _tiny_bytes(training: bool) -> bytes:
    return _tiny_variants()[training]


@functools.cache
def _tiny_variants() -> dict[bool, bytes]:
    """Both archives of :class:`TinyNet` (eval and training mode), made once per run.

    Made in a fresh interpreter: TorchScript renames a class (``___torch_mangle_N``) when
    another module of it was scripted differently earlier in the process, which would
    rename the archive's members (the fuzz regressions name them) with the test order.
    """
    here = Path(__file__).resolve().parent

    def make() -> dict[str, bytes]:
        script = (
            "import sys, warnings; warnings.simplefilter('ignore'); "
            f"sys.path.insert(0, {str(here.parent)!r}); "
            "from bad_inputs.catalogue import tiny_bytes_here; "
            "ev = tiny_bytes_here(False); "
            "sys.stdout.buffer.write(len(ev).to_bytes(8, 'big') + ev + tiny_bytes_here(True))"
        )
        made = subprocess.run([sys.executable, "-c", script], capture_output=True, check=True)
        size = int.from_bytes(made.stdout[:8], "big")
        return {"eval": made.stdout[8 : 8 + size], "train": made.stdout[8 + size :]}

    sources = [(here / name).read_bytes() for name in ("catalogue.py", "models.py")]
    both = made_once("tiny", sources, make)
    return {False: both["eval"], True: both["train"]}


def tiny_bytes_here(training: bool) -> bytes:
    """The bytes of a scripted :class:`TinyNet`, made in this process."""
    torch.manual_seed(0)  # same weights every time, so fuzz seeds replay exactly
    module = TinyNet()
    module.train(training)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(module), buf)
    return buf.getvalue()


def _valid(tmp: Path, name: str = "model.pt") -> Path:
    return save_tiny(tmp / name)


def _members(path: Path) -> list[tuple[zipfile.ZipInfo, bytes]]:
    with zipfile.ZipFile(path) as archive:
        return [(info, archive.read(info)) for info in archive.infolist()]


def _rewrite(path: Path, members: Sequence[tuple[zipfile.ZipInfo, bytes]]) -> None:
    """Write ``members`` back as a well-formed zip (fresh ZipInfos: correct checksums)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for info, content in members:
            new = zipfile.ZipInfo(info.filename, date_time=info.date_time)
            new.compress_type = info.compress_type
            archive.writestr(new, content)
    path.write_bytes(buf.getvalue())


def _short(name: str) -> str:
    return name.split("/", 1)[1]


def _edit_member(path: Path, pick: Callable[[str], bool], edit: Callable[[bytes], bytes]) -> str:
    members = _members(path)
    for i, (info, content) in enumerate(members):
        if pick(_short(info.filename)):
            members[i] = (info, edit(content))
            _rewrite(path, members)
            return _short(info.filename)
    raise LookupError("no such member")


def _flip_stored(path: Path, pick: Callable[[str], bool]) -> str:
    """Flip bytes inside a member's stored bytes, leaving the zip bookkeeping intact."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if pick(_short(info.filename)):
                off = info.header_offset
                name_len = int.from_bytes(data[off + 26 : off + 28], "little")
                extra_len = int.from_bytes(data[off + 28 : off + 30], "little")
                start = off + 30 + name_len + extra_len
                for k in range(min(info.compress_size, 3)):
                    data[start + (k * 7) % info.compress_size] ^= 0x5A
                path.write_bytes(bytes(data))
                return _short(info.filename)
    raise LookupError("no such member")


class _Hostile:
    """Unpickling this object runs a shell command that creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[..., int], tuple[str]]:
        return (os.system, (f"touch '{self.marker}'",))


# --------------------------------------------------------------------------- builders


def _missing(tmp: Path) -> Built:
    save_tiny(tmp / "model.pt")  # a near miss, so the message can suggest it
    return Built(model=tmp / "modle.pt")


def _directory(tmp: Path) -> Built:
    d = tmp / "models"
    d.mkdir()
    save_tiny(d / "net.pt")
    return Built(model=d)


def _unpacked(tmp: Path) -> Built:
    model = _valid(tmp)
    d = tmp / "unpacked"
    with zipfile.ZipFile(model) as archive:
        archive.extractall(d)
    return Built(model=next(d.iterdir()))


def _empty(tmp: Path) -> Built:
    p = tmp / "empty.pt"
    p.write_bytes(b"")
    return Built(model=p, guarded=(p,))


def _random(tmp: Path) -> Built:
    p = tmp / "random.pt"
    p.write_bytes(random.Random(6).randbytes(4096))
    return Built(model=p, guarded=(p,))


def _text(tmp: Path) -> Built:
    p = tmp / "model.py"
    p.write_text("import torch\nclass Net(torch.nn.Module):\n    pass\n")
    return Built(model=p, guarded=(p,))


def _fifo(tmp: Path) -> Built:
    p = tmp / "pipe.pt"
    os.mkfifo(p)
    return Built(model=p)


def _truncated(tmp: Path) -> Built:
    p = _valid(tmp)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) * 2 // 3])
    return Built(model=p, guarded=(p,))


def _flip_code(tmp: Path) -> Built:
    p = _valid(tmp)
    _flip_stored(p, lambda m: m.startswith("code/") and m.endswith("models.py"))
    return Built(model=p, guarded=(p,))


def _flip_constants(tmp: Path) -> Built:
    p = _valid(tmp)
    _flip_stored(p, lambda m: m == "constants.pkl")
    return Built(model=p, guarded=(p,))


def _flip_data(tmp: Path) -> Built:
    p = _valid(tmp)
    _flip_stored(p, lambda m: m == "data/1")  # the conv weight
    return Built(model=p, guarded=(p,))


def _garbled_code(tmp: Path) -> Built:
    p = _valid(tmp)
    _edit_member(
        p,
        lambda m: m.startswith("code/") and m.endswith("models.py"),
        lambda c: c.replace(b"def forward", b"def for ward"),
    )
    return Built(model=p, guarded=(p,))


def _garbled_constants(tmp: Path) -> Built:
    p = _valid(tmp)
    _edit_member(p, lambda m: m == "constants.pkl", lambda c: b"\x80\x02\xff\xfe garbage")
    return Built(model=p, guarded=(p,))


def _garbled_data_pkl(tmp: Path) -> Built:
    p = _valid(tmp)
    _edit_member(p, lambda m: m == "data.pkl", lambda c: c[: len(c) // 2])
    return Built(model=p, guarded=(p,))


def _missing_record(tmp: Path) -> Built:
    p = _valid(tmp)
    members = [(i, c) for i, c in _members(p) if _short(i.filename) != "data/1"]
    _rewrite(p, members)
    return Built(model=p, guarded=(p,))


def _unknown_op(tmp: Path) -> Built:
    p = _valid(tmp)
    _edit_member(
        p,
        lambda m: m.startswith("code/") and m.endswith("models.py") and "debug" not in m,
        lambda c: c.replace(b"torch.relu(", b"ops.acme_ext.fused_relu("),
    )
    return Built(model=p, guarded=(p,))


def _newer_format(tmp: Path) -> Built:
    p = _valid(tmp, "from_the_future.pt")
    _edit_member(p, lambda m: m == "version", lambda c: b"99\n")
    return Built(model=p, guarded=(p,))


def _optimized_for_inference(tmp: Path) -> Built:
    p = tmp / "optimized.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(TinyNet().eval())
        torch.jit.save(torch.jit.optimize_for_inference(scripted), str(p))
    return Built(model=p, guarded=(p,))


def _state_dict(tmp: Path) -> Built:
    p = tmp / "weights.pt"
    torch.save(TinyNet().state_dict(), p)
    return Built(model=p, guarded=(p,))


def _legacy_state_dict(tmp: Path) -> Built:
    p = tmp / "weights_legacy.pt"
    torch.save(TinyNet().state_dict(), p, _use_new_zipfile_serialization=False)
    return Built(model=p, guarded=(p,))


def _whole_module(tmp: Path) -> Built:
    p = tmp / "whole.pt"
    torch.save(TinyNet(), p)
    return Built(model=p, guarded=(p,))


def _hostile_pickle(tmp: Path) -> Built:
    marker = tmp / MARKER_NAME
    p = tmp / "hostile.pt"
    p.write_bytes(pickle.dumps(_Hostile(marker), protocol=2))
    return Built(model=p, guarded=(p,), marker=marker)


def _hostile_torch_save(tmp: Path) -> Built:
    # torch.save's zip layout with a hostile data.pkl: what a booby-trapped
    # "pytorch_model.bin" looks like.
    marker = tmp / MARKER_NAME
    p = tmp / "hostile_zip.pt"
    with zipfile.ZipFile(p, "w") as archive:
        archive.writestr("archive/data.pkl", pickle.dumps(_Hostile(marker), protocol=2))
        archive.writestr("archive/version", "3\n")
    return Built(model=p, guarded=(p,), marker=marker)


def _hostile_torchscript(tmp: Path) -> Built:
    # A real TorchScript archive whose data.pkl was replaced by a hostile pickle.
    marker = tmp / MARKER_NAME
    p = _valid(tmp, "hostile_ts.pt")
    _edit_member(p, lambda m: m == "data.pkl", lambda c: pickle.dumps(_Hostile(marker), 2))
    return Built(model=p, guarded=(p,), marker=marker)


def _training(tmp: Path) -> Built:
    p = save_tiny(tmp / "training.pt", training=True)
    return Built(model=p, guarded=(p,))


def _returns_self(tmp: Path) -> Built:
    p = tmp / "returns_self.pt"
    torch.jit.save(torch.jit.script(ReturnsSelf().eval()), str(p))
    return Built(model=p, guarded=(p,))


def _container_index(tmp: Path) -> Built:
    p = tmp / "container_index.pt"
    torch.jit.save(torch.jit.script(ContainerIndexNet().eval()), str(p))
    return Built(model=p, guarded=(p,))


def _unknown_preserve(tmp: Path) -> Built:
    p = _valid(tmp)
    return Built(model=p, args={"*": ["--preserve", "scal"]}, guarded=(p,))


def _unknown_dotted_preserve(tmp: Path) -> Built:
    p = _valid(tmp)
    return Built(model=p, args={"*": ["--preserve", "bn.runing_mean"]}, guarded=(p,))


def _python_method_preserve(tmp: Path) -> Built:
    # ``describe`` is compiled (@torch.jit.export); ``helper`` is a plain Python method
    # that TorchScript never compiled, so torch.jit.freeze does not know the name.
    p = _valid(tmp)
    return Built(model=p, args={"*": ["--preserve", "helper"]}, guarded=(p,))


def _bad_input_shape(tmp: Path) -> Built:
    p = _valid(tmp)
    return Built(model=p, args={"*": ["--input-shape", "1,3,eight"]}, guarded=(p,))


def _wrong_input_shape(tmp: Path) -> Built:
    p = _valid(tmp)
    # TinyNet's conv wants 3 channels.
    return Built(model=p, args={"*": ["--input-shape", "1,5,8,8"]}, guarded=(p,))


def _wrong_input_dtype(tmp: Path) -> Built:
    p = _valid(tmp)
    inputs = tmp / "inputs.pt"
    torch.save((torch.ones(1, 3, 8, 8, dtype=torch.int64),), inputs)
    return Built(model=p, args={"*": ["--inputs", str(inputs)]}, guarded=(p, inputs))


def _hostile_inputs(tmp: Path) -> Built:
    p = _valid(tmp)
    marker = tmp / MARKER_NAME
    inputs = tmp / "inputs.pt"
    torch.save((_Hostile(marker),), inputs)
    return Built(model=p, args={"*": ["--inputs", str(inputs)]}, guarded=(p, inputs), marker=marker)


def _out_file_parent(tmp: Path) -> Built:
    p = _valid(tmp)
    return Built(model=p, outputs={"freeze": p / "out.pt", "export": p / "out"}, guarded=(p,))


def _out_read_only(tmp: Path) -> Built:
    # Root can write where permission bits say no, so a chmod'ed directory proves
    # nothing here; /sys refuses new files even to root.
    p = _valid(tmp)
    return Built(
        model=p,
        outputs={
            "freeze": Path("/sys/freezeview-out.pt"),
            "export": Path("/sys/freezeview-out"),
        },
        guarded=(p,),
    )


def _out_exists(tmp: Path) -> Built:
    p = _valid(tmp)
    out = tmp / "out.pt"
    out.write_bytes(b"previous output, must survive")
    out_dir = tmp / "export-out"
    out_dir.mkdir()
    previous = out_dir / "before.svg"
    previous.write_text("<svg>previous picture, must survive</svg>")
    return Built(
        model=p,
        outputs={"freeze": out, "export": out_dir},
        guarded=(p, out, previous),
    )


def _out_is_input(tmp: Path) -> Built:
    p = _valid(tmp)
    return Built(model=p, outputs={"freeze": p}, guarded=(p,))


def _out_is_input_forced(tmp: Path) -> Built:
    p = _valid(tmp)
    link = tmp / "same-model.pt"
    link.symlink_to(p)  # another name for the same file
    return Built(model=p, outputs={"freeze": link}, args={"freeze": ["--force"]}, guarded=(p, link))


def _no_dot(tmp: Path) -> Built:
    p = _valid(tmp)
    bin_dir = tmp / "bin-without-dot"
    bin_dir.mkdir()
    return Built(model=p, env={"PATH": str(bin_dir)}, guarded=(p,))


def _bad_map_location(tmp: Path) -> Built:
    p = _valid(tmp)
    return Built(model=p, args={"*": ["--map-location", "gpu0"]}, guarded=(p,))


# --------------------------------------------------------------------------- catalogue

_DAMAGED = (
    r"is damaged: archive member '{m}' "
    r"(fails its checksum|has a damaged header|cannot be read)"
)

CATALOGUE: tuple[BadInput, ...] = (
    BadInput(
        "missing-path",
        "a path that does not exist",
        _missing,
        r"does not exist: check the path \(did you mean .*model\.pt\?\)",
        2,
    ),
    BadInput(
        "directory", "a directory", _directory, r"is a directory.*give a \.pt file such as", 2
    ),
    BadInput(
        "unpacked-archive",
        "an unzipped TorchScript archive (a directory)",
        _unpacked,
        r"unpacked TorchScript archive",
        2,
    ),
    BadInput("empty-file", "an empty file", _empty, r"is empty \(0 bytes\).*save or copy", 2),
    BadInput("random-bytes", "random bytes", _random, r"not a TorchScript model.*zip", 2),
    BadInput("text-file", "a text file (Python source)", _text, r"is a text file", 2),
    BadInput("named-pipe", "a named pipe (reading it would hang)", _fifo, r"named pipe", 2),
    BadInput(
        "truncated",
        "a .pt cut off at two thirds",
        _truncated,
        r"is truncated.*copy or save the model again",
        2,
    ),
    BadInput(
        "flipped-code",
        "flipped bytes inside a code/ member",
        _flip_code,
        _DAMAGED.format(m=r"code/[\w/]+models\.py"),
        2,
    ),
    BadInput(
        "flipped-constants",
        "flipped bytes inside constants.pkl",
        _flip_constants,
        _DAMAGED.format(m="constants.pkl"),
        2,
    ),
    BadInput(
        "flipped-data",
        "flipped bytes inside a tensor record (data/1)",
        _flip_data,
        _DAMAGED.format(m="data/1"),
        2,
    ),
    BadInput(
        "garbled-code",
        "code/ that no longer parses (checksums rewritten to match)",
        _garbled_code,
        r"could not be loaded by torch\.jit\.load \(.+\): check that the file is intact",
        2,
    ),
    BadInput(
        "garbled-constants",
        "constants.pkl replaced by garbage (checksums rewritten to match)",
        _garbled_constants,
        r"is damaged: archive member 'constants\.pkl' is not a valid pickle",
        2,
    ),
    BadInput(
        "garbled-data-pkl",
        "data.pkl cut in half (checksums rewritten to match)",
        _garbled_data_pkl,
        r"is damaged: archive member 'data\.pkl' is not a valid pickle",
        2,
    ),
    BadInput(
        "missing-record",
        "a tensor record (data/1) removed from the archive",
        _missing_record,
        r"damaged or incomplete: archive member 'data/1' is missing",
        2,
    ),
    BadInput(
        "unknown-operator",
        "code calling an operator from an extension that is not installed",
        _unknown_op,
        r"uses the operator acme_ext::fused_relu.*--import .*--load-library",
        2,
    ),
    BadInput(
        "newer-format",
        "a file format version newer than this torch reads",
        _newer_format,
        r"was saved by a newer torch than [\d.]+ \(format 99; this torch reads up to \d+\)",
        2,
    ),
    BadInput(
        "optimized-for-inference-mkldnn",
        "optimize_for_inference's output of a convolution model (MKLDNN weights torch "
        "saves as nothing)",
        _optimized_for_inference,
        r"holds a graph constant that torch\.jit\.save could not write.*"
        r"before optimize_for_inference",
        2,
    ),
    BadInput(
        "state-dict",
        "a torch.save'd state_dict",
        _state_dict,
        r"torch\.save'd state_dict.*torch\.jit\.save",
        2,
    ),
    BadInput(
        "legacy-state-dict",
        "a state_dict saved in torch's legacy (non-zip) format",
        _legacy_state_dict,
        r"torch\.save'd state_dict",
        2,
    ),
    BadInput(
        "whole-module",
        "a torch.save'd whole nn.Module",
        _whole_module,
        r"torch\.save'd pickle of a Python object \(.*TinyNet\).*torch\.jit\.save",
        2,
    ),
    BadInput(
        "hostile-pickle",
        "a pickle whose unpickling would run a shell command",
        _hostile_pickle,
        r"would run code when unpickled \(it calls (os|posix)\.system\)",
        2,
    ),
    BadInput(
        "hostile-torch-save",
        "a torch.save-style zip whose data.pkl would run a shell command",
        _hostile_torch_save,
        r"would run code when unpickled \(it calls (os|posix)\.system\)",
        2,
    ),
    BadInput(
        "hostile-torchscript",
        "a TorchScript archive whose data.pkl would run a shell command",
        _hostile_torchscript,
        r"data\.pkl would call (os|posix)\.system.*refused to load it",
        2,
    ),
    BadInput(
        "bad-map-location",
        "--map-location naming no device",
        _bad_map_location,
        r"--map-location 'gpu0' is not a device",
        2,
        names_file=False,
        stage="usage",
    ),
    BadInput(
        "training-mode",
        "a TorchScript module saved in training mode",
        _training,
        r"training mode.*--eval",
        1,
        stage="plan",
    ),
    BadInput(
        "returns-self",
        "a module whose forward returns self",
        _returns_self,
        r"returns (the module )?(itself|self)",
        1,
        stage="plan",
    ),
    BadInput(
        "module-container-index",
        "a module indexing a ModuleDict at run time (prim::ModuleContainerIndex)",
        _container_index,
        r"ModuleContainerIndex",
        1,
        stage="plan",
    ),
    BadInput(
        "unknown-preserve",
        "--preserve naming no attribute (a typo)",
        _unknown_preserve,
        r"scal.*(did you mean|close|known).*scale",
        2,
        names_file=False,
        stage="usage",
        ok_exit_codes=(1,),
    ),
    BadInput(
        "unknown-dotted-preserve",
        "--preserve naming no attribute of a submodule (bn.runing_mean)",
        _unknown_dotted_preserve,
        r"bn\.runing_mean.*(did you mean|close|known).*bn\.running_mean",
        2,
        names_file=False,
        stage="usage",
        ok_exit_codes=(1,),
    ),
    BadInput(
        "python-method-preserve",
        "--preserve naming a Python method TorchScript never compiled",
        _python_method_preserve,
        r"helper",
        2,
        names_file=False,
        stage="usage",
        ok_exit_codes=(1,),
    ),
    BadInput(
        "malformed-input-shape",
        "a malformed --input-shape (1,3,eight)",
        _bad_input_shape,
        r"input-shape.*1,3,eight",
        2,
        commands=("freeze", "app"),
        names_file=False,
        stage="usage",
        needs=("--input-shape",),
    ),
    BadInput(
        "wrong-input-shape",
        "--input-shape the model cannot take (5 channels for a 3-channel conv)",
        _wrong_input_shape,
        r"input",
        2,
        commands=("freeze", "app"),
        names_file=False,
        stage="usage",
        needs=("--input-shape",),
        ok_exit_codes=(1,),
    ),
    BadInput(
        "wrong-input-dtype",
        "--inputs holding int64 tensors for a float model",
        _wrong_input_dtype,
        r"input",
        2,
        commands=("freeze", "app"),
        names_file=False,
        stage="usage",
        needs=("--inputs",),
        ok_exit_codes=(1,),
    ),
    BadInput(
        "hostile-inputs",
        "--inputs file whose unpickling would run a shell command",
        _hostile_inputs,
        r"inputs\.pt",
        2,
        commands=("freeze", "app"),
        names_file=False,
        stage="usage",
        needs=("--inputs",),
    ),
    BadInput(
        "output-file-as-dir",
        "-o under a path whose parent is a file",
        _out_file_parent,
        r"is a file, not a directory|not a directory",
        2,
        commands=("freeze", "export"),
        names_file=False,
        stage="output",
    ),
    BadInput(
        "output-read-only",
        "-o into a directory nobody may write (/sys)",
        _out_read_only,
        r"not writable|permission denied|read-only|not permitted",
        2,
        commands=("freeze", "export"),
        names_file=False,
        stage="output",
    ),
    BadInput(
        "output-exists",
        "-o naming an existing file, without --force",
        _out_exists,
        r"already (exists|holds).*--force",
        2,
        commands=("freeze", "export"),
        names_file=False,
        stage="output",
    ),
    BadInput(
        "output-is-input",
        "-o naming the input model itself, without --force",
        _out_is_input,
        r"already exists.*--force|is the input",
        2,
        commands=("freeze",),
        names_file=False,
        stage="output",
    ),
    BadInput(
        "output-is-input-forced",
        "-o naming the input model (through a symlink), with --force",
        _out_is_input_forced,
        r"is the (input model|model freezeview is reading).*never overwrites its input",
        2,
        commands=("freeze",),
        names_file=False,
        stage="output",
    ),
    BadInput(
        "dot-missing",
        "Graphviz's dot not on PATH",
        _no_dot,
        r"graphviz|dot",
        1,
        commands=("export",),
        names_file=False,
        stage="environment",
    ),
)


def by_name(name: str) -> BadInput:
    """The catalogue entry called ``name``."""
    for case in CATALOGUE:
        if case.name == name:
            return case
    raise KeyError(name)


def app_catalogue() -> list[tuple[str, Callable[[Path], Path], str]]:
    """``(name, build, message_regex)`` for the inputs that concern opening a model.

    For the app's tests: ``build(tmp_dir)`` returns the model path to open, and the
    error the app shows must match ``message_regex`` (case-insensitive).
    """
    return [
        (case.name, lambda tmp, _c=case: _c.build(tmp).model, case.message)
        for case in CATALOGUE
        if case.stage in ("load", "plan") and "app" in case.commands
    ]
