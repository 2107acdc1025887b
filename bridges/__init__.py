"""Bridges to real schedulers: a daemon that steers a live slurmctld with any gpusched policy's ranking and a
kube-scheduler extender that answers filter and prioritize from a placement rule or policy. They use policies and
nothing in the project imports them (``benchmarks/`` aside)."""
