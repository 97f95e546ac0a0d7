"""process room: process groups for engines: free ports, per-launch logs, teardown with proof, no orphans.

Entry points: `group.ProcessGroup` (stopped with a `TeardownReport`), `ports.free_port`, `logfollow.LogFollower`,
and `proctable.group_members` / `proctable.living` for what is left.
"""
