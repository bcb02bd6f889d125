"""An explain's views crossing from the engine process (``freezeview/session/summaries_wire.py``):
whole the first time, then only what changed, and always the views the engine had."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest

from freezeview.session.summaries import AttrSummary
from freezeview.session.summaries_wire import SummariesDecoder, SummariesEncoder


def _views(n: int, kept: set[int] = frozenset()) -> list[AttrSummary]:  # type: ignore[assignment]
    return [
        AttrSummary(f"layers.{i}.weight", "parameter", "Tensor", "kept" if i in kept else "folded")
        for i in range(n)
    ]


def test_a_toggle_sends_only_the_views_it_changed() -> None:
    """The first answer goes whole; one that changes two views of a thousand carries
    those two (equal views made anew do not count as changes), and the screen gets
    every view as the engine had it."""
    encoder, decoder = SummariesEncoder(), SummariesDecoder()
    first = _views(1000)
    sent = encoder.encode(first, "tree", False)
    assert sent.whole is not None
    assert decoder.decode(pickle.loads(pickle.dumps(sent))) == (first, "tree")
    toggled = _views(1000, kept={3, 700})
    sent = encoder.encode(toggled, None, False)
    assert sent.whole is None and [i for i, _ in sent.changes] == [3, 700]
    assert len(pickle.dumps(sent)) * 20 < len(pickle.dumps(toggled))
    views, tree = decoder.decode(pickle.loads(pickle.dumps(sent)))
    assert views == toggled and tree is None
    back = _views(1000)
    assert decoder.decode(pickle.loads(pickle.dumps(encoder.encode(back, None, False))))[0] == back


def test_statuses_and_reasons_each_change_from_their_own_kind() -> None:
    """A toggle to names never explained sends torch's statuses (every reason pending),
    then the reasons: each is sent as its changes to the last of its kind, the two
    kinds interleaved as explains come."""
    from freezeview.session.explain_turns import PENDING_REASON

    def pending(views: list[AttrSummary]) -> list[AttrSummary]:
        return [dataclasses.replace(v, reasons=(PENDING_REASON,)) for v in views]

    encoder, decoder = SummariesEncoder(), SummariesDecoder()
    for kept in (set(), {1}, {2}, {1, 2}):
        views = _views(100, kept)
        for shown, is_pending in ((pending(views), True), (views, False)):
            sent = encoder.encode(shown, None, is_pending)
            assert decoder.decode(pickle.loads(pickle.dumps(sent)))[0] == shown
            if kept:
                assert sent.whole is None and len(sent.changes) <= 2


def test_views_of_another_length_or_mostly_changed_go_whole() -> None:
    encoder, decoder = SummariesEncoder(), SummariesDecoder()
    decoder.decode(encoder.encode(_views(10), None, False))
    longer = _views(12)
    sent = encoder.encode(longer, None, False)
    assert sent.whole is not None and decoder.decode(sent)[0] == longer
    changed = _views(12, kept=set(range(8)))
    sent = encoder.encode(changed, None, False)
    assert sent.whole is not None and decoder.decode(sent)[0] == changed


def test_a_decoded_list_is_the_callers_own() -> None:
    """The screen may change the list it gets; the next answer is still decoded from
    the views the engine sent."""
    encoder, decoder = SummariesEncoder(), SummariesDecoder()
    views, _ = decoder.decode(encoder.encode(_views(5), None, False))
    views.clear()
    toggled = _views(5, kept={1})
    assert decoder.decode(encoder.encode(toggled, None, False))[0] == toggled


@pytest.mark.slow  # an engine process of its own (2 s)
def test_the_screen_gets_the_engines_views_through_toggles(small_pt: Path) -> None:
    """Through the engine process, every toggle's views (torch's statuses first, then
    the reasons) are what the session in this process gives for the same names, also
    after an explain whose answer nobody waited for."""
    import threading

    from freezeview.session.local import Session
    from freezeview.session.remote import RemoteSession

    local = Session(path=small_pt)
    local.open()
    remote = RemoteSession(small_pt)
    try:
        remote.open()
        cancel = threading.Event()
        cancel.set()
        remote.explain(["head"], cancel=cancel)  # abandoned: its answers still arrive
        for names in ([], ["scale"], [], ["scale", "head"], ["scale"]):
            shown: list[list[AttrSummary]] = []
            views = remote.explain(names, statuses=shown.append)
            assert views == local.explain(names)
            for pending in shown:
                assert [(v.path, v.status) for v in pending] == [(v.path, v.status) for v in views]
    finally:
        remote.close()


def test_a_big_explanation_and_its_module_tree_cross_in_slices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 2,048-block stack's 43k views and its module tree in one ``pickle.loads`` held
    the screen's GIL for 0.1 s: they go in slices, the screen unpickles one at a time
    and lets other threads run between two, and gets what the engine had."""
    from freezeview.engine.graph.inventory_values import AttributeInfo, Inventory, ModuleInfo
    from freezeview.session import summaries_wire

    turns: list[float] = []
    monkeypatch.setattr(summaries_wire, "yield_turn", turns.append)
    views = _views(4500, kept={17, 4321})
    inventory = Inventory(
        modules=[
            ModuleInfo(f"layers.{i}", "Block", "__torch__.Block", ("forward",), ())
            for i in range(1500)
        ],
        attributes=[
            AttributeInfo(v.path, "weight", v.owner, "parameter", "Tensor", shape=(3, 4))
            for v in views
        ],
    )
    encoder, decoder = SummariesEncoder(), SummariesDecoder()
    sent = encoder.encode(views, inventory, False)
    assert sent.whole is None and sent.whole_slices is not None and len(sent.whole_slices) == 5
    assert isinstance(sent.inventory, summaries_wire.InventorySent)
    got, tree = decoder.decode(pickle.loads(pickle.dumps(sent)))
    assert got == views
    assert tree.modules == inventory.modules and tree.attributes == inventory.attributes
    assert tree.by_path("layers.4321.weight") == inventory.attributes[4321]
    assert len(turns) == (5 - 1) + (2 - 1) + (5 - 1)  # between two slices of each list
    # A toggle after it still goes as its changes, against the views sliced.
    toggled = _views(4500, kept={17})
    sent = encoder.encode(toggled, None, False)
    assert sent.whole_slices is None and [i for i, _ in sent.changes] == [4321]
    assert decoder.decode(pickle.loads(pickle.dumps(sent)))[0] == toggled
