"""Running launch groups: one group's launch → probes → stop (`session`, or the simulator in process: `virtual`),
the `Executor` protocol with `local` (`executor`), side by side on this host's GPUs (`local_gpus`) or a Ray
cluster's nodes (`ray_executor`), the shared queue and retries (`fanout`), a group as its own process (`slot`)
and its messages back to the driver (`relay`)."""
