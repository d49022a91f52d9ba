"""``gateway.server.compat.AppState``: Starlette's ``State`` semantics, without ``__getattr__``."""

from __future__ import annotations

import pytest

from gateway.app import create_app
from gateway.server.compat import AppState
from gateway.settings import Settings


def test_values_read_by_attribute_and_item_stay_in_step() -> None:
    state = AppState()
    state.service = "a"
    state["ledger"] = "b"
    assert (state.service, state["service"], state.ledger, state["ledger"]) == ("a", "a", "b", "b")
    state.service = "c"
    assert (state.service, state["service"]) == ("c", "c")
    assert sorted(state) == ["ledger", "service"] and len(state) == 2
    # Found by the normal lookup: Starlette's __getattr__ (and its AttributeError) is not
    # on the read path any more.
    assert vars(state)["service"] == "c"
    del state.service
    del state["ledger"]
    assert len(state) == 0
    with pytest.raises(AttributeError):
        _ = state.service
    assert getattr(state, "ledger", None) is None


def test_the_app_uses_it() -> None:
    app = create_app(Settings(models=()))
    assert isinstance(app.state, AppState)
    assert app.state.settings is vars(app.state)["settings"]
