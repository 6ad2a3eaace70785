from tests.support.openclaw.fixtures import (
    model_stand_in,
    openclaw_gateway,
    openclaw_release,
    telegram_stand_in,
)

__all__ = ["model_stand_in", "openclaw_gateway", "openclaw_release", "telegram_stand_in"]
