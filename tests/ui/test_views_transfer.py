"""An explain's views crossing from the engine process (``freezeview/ui/views_transfer.py``):
whole the first time, then only what changed, and always the views the engine had."""

from __future__ import annotations

import pickle
from pathlib import Path

from freezeview.ui.views import AttrView
from freezeview.ui.views_transfer import ViewsDecoder, ViewsEncoder


def _views(n: int, kept: set[int] = frozenset()) -> list[AttrView]:  # type: ignore[assignment]
    return [
        AttrView(f"layers.{i}.weight", "parameter", "Tensor", "kept" if i in kept else "folded")
        for i in range(n)
    ]


def test_a_toggle_sends_only_the_views_it_changed() -> None:
    """The first answer goes whole; one that changes two views of a thousand carries
    those two (equal views made anew do not count as changes), and the screen gets
    every view as the engine had it."""
    encoder, decoder = ViewsEncoder(), ViewsDecoder()
    first = _views(1000)
    sent = encoder.encode(first, "tree")
    assert sent.whole is not None
    assert decoder.decode(pickle.loads(pickle.dumps(sent))) == (first, "tree")
    toggled = _views(1000, kept={3, 700})
    sent = encoder.encode(toggled, None)
    assert sent.whole is None and [i for i, _ in sent.changes] == [3, 700]
    assert len(pickle.dumps(sent)) * 20 < len(pickle.dumps(toggled))
    views, tree = decoder.decode(pickle.loads(pickle.dumps(sent)))
    assert views == toggled and tree is None
    back = _views(1000)
    assert decoder.decode(pickle.loads(pickle.dumps(encoder.encode(back, None))))[0] == back


def test_views_of_another_length_or_mostly_changed_go_whole() -> None:
    encoder, decoder = ViewsEncoder(), ViewsDecoder()
    decoder.decode(encoder.encode(_views(10), None))
    longer = _views(12)
    sent = encoder.encode(longer, None)
    assert sent.whole is not None and decoder.decode(sent)[0] == longer
    changed = _views(12, kept=set(range(8)))
    sent = encoder.encode(changed, None)
    assert sent.whole is not None and decoder.decode(sent)[0] == changed


def test_a_decoded_list_is_the_callers_own() -> None:
    """The screen may change the list it gets; the next answer is still decoded from
    the views the engine sent."""
    encoder, decoder = ViewsEncoder(), ViewsDecoder()
    views, _ = decoder.decode(encoder.encode(_views(5), None))
    views.clear()
    toggled = _views(5, kept={1})
    assert decoder.decode(encoder.encode(toggled, None))[0] == toggled


def test_the_screen_gets_the_engines_views_through_toggles(small_pt: Path) -> None:
    """Through the engine process, every toggle's views (torch's statuses first, then
    the reasons) are what the session in this process gives for the same names, also
    after an explain whose answer nobody waited for."""
    import threading

    from freezeview.ui.remote_session import RemoteSession
    from freezeview.ui.session import Session

    local = Session(path=small_pt)
    local.open()
    remote = RemoteSession(small_pt)
    try:
        remote.open()
        cancel = threading.Event()
        cancel.set()
        remote.explain(["head"], cancel=cancel)  # abandoned: its answers still arrive
        for names in ([], ["scale"], [], ["scale", "head"], ["scale"]):
            shown: list[list[AttrView]] = []
            views = remote.explain(names, statuses=shown.append)
            assert views == local.explain(names)
            for pending in shown:
                assert [(v.path, v.status) for v in pending] == [(v.path, v.status) for v in views]
    finally:
        remote.close()
