"""pytest fixtures for tests against a real OpenClaw (tests/openclaw/conftest.py imports
them; another test folder's conftest can too).

`openclaw_release` is parametrized over the releases `make openclaw` installs; a module that
needs one release narrows it:

    pytestmark = pytest.mark.parametrize("openclaw_release", ["2026.9.6"], indirect=True,
                                         scope="module")

Each module gets its own gateway (state folder, ports, token) and stand-ins; a missing install
fails the test with the command that makes it, never skips it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.openclaw.gateway import RELEASES, Gateway, Release
from tests.support.openclaw.install import OpenClawMissing, locate, pinned_releases
from tests.support.openclaw.model import ModelStandIn
from tests.support.openclaw.telegram import TelegramStandIn


@pytest.fixture(scope="module", params=pinned_releases())
def openclaw_release(request: pytest.FixtureRequest) -> Release:
    if request.param not in RELEASES:
        pytest.fail(f"scripts/install-openclaw.sh pins OpenClaw {request.param}, which "
                    "tests/support/openclaw/gateway.py RELEASES does not describe", pytrace=False)
    return RELEASES[request.param]


@pytest.fixture(scope="module")
def model_stand_in() -> Iterator[ModelStandIn]:
    model = ModelStandIn().start()
    try:
        yield model
    finally:
        model.stop()


@pytest.fixture(scope="module")
def telegram_stand_in() -> Iterator[TelegramStandIn]:
    telegram = TelegramStandIn().start()
    try:
        yield telegram
    finally:
        telegram.stop()


@pytest.fixture(scope="module")
def openclaw_gateway(
    openclaw_release: Release,
    model_stand_in: ModelStandIn,
    telegram_stand_in: TelegramStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Gateway]:
    """A started gateway of `openclaw_release`, stopped (SIGKILL after a grace) at the end."""
    try:
        install = locate(openclaw_release.version)
    except OpenClawMissing as missing:
        install, problem = None, str(missing)
    if install is None:
        pytest.fail(problem, pytrace=False)
    root: Path = tmp_path_factory.mktemp(f"openclaw-{openclaw_release.version}")
    gateway = Gateway(install, openclaw_release, root, model_stand_in, telegram_stand_in)
    try:
        yield gateway.start()
    finally:
        gateway.stop()
