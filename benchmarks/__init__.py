"""The benchmarks, one folder per claim (benchmarks/README.md is the index).

A package so that each script runs from the repository root as `python -m benchmarks.<folder>.<script>`: it imports
the installed servetune, its siblings as `benchmarks.<folder>.<module>` and the tests' harnesses as `tests.<...>`,
with no `sys.path` patch. The scripts that the device's shell scripts run as
files on the GPU device, where servetune is not installed (`device_campaign/driver.py` and `campaign.py`,
`sim_fidelity/campaign.py`, `tuning_table/`), reach their siblings by path and servetune by `PYTHONPATH=src`.
"""
