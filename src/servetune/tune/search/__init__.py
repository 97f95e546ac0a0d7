"""Which variants to measure and in what order: the ask/tell sources (`sources`: matrix, grid, Bayesian search over
Optuna's TPE in `search`), the simulator's estimates that order or prune (`estimates`), the restart-cost order
(`order`) and the run plan `--check` prints (`plan`)."""
