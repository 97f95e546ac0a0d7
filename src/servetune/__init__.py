"""servetune: plan, launch, measure, tune and operate LLM inference servers.

The package is laid out in the order data flows through it:
model/hardware -> plan -> process/engines -> load -> metrics -> suite -> tune -> report, with sim/ as a
simulated engine.  Importing it must stay cheap and must never import torch.
"""

__version__ = "0.1.0"
