from __future__ import annotations

import pytest
from settlement_desk import Desk


@pytest.fixture
def desk() -> Desk:
    return Desk()
