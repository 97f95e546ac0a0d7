"""servetune: plan, launch, measure, tune and operate LLM inference servers.

The package is laid out in the order data flows through it: model/hardware -> plan -> process/engines -> load ->
metrics -> suite -> tune -> report, with sim/ as a simulated engine, operate/ running the result and cli/ as the
command over them all (tests/test_floors.py holds the order). Each room's `__init__.py` says what the room is and
names its entry points by module; code imports those modules, never a package (tests/test_exports.py). What every
room shares lives in modules at this level: `errors` (`ServetuneError`), `secrets` (the one rule of secrets),
`fileio` (atomic writes) and `humanize`. Importing `servetune` stays cheap and never imports torch.
"""

__version__ = "0.2.0"
