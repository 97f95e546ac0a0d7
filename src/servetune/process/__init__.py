"""Process-group lifecycle for engines: free ports, per-launch logs, teardown with proof, no orphans."""
