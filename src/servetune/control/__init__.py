"""control room: the one control-plane HTTP client (health, models, tokenize, metrics, version).

`client.ControlClient(base_url, api_key=..., timeouts=ControlTimeouts(...))`; the streaming hot path is
`servetune.load`'s own.
"""

from servetune.control.client import ControlClient, ControlError, ControlTimeouts, Models, normalize_base_url

__all__ = ["ControlClient", "ControlError", "ControlTimeouts", "Models", "normalize_base_url"]
