"""One contract for the engine session: the in-process and the remote session both keep
it, and the engine process answers exactly its calls (freezeview/session/contract.py).

mypy checks the signatures (``freezeview/session/__init__.py``); these tests check what
mypy cannot: the parameters line up by name and order, the engine process's dispatch is
the protocol's, and the options cross the wire as they were given.
"""

from __future__ import annotations

import inspect
import pickle
import threading
from pathlib import Path

import pytest

from freezeview.session import ENGINE_CALLS, EngineSession, SessionOptions
from freezeview.session.contract import SCREEN_SIDE_CALLS, protocol_methods
from freezeview.session.local import Session
from freezeview.session.remote import RemoteSession

METHODS = protocol_methods(EngineSession)


def test_the_protocol_lists_the_calls_the_screen_makes() -> None:
    # Each of these is called by the screen (a typo in the protocol would drop it from
    # the engine process's dispatch).
    assert {"open", "explain", "run_steps", "step_graph", "render_step", "export"} <= set(METHODS)
    assert set(ENGINE_CALLS) | SCREEN_SIDE_CALLS == set(METHODS)
    assert not set(ENGINE_CALLS) & SCREEN_SIDE_CALLS


@pytest.mark.parametrize("implementation", [Session, RemoteSession], ids=lambda c: c.__name__)
@pytest.mark.parametrize("method", METHODS)
def test_each_session_has_the_protocols_method_with_its_parameters(
    implementation: type, method: str
) -> None:
    wanted = list(inspect.signature(getattr(EngineSession, method)).parameters.values())[1:]
    have = list(inspect.signature(getattr(implementation, method)).parameters.values())
    have = have[1:] if have and have[0].name == "self" else have
    assert [p.name for p in have[: len(wanted)]] == [p.name for p in wanted]
    for mine, theirs in zip(have, wanted, strict=False):
        # A default in the protocol is one in each session, the same value.
        assert (mine.default is inspect.Parameter.empty) == (
            theirs.default is inspect.Parameter.empty
        ), (implementation.__name__, method, mine.name)
        if theirs.default is not inspect.Parameter.empty:
            assert mine.default == theirs.default
    # Anything more a session takes is optional: the screen never passes it.
    assert all(p.default is not inspect.Parameter.empty for p in have[len(wanted) :])


def test_an_in_process_session_is_an_engine_session(tmp_path: Path) -> None:
    assert isinstance(Session(path=tmp_path / "m.pt"), EngineSession)


def test_the_engine_process_answers_only_the_protocols_calls(tmp_path: Path) -> None:
    from freezeview.session.engine_process import _Engine

    sent: list[tuple[object, ...]] = []
    done = threading.Event()

    def send(message: tuple[object, ...]) -> None:
        sent.append(message)
        done.set()

    engine = _Engine(tmp_path / "missing.pt", SessionOptions(), send)
    engine.handle(7, "load_again", ())  # a Session method, but no call of the contract
    assert done.wait(30)
    kind, rid, info = sent[0]
    assert (kind, rid) == ("error", 7)
    assert "load_again" in info[1] and not info[3]  # refused by name, no traceback


def test_options_are_one_type_however_they_are_given() -> None:
    options = SessionOptions(
        preserved=["b", "a", "b"],  # type: ignore[arg-type]
        passes=["remove_dropout"],  # type: ignore[arg-type]
        input_shapes=["1,3"],  # type: ignore[arg-type]
        inputs_file="in.pt",  # type: ignore[arg-type]
    )
    assert options.preserved == ("b", "a")  # the user's order, each name once
    assert options.passes == ("remove_dropout",)
    assert options.input_shapes == ("1,3",)
    assert options.inputs_file == Path("in.pt")
    assert pickle.loads(pickle.dumps(options)) == options  # they cross to the engine
