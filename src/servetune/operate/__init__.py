"""Operate: `servetune serve` and `servetune deploy` (issue 10).

An engine config runs under supervision behind a real nginx: readiness by the acceptance probe, liveness by a
real one-token generation with a deadline, deaths classified from the engine's log, restarts with exponential
backoff, a planned fallback profile after a crash loop, blue-green switches without a lost request, graceful
drain on SIGTERM. The same measurements size the files `servetune deploy` writes (nginx, Prometheus rules and
scrape config, a Grafana dashboard, docker compose, Kubernetes, systemd), each number with where it came from.

Modules, one idea each: `events` (JSONL event log), `secrets` (redaction), `metrics` (the supervisor's own
Prometheus series), `commands` and `acceptance` (the two spine seams: engine command line and acceptance probe),
`liveness`, `proxy` (nginx config + process), `source` (configs and measurements from a tuning folder, a file or
a command line), `sizing` (every derived number with its source), `fallback`, `supervisor`, `switch`, `control`
(the supervisor's HTTP face), `alerts`, `deploy`.
"""
